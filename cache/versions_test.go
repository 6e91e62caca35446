package cache

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// beta is v1's object written through v1beta1, the same schema.
func beta(ns, name, rv string, typ string, ips ...string) *unstructured.Unstructured {
	u := v1(ns, name, rv, typ, ips...)
	u.SetAPIVersion("multicluster.x-k8s.io/v1beta1")
	return u
}

// listsAndWatches counts the fake dynamic client's list and watch calls on gvr.
func (e *env) listsAndWatches(gvr schema.GroupVersionResource) int {
	n := 0
	for _, a := range e.dyn.Actions() {
		if a.GetResource() == gvr && (a.GetVerb() == "list" || a.GetVerb() == "watch") {
			n++
		}
	}
	return n
}

func (e *env) wantViews(want string) {
	e.t.Helper()
	e.eventually("views", func() error {
		if got := fmt.Sprint(e.c.activeVersions()); got != want {
			return fmt.Errorf("views %s, want %s", got, want)
		}
		return nil
	})
}

// With no options the spec shape is read through v1beta1 and the root shape
// through v1alpha2; a service is answered from whichever holds its data.
func TestControllerReadsV1beta1ByDefault(t *testing.T) {
	servedOnly = map[string]bool{V1alpha2: true, V1beta1: true, V1alpha1: true}
	defer func() { servedOnly = nil }()
	e := start(t, false,
		beta("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), v2("demo", "web", "5", ""),
		beta("demo", "api", "6", ""), v2("demo", "api", "6", "ClusterSetIP", "10.0.0.6"),
		v1("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), v1("demo", "api", "6", ""))
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantAddrs("api.demo", "10.0.0.6")
	e.wantViews("[v1alpha2 v1beta1]")
	if s := e.c.Lookup("web.demo"); s == nil || s.Version() != V1beta1 {
		t.Errorf("web.demo answered from %v, want v1beta1", s)
	}
	// One watch per shape: v1alpha1 has v1beta1's schema and is not watched.
	if n := e.listsAndWatches(gvr1); n != 0 {
		t.Errorf("%d list and watch calls on v1alpha1, want 0", n)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, v := range Versions {
		if e.unread[v] {
			t.Errorf("%s reported unread", v)
		}
	}
}

// With fallback v1alpha1 and both spec-shape versions served, v1beta1 alone
// is watched.
func TestControllerFallbackPrefersV1beta1(t *testing.T) {
	servedOnly = map[string]bool{V1beta1: true, V1alpha1: true}
	defer func() { servedOnly = nil }()
	e := start(t, true, beta("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), v1("demo", "web", "5", "ClusterSetIP", "10.0.0.1"))
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantViews("[v1beta1]")
	if n := e.listsAndWatches(gvr1); n != 0 {
		t.Errorf("%d list and watch calls on v1alpha1, want 0", n)
	}
}

// Upstream's own migration as the plugin sees it, with fallback v1alpha1:
// v1alpha1 only, then v1beta1 served beside it (the view moves to v1beta1
// without a gap), then v1alpha1 no longer served.
func TestControllerMovesFromV1alpha1ToV1beta1(t *testing.T) {
	servedOnly = map[string]bool{V1alpha1: true}
	defer func() { servedOnly = nil }()
	e := start(t, true, v1("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), beta("demo", "web", "5", "ClusterSetIP", "10.0.0.1"))
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantViews("[v1alpha1]")

	stop := e.readLoop("web.demo")
	serial := e.c.Serial()
	e.serve(V1alpha1, V1beta1)
	e.wantViews("[v1beta1]")
	e.eventually("answered from v1beta1", func() error {
		if s := e.c.Lookup("web.demo"); s == nil || s.Version() != V1beta1 {
			return fmt.Errorf("answered from %v", s)
		}
		return nil
	})
	e.serve(V1beta1)
	e.discoveries(3) // with v1alpha1 gone
	// The same data at a newer resourceVersion, answered: web.demo has been
	// synced since those discoveries, whatever they queued.
	e.apply(gvrBeta, beta("demo", "web", "6", "ClusterSetIP", "10.0.0.1"))
	e.eventually("web.demo answered at 6", func() error {
		if s := e.c.Lookup("web.demo"); s == nil || s.ResourceVersion() != "6" {
			return fmt.Errorf("answer %v", s)
		}
		return nil
	})
	misses, reads := stop()
	if got := fmt.Sprint(e.c.activeVersions()); got != "[v1beta1]" {
		t.Errorf("views %s, want [v1beta1]", got)
	}
	e.haveAddrs("web.demo", "10.0.0.1")
	if misses > 0 {
		t.Errorf("web.demo missing in %d of %d reads while the view moved", misses, reads)
	}
	if e.c.Serial() != serial {
		t.Errorf("serial moved from %d to %d although no answer changed", serial, e.c.Serial())
	}
	if len(e.logged("now read through v1beta1")) != 1 {
		t.Errorf("the move to v1beta1 is not logged once: %q", e.logs)
	}
}

// A cluster that serves v1alpha1 only, read without fallback v1alpha1: one
// log line naming the option, and the version reported unread until the
// cluster serves v1beta1.
func TestControllerReportsUnreadVersion(t *testing.T) {
	servedOnly = map[string]bool{V1alpha1: true}
	defer func() { servedOnly = nil }()
	e := start(t, false, v1("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), beta("demo", "web", "5", "ClusterSetIP", "10.0.0.1"))
	e.wantAddrs("web.demo")
	// Several discoveries, with the same answer: still one log line. While
	// the CRD is watched and unchanged, discovery is asked once in 10 minutes;
	// a poke, as a change of the CRD gives, makes it ask every 20ms.
	e.c.pokeDiscovery(true)
	e.discoveries(3)
	lines := e.logged("ServiceImport v1alpha1 is served, but this configuration does not read it")
	if len(lines) != 1 || !strings.Contains(lines[0], `"fallback v1alpha1"`) {
		t.Errorf("log lines %q, want one naming fallback v1alpha1", lines)
	}
	e.mu.Lock()
	unread := e.unread[V1alpha1]
	e.mu.Unlock()
	if !unread {
		t.Error("v1alpha1 not reported unread")
	}

	e.serve(V1alpha1, V1beta1)
	e.wantAddrs("web.demo", "10.0.0.1")
	e.eventually("v1alpha1 read", func() error {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.unread[V1alpha1] {
			return fmt.Errorf("v1alpha1 still unread")
		}
		return nil
	})
}

// Without any ServiceImport version served: ready, and one log line that
// says what to install.
func TestControllerLogsMissingCRD(t *testing.T) {
	servedOnly = map[string]bool{}
	defer func() { servedOnly = nil }()
	e := start(t, false)
	e.c.pokeDiscovery(true) // several discoveries, as after a change of the CRD
	e.discoveries(3)
	if lines := e.logged("serves no ServiceImport"); len(lines) != 1 || !strings.Contains(lines[0], "install the ServiceImport CRD") {
		t.Errorf("log lines %q, want one saying what to install", lines)
	}
	e.serve(V1beta1)
	e.wantViews("[v1beta1]")
}

// When one view replaces another, the new one may not have seen the newest
// write yet: the answer never goes back to older data.
func TestControllerKeepsNewerAnswerAcrossViews(t *testing.T) {
	c := New(dynamicfake.NewSimpleDynamicClient(k8sruntime.NewScheme()), nil, kubefake.NewClientset(),
		Config{Zones: []string{"clusterset.local."}, TTL: 5})
	old, next := c.newView(c.shapes[1], V1alpha1), c.newView(c.shapes[1], V1beta1)
	im := func(version, rv, ip string) *Import {
		im := blankImport(Meta{Namespace: "demo", Name: "web", ResourceVersion: rv}, version)
		im.HasData, im.IPs = true, []netip.Addr{netip.MustParseAddr(ip)}
		return im
	}
	if err := old.imports.Add(im(V1alpha1, "6", "10.0.0.6")); err != nil {
		t.Fatal(err)
	}
	if err := next.imports.Add(im(V1beta1, "5", "10.0.0.5")); err != nil {
		t.Fatal(err)
	}
	c.views = []*view{old}
	c.sync("web.demo")
	c.views = []*view{next} // the v1beta1 view, a write behind
	c.sync("web.demo")
	if s := c.Lookup("web.demo"); s == nil || fmt.Sprint(s.IPs()) != "[10.0.0.6]" {
		t.Fatalf("answer %v, want the newer 10.0.0.6", s)
	}
	if err := next.imports.Update(im(V1beta1, "7", "10.0.0.7")); err != nil {
		t.Fatal(err)
	}
	c.sync("web.demo")
	if s := c.Lookup("web.demo"); s == nil || fmt.Sprint(s.IPs()) != "[10.0.0.7]" || s.Version() != V1beta1 {
		t.Fatalf("answer %v, want 10.0.0.7 from v1beta1", s)
	}
}
