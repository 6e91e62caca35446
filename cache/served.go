package cache

import (
	"context"
	"slices"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/discovery"
	toolscache "k8s.io/client-go/tools/cache"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Which ServiceImport versions the API server serves is learnt from
// discovery, and discovery is asked when it may have changed: when the
// ServiceImport CRD, watched by name, changes. A replica that watches the CRD
// makes no other request while nothing changes but a discovery every
// idleDiscovery, a safety net for APIs the CRD does not describe. Without
// permission to watch the CRD it asks discovery every pollDiscovery, as
// before the CRD was watched, and says so once.
const (
	// pollDiscovery is how often discovery is asked while the CRD is not
	// watched (no permission, or not synced yet), and while it fails.
	pollDiscovery = 2 * time.Second
	// idleDiscovery is how often discovery is asked while the CRD is
	// watched and does not change: 3 requests (one per version) in 10
	// minutes.
	idleDiscovery = 10 * time.Minute
	// hurryDiscovery is how often discovery is asked for hurryFor after the
	// CRD changes: the API server's discovery follows a CRD change a little
	// later, and so does a version's removal or addition.
	hurryDiscovery = 500 * time.Millisecond
	hurryFor       = 10 * time.Second
	// crdDeniedRetry is how often a refused CRD list is tried again.
	crdDeniedRetry = time.Minute
)

// ServiceImportCRD is the name of the CustomResourceDefinition that serves
// ServiceImports.
const ServiceImportCRD = mcsv1beta1.ServiceImportPluralName + "." + mcsv1beta1.GroupName

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// discoveryServed is the served function of a real API server: whether its
// discovery lists serviceimports in the group's version.
func discoveryServed(disco discovery.DiscoveryInterface) func(context.Context, string) (bool, error) {
	return func(_ context.Context, version string) (bool, error) {
		list, err := disco.ServerResourcesForGroupVersion(ServiceImports(version).GroupVersion().String())
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		if err != nil {
			return false, err
		}
		for _, r := range list.APIResources {
			if r.Name == mcsv1beta1.ServiceImportPluralName {
				return true, nil
			}
		}
		return false, nil
	}
}

// newCRDWatch watches the ServiceImport CRD, and nothing else, by name (the
// RBAC rule may be limited to that name), and pokes Run whenever it changes.
// An unreachable API server, or a refusal, is waited out as for the other
// watches; a lasting refusal is retried every crdDeniedRetry.
// Only the CRD's name and resourceVersion are kept.
func (c *Controller) newCRDWatch() toolscache.SharedIndexInformer {
	res := c.dyn.Resource(crdResource)
	byName := fields.OneTermEqualSelector("metadata.name", ServiceImportCRD).String()
	inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(c.waitingOutErrors("the ServiceImport CRD", c.crdAccess, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return res.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return res.Watch(ctx, o)
		},
	}), c.dyn), &unstructured.Unstructured{}, 0, toolscache.Indexers{})
	_ = inf.SetTransform(func(obj any) (any, error) {
		u, ok := obj.(*unstructured.Unstructured)
		if !ok {
			return obj, nil
		}
		small := &unstructured.Unstructured{Object: map[string]any{}}
		small.SetName(u.GetName())
		small.SetUID(u.GetUID())
		small.SetResourceVersion(u.GetResourceVersion())
		return small, nil
	})
	_, _ = inf.AddEventHandler(toolscache.ResourceEventHandlerDetailedFuncs{
		// The first list finds the CRD as discovery found it a moment
		// before, as a rule: one more look, not a hurry, so that replicas
		// starting together do not add a burst of discovery.
		AddFunc: func(_ any, initial bool) { c.pokeDiscovery(!initial) },
		UpdateFunc: func(old, obj any) {
			o, ok1 := old.(*unstructured.Unstructured)
			n, ok2 := obj.(*unstructured.Unstructured)
			if ok1 && ok2 && o.GetResourceVersion() == n.GetResourceVersion() {
				return // a relist that found it as it was
			}
			c.pokeDiscovery(true)
		},
		DeleteFunc: func(any) { c.pokeDiscovery(true) },
	})
	return inf
}

// pokeDiscovery tells Run to ask discovery now and, with hurry, often for a
// while; it never blocks.
func (c *Controller) pokeDiscovery(hurry bool) {
	if hurry {
		c.crdHurry.Store(true)
	}
	select {
	case c.crdChanged <- struct{}{}:
	default:
	}
}

// poked is what Run does on a poke: discovery is asked at once and, when
// the CRD changed, often for a while, since the API server's discovery
// follows a CRD change in steps.
func (c *Controller) poked() {
	if c.crdHurry.Swap(false) {
		c.hurryUntil = time.Now().Add(hurryFor)
	}
	c.servedAt = time.Time{}
}

// discoveryGap is how long discovery may go unasked now.
func (c *Controller) discoveryGap() time.Duration {
	switch {
	case c.discoErr:
		return c.every
	case time.Now().Before(c.hurryUntil):
		return c.hurry
	case c.crd.HasSynced() && !c.crdAccess.deniedNow.Load():
		return c.idle
	default:
		return c.every
	}
}

// discover returns which versions the API server serves. It asks discovery
// at most once per discoveryGap and answers from the last reply in between;
// nil while it has no answer yet or the last question failed.
func (c *Controller) discover(ctx context.Context) map[string]bool {
	if time.Since(c.servedAt) < c.discoveryGap() && (c.lastSeen != nil || c.discoErr) {
		if c.discoErr {
			return nil
		}
		return c.lastSeen
	}
	c.servedAt = time.Now()
	served := map[string]bool{}
	for _, v := range Versions {
		ok, err := c.served(ctx, v)
		if err != nil {
			if !c.discoErr {
				c.cfg.Log.Warningf("discovery of %s/%s failed, keeping the current views: %v", mcsv1beta1.GroupName, v, err)
			}
			c.discoErr = true
			return nil
		}
		served[v] = ok
	}
	if c.discoErr {
		c.cfg.Log.Infof("discovery of %s works again", mcsv1beta1.GroupName)
	}
	c.discoErr, c.lastSeen = false, served
	return served
}

// noteServed tells the operator, once per change, about ServiceImport
// versions the API server serves but the configuration does not read, and
// about a cluster that serves none at all.
func (c *Controller) noteServed(served, read map[string]bool) {
	first := c.unread == nil
	if first {
		c.unread = map[string]bool{}
	}
	for _, v := range Versions {
		unread := served[v] && !read[shapeOf[v]]
		if !first && unread == c.unread[v] {
			continue
		}
		c.unread[v] = unread
		switch {
		case unread:
			c.cfg.Log.Warningf("ServiceImport %s is served, but this configuration does not read it, so what is stored in its shape "+
				"has no answers: add %q to the multicluster block to answer from it", v, readOption[v])
		case !first && served[v]:
			c.logf("ServiceImport %s: its shape is now read", v)
		case !first:
			c.logf("ServiceImport %s is no longer served", v)
		}
		if c.cfg.OnUnread != nil {
			c.cfg.OnUnread(v, unread)
		}
	}
	none := !slices.ContainsFunc(Versions, func(v string) bool { return served[v] })
	if none && !c.noCRD {
		c.cfg.Log.Warningf("the API server serves no ServiceImport (%s): install the ServiceImport CRD, sigs.k8s.io/mcs-api's "+
			"config/crd or this plugin's deploy/crds/; until it is served every service name is NXDOMAIN", mcsv1beta1.GroupName)
	} else if !none && c.noCRD {
		c.logf("the API server serves ServiceImports again")
	}
	c.noCRD = none
}

// shapeOf is the shape each version's objects have, whether read or not.
var shapeOf = map[string]string{V1alpha2: "root", V1beta1: "spec", V1alpha1: "spec"}

// readOption is the Corefile option that reads a version the default
// configuration does not.
var readOption = map[string]string{V1alpha1: "fallback v1alpha1"}
