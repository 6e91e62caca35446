package cache

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"

	"github.com/miekg/dns"
)

var (
	gvr2    = ServiceImports(V1alpha2)
	gvr1    = ServiceImports(V1alpha1)
	gvrBeta = ServiceImports(V1beta1)

	listKinds = map[schema.GroupVersionResource]string{gvr2: "ServiceImportList", gvrBeta: "ServiceImportList", gvr1: "ServiceImportList",
		crdResource: "CustomResourceDefinitionList",
		ClusterPropertyResource.WithVersion("v1beta1"): "ClusterPropertyList", ClusterPropertyResource.WithVersion("v1alpha1"): "ClusterPropertyList"}
)

type env struct {
	servedMu  sync.Mutex
	servedSet map[string]bool
	t         testing.TB
	dyn       *dynamicfake.FakeDynamicClient
	configure func(*Config) // set by startWith's hook: changes the Config before New
	kube      *kubefake.Clientset
	c         *Controller
	mu        sync.Mutex
	skip      map[string]int
	logs      []string
	unread    map[string]bool
	patience  time.Duration // how long eventually waits; 5s unless a hook sets it
	deniedGap time.Duration // discovery's interval while the CRD watch is refused; 20ms unless a hook sets it
	rounds    int           // discoveries begun: calls of isServed; under servedMu
	marks     int           // markers written by settle and settleSlices
}

func (e *env) Infof(format string, args ...any)    { e.log("I "+format, args...) }
func (e *env) Warningf(format string, args ...any) { e.log("W "+format, args...) }

func (e *env) log(format string, args ...any) {
	e.mu.Lock()
	e.logs = append(e.logs, fmt.Sprintf(format, args...))
	e.mu.Unlock()
}

// logged returns the log lines that contain s.
func (e *env) logged(s string) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	var out []string
	for _, l := range e.logs {
		if strings.Contains(l, s) {
			out = append(out, l)
		}
	}
	return out
}

// servedOnly, when set before start, is what discovery reports at first.
var servedOnly map[string]bool

func (e *env) isServed(context.Context) (map[string]bool, error) {
	e.servedMu.Lock()
	defer e.servedMu.Unlock()
	e.rounds++
	return maps.Clone(e.servedSet), nil
}

// discoveries returns once n discoveries, each with the reconcile that
// follows it, have run from start to end after the call. Run asks for the
// versions once per discovery and reconciles before it asks again, so
// once n+1 discoveries have begun since the call, the first n of them are
// finished and saw whatever was served at the call.
func (e *env) discoveries(n int) {
	e.t.Helper()
	e.servedMu.Lock()
	from := e.rounds
	e.servedMu.Unlock()
	e.eventually(fmt.Sprintf("%d discoveries", n), func() error {
		e.servedMu.Lock()
		begun := e.rounds - from
		e.servedMu.Unlock()
		if begun <= n {
			return fmt.Errorf("%d discoveries begun since, want %d finished", begun, n)
		}
		return nil
	})
}

// serve makes discovery report versions, and changes the ServiceImport CRD
// as the API server would, which is what makes the controller ask.
func (e *env) serve(versions ...string) {
	e.servedMu.Lock()
	e.servedSet = map[string]bool{}
	for _, v := range versions {
		e.servedSet[v] = true
	}
	e.servedMu.Unlock()
	e.t.Helper()
	crds := e.dyn.Resource(crdResource)
	ctx := context.Background()
	crd, err := crds.Get(ctx, ServiceImportCRD, metav1.GetOptions{})
	if err != nil {
		crd = &unstructured.Unstructured{}
		crd.SetAPIVersion("apiextensions.k8s.io/v1")
		crd.SetKind("CustomResourceDefinition")
		crd.SetName(ServiceImportCRD)
		crd.SetResourceVersion("1")
		_, err = crds.Create(ctx, crd, metav1.CreateOptions{})
	} else {
		rv, _ := strconv.Atoi(crd.GetResourceVersion())
		crd.SetResourceVersion(strconv.Itoa(rv + 1))
		_, err = crds.Update(ctx, crd, metav1.UpdateOptions{})
	}
	if err != nil {
		e.t.Fatal(err)
	}
}

// skips is how often reason was counted.
func (e *env) skips(reason string) int {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.skip[reason]
}

func start(t testing.TB, fallback bool, objs ...runtime.Object) *env {
	t.Helper()
	return startWith(t, fallback, nil, objs...)
}

// startWith is start with a hook that may add reactors to the fake clients
// before the controller starts.
func startWith(t testing.TB, fallback bool, hook func(*env), objs ...runtime.Object) *env {
	t.Helper()
	var dynObjs, kubeObjs []runtime.Object
	for _, o := range objs {
		if _, ok := o.(*unstructured.Unstructured); ok {
			dynObjs = append(dynObjs, o)
		} else {
			kubeObjs = append(kubeObjs, o)
		}
	}
	e := &env{t: t, skip: map[string]int{}, unread: map[string]bool{}, patience: 5 * time.Second}
	e.dyn = dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		listKinds, dynObjs...)
	e.kube = kubefake.NewClientset(kubeObjs...)
	if hook != nil {
		hook(e)
	}
	cfg := Config{Zones: []string{"clusterset.local."}, TTL: 5, Fallback: fallback,
		OnSkip:   func(kind, reason string) { e.mu.Lock(); e.skip[reason]++; e.mu.Unlock() },
		OnUnread: func(v string, unread bool) { e.mu.Lock(); e.unread[v] = unread; e.mu.Unlock() },
		Log:      e}
	if e.configure != nil {
		e.configure(&cfg)
	}
	e.c = New(e.dyn, fakeImports{e.dyn}, e.kube, cfg)
	e.c.served = e.isServed
	e.c.every = 20 * time.Millisecond
	e.c.denied = cmp.Or(e.deniedGap, 20*time.Millisecond)
	e.c.hurry = 20 * time.Millisecond
	e.servedSet = map[string]bool{V1alpha2: true, V1alpha1: true}
	if servedOnly != nil {
		e.servedSet = servedOnly
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); e.c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	e.eventually("synced", func() error {
		if !e.c.HasSynced() {
			return fmt.Errorf("not synced")
		}
		return nil
	})
	return e
}

func (e *env) eventually(what string, f func() error) {
	e.t.Helper()
	deadline := time.Now().Add(e.patience)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("%s: %v", what, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readLoop reads the service k in a loop until the returned function is
// called; that returns how many reads missed its one address (no answer, or
// not one address) and how many there were.
func (e *env) readLoop(k string) func() (misses, reads int64) {
	var m, r atomic.Int64
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			r.Add(1)
			if s := e.c.Lookup(k); s == nil || len(s.IPs()) != 1 {
				m.Add(1)
			}
		}
	}()
	return func() (int64, int64) {
		close(stop)
		<-done
		return m.Load(), r.Load()
	}
}

func (e *env) wantAddrs(k string, want ...string) {
	e.t.Helper()
	e.eventually(k, func() error {
		s := e.c.Lookup(k)
		var got []string
		if s != nil {
			got = addrsOf(s)
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			return fmt.Errorf("addresses %v, want %v", got, want)
		}
		return nil
	})
}

// haveAddrs is wantAddrs without the wait: what k answers now.
func (e *env) haveAddrs(k string, want ...string) {
	e.t.Helper()
	var got []string
	if s := e.c.Lookup(k); s != nil {
		got = addrsOf(s)
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		e.t.Errorf("%s: addresses %v, want %v", k, got, want)
	}
}

// Barriers. A test that asserts an event changed nothing must first know
// that the controller has processed it. settle and settleSlices return once
// every event an informer had delivered before the call has been synced:
// they write a marker through the same informer and wait until it is
// answered, twice. An informer stores its events and hands them to its
// handler in order, and the one worker takes keys first in, first out, so
// the event's key is queued ahead of the first marker. The second marker
// covers a key that was being synced when the event came: the queue puts it
// back only when that sync ends, which may be behind the first marker but
// is before the worker takes the first marker, so ahead of the second one.
// Markers live in namespace markNS, apart from what a test asserts. The
// views must stay as they are meanwhile: a change of views rebuilds every
// service outside the queue.
const markNS = "barrier"

// settle waits until the events of the ServiceImport view of gvr's version
// delivered so far are synced; that version must have a view.
func (e *env) settle(gvr schema.GroupVersionResource) {
	e.t.Helper()
	name := "mark-" + gvr.Version
	for range 2 {
		e.marks++
		rv := strconv.Itoa(1_000_000 + e.marks) // newer than every other write
		var u *unstructured.Unstructured
		switch gvr {
		case gvr2:
			u = v2(markNS, name, rv, "ClusterSetIP", "10.255.0.1")
		case gvrBeta:
			u = beta(markNS, name, rv, "ClusterSetIP", "10.255.0.1")
		case gvr1:
			u = v1(markNS, name, rv, "ClusterSetIP", "10.255.0.1")
		default:
			e.t.Fatalf("settle: no marker for %v", gvr)
		}
		e.apply(gvr, u)
		e.eventually("marker "+name+" answered at "+rv, func() error {
			if s := e.c.Lookup(name + "." + markNS); s == nil || s.ResourceVersion() != rv {
				return fmt.Errorf("answer %v", s)
			}
			return nil
		})
	}
}

// sliceMarker is what settleSlices needs among a test's first objects: a
// headless ServiceImport in v1alpha2 and one EndpointSlice of it. Being
// there from the start, they are synced before the test writes anything.
func sliceMarker() []runtime.Object {
	return []runtime.Object{v2(markNS, "mark-slices", "1", "Headless"),
		mcSlice(markNS, "mark-slices-a", "mark-slices", "west", "10.255.1.0")}
}

// settleSlices waits until the EndpointSlice events delivered so far are
// synced; the test started with sliceMarker's objects.
func (e *env) settleSlices() {
	e.t.Helper()
	slices := e.kube.DiscoveryV1().EndpointSlices(markNS)
	for range 2 {
		e.marks++
		ip := fmt.Sprintf("10.255.%d.%d", 2+e.marks/250, e.marks%250)
		if _, err := slices.Update(context.Background(), mcSlice(markNS, "mark-slices-a", "mark-slices", "west", ip), metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
		e.wantAddrs("mark-slices."+markNS, ip)
	}
}

// addrsOf is what the service's A and AAAA answers hold, A first.
func addrsOf(s *Service) []string {
	var got []string
	if !s.Headless() {
		for _, v4 := range []bool{true, false} {
			for _, ip := range s.IPs() {
				if ip.Is4() == v4 {
					got = append(got, ip.String())
				}
			}
		}
		return got
	}
	for _, rr := range append(append([]dns.RR(nil), s.Zone(0).Service.A...), s.Zone(0).Service.AAAA...) {
		got = append(got, rrAddr(rr))
	}
	return got
}

func v2(ns, name, rv string, typ string, ips ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha2", "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": rv},
		"spec":     map[string]any{},
	}}
	if typ != "" {
		u.Object["type"] = typ
		u.Object["ports"] = []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}
		if len(ips) > 0 {
			u.Object["ips"] = toAnyStrings(ips)
		}
	}
	return u
}

func v1(ns, name, rv string, typ string, ips ...string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": ns, "name": name, "resourceVersion": rv},
	}}
	if typ != "" {
		spec := map[string]any{"type": typ, "ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}}
		if len(ips) > 0 {
			spec["ips"] = toAnyStrings(ips)
		}
		u.Object["spec"] = spec
	}
	return u
}

func toAnyStrings(s []string) []any {
	out := make([]any, len(s))
	for i := range s {
		out[i] = s[i]
	}
	return out
}

func mcSlice(ns, name, svc, cluster string, ips ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{LabelServiceName: svc, LabelSourceCluster: cluster}}, AddressType: discoveryv1.AddressTypeIPv4}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return es
}

func (e *env) apply(gvr schema.GroupVersionResource, u *unstructured.Unstructured) {
	e.t.Helper()
	res := e.dyn.Resource(gvr).Namespace(u.GetNamespace())
	if _, err := res.Update(context.Background(), u, metav1.UpdateOptions{}); err != nil {
		if _, err := res.Create(context.Background(), u, metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

func (e *env) remove(gvr schema.GroupVersionResource, ns, name string) {
	e.t.Helper()
	if err := e.dyn.Resource(gvr).Namespace(ns).Delete(context.Background(), name, metav1.DeleteOptions{}); err != nil {
		e.t.Fatal(err)
	}
}

func TestControllerFollowsObjects(t *testing.T) {
	e := start(t, false, v2("demo", "web", "1", "ClusterSetIP", "10.0.0.1"),
		v2("demo", "db", "1", "Headless"), mcSlice("demo", "db-a", "db", "west", "10.1.0.1"))
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantAddrs("db.demo", "10.1.0.1")
	if !e.c.HasNamespace("demo") || e.c.HasNamespace("other") {
		t.Error("namespace index")
	}
	serial := e.c.Serial()

	// Update and create a ServiceImport, then an EndpointSlice.
	e.apply(gvr2, v2("demo", "web", "2", "ClusterSetIP", "10.0.0.2", "fd00::2"))
	e.wantAddrs("web.demo", "10.0.0.2", "fd00::2")
	if e.c.Serial() <= serial {
		t.Error("serial did not move on change")
	}
	e.apply(gvr2, v2("other", "api", "3", "ClusterSetIP", "10.0.0.3"))
	e.wantAddrs("api.other", "10.0.0.3")

	ctx := context.Background()
	if _, err := e.kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, mcSlice("demo", "db-b", "db", "east.prod", "10.2.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.1.0.1", "10.2.0.1")
	if _, err := e.kube.DiscoveryV1().EndpointSlices("demo").Update(ctx, mcSlice("demo", "db-b", "db", "east.prod", "10.2.0.9"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.1.0.1", "10.2.0.9")
	if err := e.kube.DiscoveryV1().EndpointSlices("demo").Delete(ctx, "db-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.2.0.9")
	if err := e.kube.DiscoveryV1().EndpointSlices("demo").Delete(ctx, "db-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo") // no ready endpoint left: no name

	e.remove(gvr2, "demo", "web")
	e.wantAddrs("web.demo")
	e.remove(gvr2, "other", "api")
	e.eventually("namespace gone", func() error {
		if e.c.HasNamespace("other") {
			return fmt.Errorf("namespace other still indexed")
		}
		return nil
	})
}

func TestControllerSameAnswersKeepSerial(t *testing.T) {
	e := start(t, false, v2("demo", "web", "1", "ClusterSetIP", "10.0.0.1"))
	e.wantAddrs("web.demo", "10.0.0.1")
	serial := e.c.Serial()
	u := v2("demo", "web", "2", "ClusterSetIP", "10.0.0.1")
	u.SetLabels(map[string]string{"unrelated": "change"})
	e.apply(gvr2, u)
	e.eventually("new view taken", func() error {
		if rv := e.c.Lookup("web.demo").ResourceVersion(); rv != "2" {
			return fmt.Errorf("view at %s", rv)
		}
		return nil
	})
	if e.c.Serial() != serial {
		t.Errorf("serial moved from %d to %d without an answer changing", serial, e.c.Serial())
	}
}

func TestControllerWithoutFallbackIgnoresV1alpha1(t *testing.T) {
	e := start(t, false, v1("demo", "old", "1", "ClusterSetIP", "10.0.0.1"), v2("demo", "old", "1", ""))
	e.wantAddrs("old.demo")
}

// An import whose data is refused (a type that is none of the two, a name
// that is not a DNS label) is counted for that, and not also as data lost,
// though every view reads it without usable data: the view of its shape
// holds it. Its answers go.
func TestControllerRefusedIsNotLost(t *testing.T) {
	e := start(t, true, append(sliceMarker(),
		v2("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), v1("demo", "web", "5", ""),
		v2("demo", "a.b", "5", "ClusterSetIP", "10.0.0.2"), v1("demo", "a.b", "5", ""))...)
	e.wantAddrs("web.demo", "10.0.0.1")
	e.apply(gvr2, v2("demo", "web", "6", "ExternalName", "10.0.0.1"))
	e.apply(gvr1, v1("demo", "web", "6", ""))
	e.wantAddrs("web.demo")
	e.settle(gvr1)
	e.settle(gvr2)
	if e.c.Lookup("a.b.demo") != nil {
		t.Error("a.b is answered")
	}
	for reason, want := range map[string]int{ReasonBadType: 1, ReasonBadServiceName: 1, ReasonDataLost: 0} {
		if n := e.skips(reason); n != want {
			t.Errorf("%s counted %d times, want %d", reason, n, want)
		}
	}
}

// The two views of one object under conversion None: data in at most one,
// each view catching up at its own moment.
func TestControllerFallbackMerge(t *testing.T) {
	e := start(t, true, append(sliceMarker(),
		v1("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), v2("demo", "web", "5", ""),
		v2("demo", "api", "7", "ClusterSetIP", "10.0.0.7"), v1("demo", "api", "7", ""))...)
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantAddrs("api.demo", "10.0.0.7")
	if v := e.c.Lookup("web.demo").Version(); v != V1alpha1 {
		t.Errorf("web answered from %s", v)
	}

	// The object is rewritten in v1alpha2 shape (rv 6). The v1alpha1 view
	// catches up first and reads empty: the answer must stay.
	e.apply(gvr1, v1("demo", "web", "6", ""))
	e.settle(gvr1)
	e.haveAddrs("web.demo", "10.0.0.1")
	e.apply(gvr2, v2("demo", "web", "6", "ClusterSetIP", "10.0.0.2"))
	e.wantAddrs("web.demo", "10.0.0.2")
	if v := e.c.Lookup("web.demo").Version(); v != V1alpha2 {
		t.Errorf("web answered from %s", v)
	}

	// Both views with data: the newer one wins (the other is stale).
	e.apply(gvr1, v1("demo", "api", "6", "ClusterSetIP", "10.0.0.6"))
	e.settle(gvr1)
	e.haveAddrs("api.demo", "10.0.0.7")

	// Written through the non-storage version: no view has data at the same
	// version. Treated as absent, counted.
	// The v1alpha2 view reads empty first; the older v1alpha1 data must not
	// come back in the meantime.
	e.apply(gvr2, v2("demo", "api", "9", ""))
	e.settle(gvr2)
	e.haveAddrs("api.demo", "10.0.0.7")
	e.apply(gvr1, v1("demo", "api", "9", ""))
	e.wantAddrs("api.demo")
	e.mu.Lock()
	lost := e.skip[ReasonDataLost]
	e.mu.Unlock()
	if lost == 0 {
		t.Error("data loss not reported")
	}
	// Another rebuild of the service (a slice event) does not say it again.
	if _, err := e.kube.DiscoveryV1().EndpointSlices("demo").Create(context.Background(), mcSlice("demo", "api-x", "api", "west", "10.9.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.settleSlices()
	e.mu.Lock()
	again := e.skip[ReasonDataLost]
	e.mu.Unlock()
	if again != lost {
		t.Errorf("data loss reported %d times, then %d after a rebuild: want once per write", lost, again)
	}

	// A delete seen by one view first: keep answering until both agree.
	e.remove(gvr2, "demo", "web")
	e.settle(gvr2)
	e.haveAddrs("web.demo", "10.0.0.2")
	e.remove(gvr1, "demo", "web")
	e.wantAddrs("web.demo")
}

func TestControllerNamespacesFilter(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		listKinds,
		v2("a", "web", "1", "ClusterSetIP", "10.0.0.1"), v2("b", "web", "1", "ClusterSetIP", "10.0.0.2"))
	c := runSynced(t, New(dyn, fakeImports{dyn}, kubefake.NewClientset(), Config{Zones: []string{"clusterset.local."}, TTL: 5, Namespaces: []string{"a"}}))
	if c.Lookup("web.a") == nil || c.Lookup("web.b") != nil {
		t.Errorf("namespaces filter: a=%v b=%v", c.Lookup("web.a") != nil, c.Lookup("web.b") != nil)
	}
}

// runSynced runs c, with every version served, until the test ends, and
// returns it once synced.
func runSynced(t *testing.T, c *Controller) *Controller {
	t.Helper()
	c.served = func(context.Context) (map[string]bool, error) {
		return map[string]bool{V1alpha2: true, V1beta1: true, V1alpha1: true}, nil
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); c.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	for deadline := time.Now().Add(5 * time.Second); !c.HasSynced(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("not synced")
		}
	}
	return c
}

func rrAddr(rr dns.RR) string {
	switch v := rr.(type) {
	case *dns.A:
		return v.A.String()
	case *dns.AAAA:
		return v.AAAA.String()
	}
	return rr.String()
}

// The controller follows the versions the API server serves, at runtime.
func TestControllerFollowsServedVersions(t *testing.T) {
	servedOnly = map[string]bool{V1alpha1: true}
	defer func() { servedOnly = nil }()

	e := start(t, true,
		v1("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), v2("demo", "web", "5", ""),
		v1("demo", "api", "6", ""), v2("demo", "api", "6", "ClusterSetIP", "10.0.0.6"))
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantAddrs("api.demo") // only v1alpha1 is served: v1alpha2 data is out of reach
	if got := e.c.activeVersions(); fmt.Sprint(got) != "[v1alpha1]" {
		t.Fatalf("views %v", got)
	}

	e.serve(V1alpha1, V1alpha2)
	e.wantAddrs("api.demo", "10.0.0.6")
	e.wantAddrs("web.demo", "10.0.0.1")

	e.serve(V1alpha2)
	e.wantAddrs("web.demo") // its data was only in v1alpha1
	e.wantAddrs("api.demo", "10.0.0.6")

	e.serve()
	e.wantAddrs("api.demo")
	if !e.c.HasSynced() {
		t.Error("not ready without any served version")
	}
}

func TestControllerReadyWithoutCRD(t *testing.T) {
	servedOnly = map[string]bool{}
	defer func() { servedOnly = nil }()
	e := start(t, false)
	if got := e.c.activeVersions(); len(got) != 0 {
		t.Fatalf("views %v", got)
	}
}

func TestControllerLabelSelector(t *testing.T) {
	prod := v2("a", "web", "1", "ClusterSetIP", "10.0.0.1")
	prod.SetLabels(map[string]string{"env": "prod"})
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(),
		listKinds, prod, v2("a", "test", "1", "ClusterSetIP", "10.0.0.2"))
	c := runSynced(t, New(dyn, fakeImports{dyn}, kubefake.NewClientset(), Config{Zones: []string{"clusterset.local."}, TTL: 5, Labels: "env=prod"}))
	if c.Lookup("web.a") == nil || c.Lookup("test.a") != nil {
		t.Errorf("labels filter: web=%v test=%v", c.Lookup("web.a") != nil, c.Lookup("test.a") != nil)
	}
}
