package cache

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/kubernetes"
	toolscache "k8s.io/client-go/tools/cache"
)

// Which endpoints really are the local cluster's. A multi-cluster
// EndpointSlice names its source cluster in a label that whoever writes it
// sets, so a peer whose data a controller copies can claim the local
// cluster's ID. The local Service's own EndpointSlices cannot come from a
// peer: kube-controller-manager's EndpointSlice controller writes them from
// the local pods. So an endpoint of a slice that claims the local cluster
// counts as local only when every address of it is in an EndpointSlice of
// the local Service of the same namespace and name (namespace sameness,
// KEP-1645); the others are answered as any other cluster's endpoints. An
// endpoint without a hostname is one endpoint per address (sliceFrom), so
// each of its addresses is proven on its own.
//
// These slices are watched from the first service that prefers the local
// cluster's endpoints (trafficDistribution, or prefer_local, with a local
// cluster known) on, never before: a cluster whose imports prefer nothing
// pays nothing. Until the first list is stored, no endpoint counts as local.
// Only the addresses are kept, 24 bytes each, indexed by service.

// ownSelector selects the EndpointSlices the EndpointSlice controller writes
// for a Service, and no multi-cluster ones. Mirrored slices
// (endpointslicemirroring-controller.k8s.io) are left out: they copy an
// Endpoints object, which anyone allowed to write Endpoints writes.
const ownSelector = discoveryv1.LabelServiceName + "," + discoveryv1.LabelManagedBy + "=endpointslice-controller.k8s.io," +
	"!" + LabelServiceName

// ownSlice is the slim copy of one of the local cluster's own EndpointSlices.
type ownSlice struct {
	Meta
	Service string
	Addrs   []netip.Addr
}

// GetObjectKind implements runtime.Object.
func (*ownSlice) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject implements runtime.Object; slim copies are never modified.
func (s *ownSlice) DeepCopyObject() runtime.Object { return s }

// ownSlices watches the local cluster's own EndpointSlices for the services
// that prefer local endpoints.
type ownSlices struct {
	c   *Controller
	inf toolscache.SharedIndexInformer
	ctx context.Context // Run's; set before any sync
	reg toolscache.ResourceEventHandlerRegistration

	mu         sync.Mutex
	started    bool
	preferring map[string]struct{} // service keys whose answers prefer local endpoints
	running    sync.WaitGroup
}

func newOwnSlices(c *Controller, kube kubernetes.Interface) *ownSlices {
	o := &ownSlices{c: c, preferring: map[string]struct{}{}}
	o.inf = c.sliceInformer("the local Services' EndpointSlices", kube, ownSelector, toolscache.Indexers{sliceByService: func(obj any) ([]string, error) {
		return []string{key(obj.(*ownSlice).Namespace, obj.(*ownSlice).Service)}, nil
	}})
	_ = o.inf.SetTransform(func(obj any) (any, error) {
		es, ok := obj.(*discoveryv1.EndpointSlice)
		if !ok {
			return obj, nil
		}
		s := &ownSlice{Meta: Meta{Namespace: intern(es.Namespace), Name: es.Name, ResourceVersion: es.ResourceVersion},
			Service: es.Labels[discoveryv1.LabelServiceName]}
		for _, e := range es.Endpoints {
			for _, a := range e.Addresses {
				if ip, err := netip.ParseAddr(a); err == nil {
					s.Addrs = append(s.Addrs, ip.Unmap())
				}
			}
		}
		return s, nil
	})
	changed := func(obj any) {
		if s, ok := tombstone(obj).(*ownSlice); ok {
			k := key(s.Namespace, s.Service)
			o.mu.Lock()
			_, p := o.preferring[k]
			o.mu.Unlock()
			if p {
				c.enqueue(k)
			}
		}
	}
	o.reg, _ = o.inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
		DeleteFunc: changed,
	})
	return o
}

// prefer records whether the service k prefers local endpoints and, if it
// does, starts the watch and returns which endpoints of a slice that claims
// the local cluster are proven local (none until the watch has listed, which
// listed says); nil when it does not.
func (o *ownSlices) prefer(k string, prefers bool) (proven func(*Slice, Endpoint) bool, listed bool) {
	o.mu.Lock()
	if !prefers {
		delete(o.preferring, k)
		o.mu.Unlock()
		return nil, false
	}
	o.preferring[k] = struct{}{}
	if !o.started {
		o.started = true
		o.running.Add(2)
		go func() { defer o.running.Done(); o.inf.RunWithContext(o.ctx) }()
		go func() {
			// Once listed, every preferring service is rebuilt with the proof.
			defer o.running.Done()
			if toolscache.WaitForCacheSync(o.ctx.Done(), o.reg.HasSynced) {
				for _, k := range o.keys() {
					o.c.enqueue(k)
				}
			}
		}()
	}
	o.mu.Unlock()
	if !o.reg.HasSynced() {
		return func(*Slice, Endpoint) bool { return false }, false
	}
	own := map[netip.Addr]struct{}{}
	objs, _ := o.inf.GetIndexer().ByIndex(sliceByService, k)
	for _, obj := range objs {
		for _, a := range obj.(*ownSlice).Addrs {
			own[a] = struct{}{}
		}
	}
	return func(_ *Slice, e Endpoint) bool {
		for _, a := range e.Addrs {
			if _, ok := own[a]; !ok {
				return false
			}
		}
		return len(e.Addrs) > 0
	}, true
}

func (o *ownSlices) keys() []string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return slices.Collect(maps.Keys(o.preferring))
}

// settleWithin bounds how long the first build waits for the local
// Services' slices: past it, answers start as every cluster's, and turn
// local once the watch has listed.
const settleWithin = 10 * time.Second

// settle waits, at the first build, for the watch that build started, and
// rebuilds the services that prefer local endpoints with its proof, so that
// they answer the local cluster's from the first answer on.
func (o *ownSlices) settle(ctx context.Context) {
	o.mu.Lock()
	started := o.started
	o.mu.Unlock()
	if !started {
		return
	}
	wait, cancel := context.WithTimeout(ctx, settleWithin)
	defer cancel()
	if !toolscache.WaitForCacheSync(wait.Done(), o.reg.HasSynced) {
		o.c.logf("the local Services' EndpointSlices are not listed after %s: services that prefer local endpoints answer every cluster's until they are", settleWithin)
		return
	}
	for _, k := range o.keys() {
		o.c.sync(k)
	}
}

// wait waits for the watch to end, after Run's context ends.
func (o *ownSlices) wait() { o.running.Wait() }
