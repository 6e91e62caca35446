package cache

import (
	"context"
	"fmt"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"
)

// The local cluster is the one whose endpoints a headless service that
// prefers close endpoints answers alone, while it has some ready. Its ID is
// the Config's ClusterID, or else the value of the ClusterProperty
// cluster.clusterset.k8s.io (KEP-2149, group about.k8s.io), watched by name,
// so that the RBAC rule can name that one object. The about-api module is not
// on the Go module proxy: the property is read as unstructured, spec.value.
// Without either, no service prefers anything: the answers are the same as
// without this file.

// ClusterIDProperty is the name of the ClusterProperty that holds the
// cluster's ID within its ClusterSet.
const ClusterIDProperty = "cluster.clusterset.k8s.io"

// ClusterPropertyResource is the ClusterProperty resource; v1beta1 is the storage
// version of about-api's CRD, v1alpha1 the version before it.
var (
	ClusterPropertyResource  = schema.GroupResource{Group: "about.k8s.io", Resource: "clusterproperties"}
	clusterPropertyVersions  = []string{"v1beta1", "v1alpha1"}
	clusterPropertyAbsentFor = 5 * time.Minute // how often a cluster without the ClusterProperty API is asked again
)

// localFor returns the cluster whose endpoints alone answer at im's names
// while one is ready: local, the local cluster, for a headless import that
// prefers close endpoints (trafficDistribution, or PreferLocal for every
// one); "" for no preference.
func (cfg *Config) localFor(im *Import, local string) string {
	if !im.Headless || !(im.PreferClose || cfg.PreferLocal) {
		return ""
	}
	return local
}

// localCluster is the local cluster's ID, "" while unknown.
func (c *Controller) localCluster() string {
	if c.cfg.ClusterID != "" {
		return c.cfg.ClusterID
	}
	if id := c.clusterID.Load(); id != nil {
		return *id
	}
	return ""
}

// clusterKnown reports whether the local cluster is as known as it will be
// at start-up: set in the Config, or the ClusterProperty read, or found
// missing, or its reading refused. Answers wait for it, so that a service
// that prefers close endpoints does not answer every cluster's first.
func (c *Controller) clusterKnown() bool {
	return c.cluster == nil || c.clusterSettled.Load() || c.clusterHandler.HasSynced()
}

// newClusterWatch watches the ClusterProperty cluster.clusterset.k8s.io
// through the first of clusterPropertyVersions served. While none is served,
// it asks again every clusterPropertyAbsentFor, quietly after the first time.
// A refusal is waited out as for the other watches, and reported once.
func (c *Controller) newClusterWatch() toolscache.SharedIndexInformer {
	var mu sync.Mutex
	version := clusterPropertyVersions[0] // the version last listed
	absentSaid := false
	list := func(ctx context.Context, o metav1.ListOptions) (*unstructured.UnstructuredList, error) {
		for {
			for _, v := range clusterPropertyVersions {
				obj, err := c.dyn.Resource(ClusterPropertyResource.WithVersion(v)).List(ctx, o)
				if apierrors.IsNotFound(err) {
					continue
				}
				mu.Lock()
				version = v
				absentSaid = absentSaid && err != nil
				mu.Unlock()
				return obj, err
			}
			mu.Lock()
			if !absentSaid {
				absentSaid = true
				c.logf("the API server serves no ClusterProperty (about.k8s.io): the local cluster is unknown, "+
					"so headless services answer every cluster's endpoints; asked again every %s", clusterPropertyAbsentFor)
			}
			mu.Unlock()
			c.setCluster("", "no ClusterProperty API is served")
			c.clusterSettled.Store(true)
			select {
			case <-ctx.Done():
				return nil, ctx.Err()
			case <-time.After(clusterPropertyAbsentFor):
			}
		}
	}
	watchFunc := func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
		mu.Lock()
		v := version
		mu.Unlock()
		w, err := c.dyn.Resource(ClusterPropertyResource.WithVersion(v)).Watch(ctx, o)
		if err == nil {
			mu.Lock()
			absentSaid = false
			mu.Unlock()
		}
		return w, err
	}
	inf := c.watchByName("the ClusterProperty "+ClusterIDProperty, ClusterIDProperty, c.clusterAccess, list, watchFunc, []string{"spec", "value"})
	// property is obj when it is the ClusterProperty (a fake client's list
	// may hold others), else nil.
	property := func(obj any) *unstructured.Unstructured {
		if u, ok := tombstone(obj).(*unstructured.Unstructured); ok && u.GetName() == ClusterIDProperty {
			return u
		}
		return nil
	}
	follow := func(obj any) {
		if u := property(obj); u != nil {
			value, _, _ := unstructured.NestedString(u.Object, "spec", "value")
			if errs := validation.IsDNS1123Subdomain(value); len(errs) > 0 {
				c.setCluster("", fmt.Sprintf("ClusterProperty %s says %q, which is not a cluster ID (an RFC 1123 subdomain)", ClusterIDProperty, value))
				return
			}
			c.setCluster(value, "")
		}
	}
	c.clusterHandler, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    follow,
		UpdateFunc: func(_, obj any) { follow(obj) },
		DeleteFunc: func(obj any) {
			if property(obj) != nil {
				c.setCluster("", "ClusterProperty "+ClusterIDProperty+" is gone")
			}
		},
	})
	return inf
}

// setCluster records the local cluster's ID from the ClusterProperty ("" and
// why when unknown) and, once answers are built, rebuilds every service when
// it changes: the answers of those that prefer close endpoints change with
// it. It logs each change, once.
func (c *Controller) setCluster(id, why string) {
	old := c.clusterID.Swap(&id)
	if old != nil && *old == id || old == nil && id == "" {
		return
	}
	if id == "" {
		c.cfg.Log.Warningf("the local cluster is unknown: %s; headless services answer every cluster's endpoints", why)
	} else {
		c.logf("the local cluster is %q (ClusterProperty %s)", id, ClusterIDProperty)
	}
	if c.live.Load() {
		c.syncAll()
	}
}
