package cache

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"time"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
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
// permission to watch the CRD (the official coredns chart grants none) it
// asks discovery every deniedDiscovery, says so once, and tries the CRD
// again every crdDeniedRetry: 2.2 requests a minute when idle.
const (
	// pollDiscovery is how often discovery is asked while the CRD watch
	// is starting, and while discovery fails.
	pollDiscovery = 2 * time.Second
	// deniedDiscovery is how often discovery is asked while the CRD may
	// not be watched: a version that starts or stops being served is
	// followed within this long.
	deniedDiscovery = 30 * time.Second
	// idleDiscovery is how often discovery is asked while the CRD is
	// watched and does not change: one request in 10 minutes.
	idleDiscovery = 10 * time.Minute
	// hurryDiscovery is how often discovery is asked for hurryFor after the
	// CRD changes: the API server's discovery follows a CRD change a little
	// later, and so does a version's removal or addition.
	hurryDiscovery = 500 * time.Millisecond
	hurryFor       = 10 * time.Second
	// crdDeniedRetry is how often a refused CRD list is tried again: a
	// rule granted later takes effect within this long.
	crdDeniedRetry = 5 * time.Minute
)

// ServiceImportCRD is the name of the CustomResourceDefinition that serves
// ServiceImports.
const ServiceImportCRD = mcsv1beta1.ServiceImportPluralName + "." + mcsv1beta1.GroupName

var crdResource = schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"}

// discoveryServed is the served function of a real API server: which
// versions of the group list serviceimports. One request answers for every
// version: the aggregated discovery document of /apis (apidiscovery v2 since
// Kubernetes 1.30, v2beta1 in 1.27 to 1.29). An API server without it
// answers /apis with the plain group list, and only the versions of the
// group it lists are asked, one by one.
func discoveryServed(disco discovery.DiscoveryInterface) func(context.Context) (map[string]bool, error) {
	return func(ctx context.Context) (map[string]bool, error) {
		versions := Versions
		if rc := disco.RESTClient(); rc != nil {
			raw, err := rc.Get().AbsPath("/apis").SetHeader("Accept", aggregatedAccept).Do(ctx).Raw()
			if err != nil {
				return nil, err
			}
			if served, ok := servedIn(raw); ok {
				return served, nil
			}
			var groups metav1.APIGroupList
			if err := json.Unmarshal(raw, &groups); err != nil {
				return nil, fmt.Errorf("reading /apis: %w", err)
			}
			versions = nil
			for _, g := range groups.Groups {
				for _, v := range g.Versions {
					if g.Name == mcsv1beta1.GroupName && slices.Contains(Versions, v.Version) {
						versions = append(versions, v.Version)
					}
				}
			}
		}
		served := map[string]bool{}
		for _, v := range versions {
			list, err := disco.ServerResourcesForGroupVersion(ServiceImports(v).GroupVersion().String())
			if apierrors.IsNotFound(err) {
				continue
			}
			if err != nil {
				return nil, err
			}
			for _, r := range list.APIResources {
				if r.Name == mcsv1beta1.ServiceImportPluralName {
					served[v] = true
				}
			}
		}
		return served, nil
	}
}

// aggregatedAccept asks for the aggregated discovery document, v2 or
// v2beta1, or the plain group list where the API server has neither.
const aggregatedAccept = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList," +
	"application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json"

// servedIn reads an aggregated discovery document (v2 and v2beta1 share the
// fields read): the versions of the group that list serviceimports, and
// whether raw was such a document.
func servedIn(raw []byte) (map[string]bool, bool) {
	var doc apidiscoveryv2.APIGroupDiscoveryList
	if err := json.Unmarshal(raw, &doc); err != nil || doc.Kind != "APIGroupDiscoveryList" {
		return nil, false
	}
	served := map[string]bool{}
	for _, g := range doc.Items {
		if g.Name != mcsv1beta1.GroupName {
			continue
		}
		for _, v := range g.Versions {
			for _, r := range v.Resources {
				if r.Resource == mcsv1beta1.ServiceImportPluralName && slices.Contains(Versions, v.Version) {
					served[v.Version] = true
				}
			}
		}
	}
	return served, true
}

// newCRDWatch watches the ServiceImport CRD, and nothing else, by name (the
// RBAC rule may be limited to that name), and pokes Run whenever it changes.
// An unreachable API server, or a refusal, is waited out as for the other
// watches; a lasting refusal is retried every crdDeniedRetry.
func (c *Controller) newCRDWatch() toolscache.SharedIndexInformer {
	res := c.dyn.Resource(crdResource)
	inf := c.watchByName("the ServiceImport CRD", ServiceImportCRD, c.crdAccess, res.List, res.Watch)
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

// dataLeft is told that an answered object's data left every shape an
// answering view reads (mayBeUnread): rewritten into a shape no view reads
// yet, perhaps through a version that has just started being served, which
// only discovery can tell, whether the CRD is watched or not (its event may
// come later than the object's). Discovery is asked at once, at most once
// per hurryFor however many objects move (a call within it asks at its
// end, so that none waits for the next poll), and without a hurry: the
// version was served before anything could be written through it.
func (c *Controller) dataLeft() {
	now := time.Now().UnixNano()
	last := c.dataLeftAt.Load()
	if wait := hurryFor - time.Duration(now-last); wait > 0 {
		if c.dataLeftLater.CompareAndSwap(false, true) {
			time.AfterFunc(wait, func() {
				c.dataLeftLater.Store(false)
				c.dataLeft()
			})
		}
		return
	}
	if !c.dataLeftAt.CompareAndSwap(last, now) {
		return
	}
	c.pokeDiscovery(false)
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
	case c.crdAccess.deniedNow.Load():
		return c.denied
	case c.crd.HasSynced():
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
	asked := c.discoAsked.Add(1)
	served, err := c.served(ctx)
	if err != nil {
		if !c.discoErr {
			c.cfg.Log.Warningf("discovery of %s failed, keeping the current views: %v", mcsv1beta1.GroupName, err)
		}
		c.discoErr = true
		return nil
	}
	if c.discoErr {
		c.cfg.Log.Infof("discovery of %s works again", mcsv1beta1.GroupName)
	}
	c.discoErr, c.lastSeen, c.discoAnswered = false, served, asked
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

// watchByName makes an informer of the one object called name that list and
// watch return (a CRD, a cluster-scoped object): both ask for it by name,
// with a field selector, so that the RBAC rule may name it alone. Errors are
// waited out as access says. The store keeps the object's name, UID,
// resourceVersion and the string fields at the paths keep, nothing else.
func (c *Controller) watchByName(what, name string, access *permission,
	list func(context.Context, metav1.ListOptions) (*unstructured.UnstructuredList, error),
	watchFunc func(context.Context, metav1.ListOptions) (watch.Interface, error), keep ...[]string) toolscache.SharedIndexInformer {
	byName := fields.OneTermEqualSelector("metadata.name", name).String()
	inf := toolscache.NewSharedIndexInformer(toolscache.ToListWatcherWithWatchListSemantics(c.waitingOutErrors(what, access, &toolscache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = byName
			return list(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = byName
			return watchFunc(ctx, o)
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
		for _, path := range keep {
			if v, ok, _ := unstructured.NestedString(u.Object, path...); ok {
				_ = unstructured.SetNestedField(small.Object, v, path...)
			}
		}
		return small, nil
	})
	return inf
}
