package cache

import (
	"context"
	"fmt"
	"maps"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	clienttesting "k8s.io/client-go/testing"
	toolscache "k8s.io/client-go/tools/cache"
)

// syncedInformer stands for the CRD informer, synced or not.
type syncedInformer struct {
	toolscache.SharedIndexInformer
	synced bool
}

func (s syncedInformer) HasSynced() bool { return s.synced }

// How long discovery may go unasked, in every state the controller can be in.
func TestDiscoveryGap(t *testing.T) {
	for _, tc := range []struct {
		name                    string
		watched, denied, failed bool
		hurry                   bool
		want                    time.Duration
	}{
		{name: "CRD watched, unchanged", watched: true, want: idleDiscovery},
		{name: "CRD watched, just changed", watched: true, hurry: true, want: hurryDiscovery},
		{name: "CRD not synced yet", want: pollDiscovery},
		{name: "CRD watch refused", watched: true, denied: true, want: deniedDiscovery},
		{name: "CRD watch refused from the start", denied: true, want: deniedDiscovery},
		{name: "CRD watch refused, just changed", denied: true, hurry: true, want: hurryDiscovery},
		{name: "discovery failed", watched: true, failed: true, want: pollDiscovery},
		{name: "discovery failed, CRD just changed", watched: true, failed: true, hurry: true, want: pollDiscovery},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := &Controller{crd: syncedInformer{synced: tc.watched}, discoErr: tc.failed, crdAccess: &permission{},
				every: pollDiscovery, denied: deniedDiscovery, idle: idleDiscovery, hurry: hurryDiscovery}
			c.crdAccess.deniedNow.Store(tc.denied)
			if tc.hurry {
				c.crdHurry.Store(true)
				c.poked()
			}
			if got := c.discoveryGap(); got != tc.want {
				t.Errorf("gap %v, want %v", got, tc.want)
			}
		})
	}
}

// A poke asks discovery at once; only a change (not the first list) hurries.
func TestPokeAsksAtOnce(t *testing.T) {
	c := &Controller{crd: syncedInformer{synced: true}, crdChanged: make(chan struct{}, 1),
		every: pollDiscovery, idle: idleDiscovery, hurry: hurryDiscovery, servedAt: time.Now()}
	c.pokeDiscovery(false)
	c.pokeDiscovery(false) // a second poke never blocks
	<-c.crdChanged
	c.poked()
	if !c.servedAt.IsZero() || !c.hurryUntil.IsZero() {
		t.Fatalf("first-list poke: servedAt %v, hurryUntil %v; want discovery now and no hurry", c.servedAt, c.hurryUntil)
	}
	c.pokeDiscovery(true)
	<-c.crdChanged
	c.poked()
	if c.hurryUntil.Before(time.Now().Add(hurryFor - time.Second)) {
		t.Fatalf("change poke: hurry until %v, want about %v from now", c.hurryUntil, hurryFor)
	}
}

// Without permission to watch the CRD: one log line that says what to grant,
// and the versions served are still followed, by asking discovery now and
// then (every 30s; 20ms here).
func TestControllerPollsWithoutCRDWatch(t *testing.T) {
	servedOnly = map[string]bool{}
	defer func() { servedOnly = nil }()
	e := startWith(t, false, func(e *env) {
		denyCRD(e)
	}, beta("demo", "web", "5", "ClusterSetIP", "10.0.0.1"))
	e.wantAddrs("web.demo")
	e.servedMu.Lock()
	e.servedSet = map[string]bool{V1beta1: true} // discovery only: no CRD event
	e.servedMu.Unlock()
	e.wantViews("[v1beta1]")
	e.wantAddrs("web.demo", "10.0.0.1")
	if lines := e.logged("cannot watch the ServiceImport CRD"); len(lines) != 1 {
		t.Errorf("log lines %q, want one", lines)
	}
}

// Without the CRD's watch, an object that loses its data in the one view
// read (rewritten into the other shape, through a version that has just
// started being served) makes the controller ask discovery at once, not at
// its next poll (there is none): the new shape's view starts and answers.
// Seen by a reader, the answer in use stays while the object reads empty in
// the one view answering and v1alpha2 is not read yet; it moves to v1alpha2
// once that view is in place. Not one read misses, and no loss is reported.
func TestControllerKeepsAnswerWhileDataMovesToAShapeNotReadYet(t *testing.T) {
	e := startDeniedV1beta1(t, beta("demo", "web", "5", "ClusterSetIP", "10.0.0.1")) // only the rewrite can make it ask
	e.wantAddrs("web.demo", "10.0.0.1")
	stop := e.readLoop("web.demo")
	e.servedMu.Lock()
	e.servedSet = map[string]bool{V1beta1: true, V1alpha2: true} // discovery only: no CRD event
	e.servedMu.Unlock()
	e.apply(gvr2, v2("demo", "web", "6", "ClusterSetIP", "10.0.0.2"))
	e.apply(gvrBeta, beta("demo", "web", "6", ""))
	e.wantViews("[v1alpha2 v1beta1]")
	e.wantAddrs("web.demo", "10.0.0.2")
	if misses, reads := stop(); misses > 0 {
		t.Errorf("web.demo missing in %d of %d reads while its data moved to v1alpha2", misses, reads)
	}
	if n := e.skips(ReasonDataLost); n != 0 {
		t.Errorf("data loss reported %d times, want none", n)
	}
}

// An answered object that reads empty in the one view answering, with no
// other shape served: its answer stays until discovery, asked at once, has
// answered that nothing else is served (here discovery is held back), and
// then goes, its data loss reported once. A delete, by contrast, takes the
// answer at once, discovery or not.
func TestControllerDropsEmptiedAnswerOnceDiscoverySaysNothingUnread(t *testing.T) {
	e := startDeniedV1beta1(t, beta("demo", "web", "5", "ClusterSetIP", "10.0.0.1"), // only the empty read makes it ask
		beta("demo", "api", "5", "ClusterSetIP", "10.0.0.5"))
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantAddrs("api.demo", "10.0.0.5")

	e.servedMu.Lock() // discovery waits
	asked := e.c.discoAsked.Load()
	e.apply(gvrBeta, beta("demo", "web", "6", ""))
	e.apply(gvrBeta, beta("demo", "api", "6", ""))
	e.eventually("discovery asked", func() error {
		if e.c.discoAsked.Load() == asked {
			return fmt.Errorf("discovery not asked")
		}
		return nil
	})
	e.remove(gvrBeta, "demo", "api")
	e.wantAddrs("api.demo")
	e.eventually("web.demo's empty read decided", func() error {
		e.c.kept.mu.Lock()
		defer e.c.kept.mu.Unlock()
		if _, ok := e.c.kept.m["web.demo"]; !ok {
			return fmt.Errorf("web.demo not kept yet")
		}
		return nil
	})
	e.haveAddrs("web.demo", "10.0.0.1")
	if n := e.skips(ReasonDataLost); n != 0 {
		t.Errorf("data loss reported %d times before discovery answered, want none", n)
	}
	e.servedMu.Unlock()

	e.wantAddrs("web.demo")
	e.eventually("data loss reported", func() error {
		if n := e.skips(ReasonDataLost); n != 1 {
			return fmt.Errorf("data loss reported %d times, want once", n)
		}
		return nil
	})
}

// Data leaving a shape within hurryFor of the last poke asks discovery when
// that while ends, once.
func TestDataLeftAsksAgainAfterTheWhile(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		c := &Controller{crdChanged: make(chan struct{}, 1)}
		c.dataLeftAt.Store(time.Now().Add(-hurryFor + 200*time.Millisecond).UnixNano())
		asked := func() bool {
			synctest.Wait()
			select {
			case <-c.crdChanged:
				return true
			default:
				return false
			}
		}
		for range 10 {
			c.dataLeft()
		}
		if asked() {
			t.Fatal("asked within the while")
		}
		time.Sleep(200 * time.Millisecond) // the bubble's clock: the while ends
		if !asked() {
			t.Fatal("not asked when the while ended")
		}
		time.Sleep(time.Hour)
		if asked() {
			t.Fatal("asked twice")
		}
	})
}

// startDeniedV1beta1 starts a controller on objs with v1beta1 alone served,
// the CRD's list and watch refused (the chart's RBAC) and no discovery poll
// (only the controller's own reasons make it ask), and waits until the
// refusal has been noticed.
func startDeniedV1beta1(t *testing.T, objs ...runtime.Object) *env {
	t.Helper()
	servedOnly = map[string]bool{V1beta1: true}
	t.Cleanup(func() { servedOnly = nil })
	e := startWith(t, false, func(e *env) {
		denyCRD(e)
		e.deniedGap = time.Hour
	}, objs...)
	e.eventually("the refusal noticed", func() error {
		if !e.c.crdAccess.deniedNow.Load() {
			return fmt.Errorf("the CRD watch is not refused yet")
		}
		return nil
	})
	return e
}

// denyCRD refuses every list and watch of the CRD, as the official coredns
// chart's RBAC does.
func denyCRD(e *env) {
	deny := func(clienttesting.Action) (bool, runtime.Object, error) {
		return true, nil, apierrors.NewForbidden(crdResource.GroupResource(), "", nil)
	}
	e.dyn.PrependReactor("list", crdResource.Resource, deny)
	e.dyn.PrependReactor("watch", crdResource.Resource, deny)
}

// A refusal passes only for an identity that had access, and only for a
// while: after a restart, not for a missing role.
func TestRefusalsPassOnlyAfterAccess(t *testing.T) {
	var r refusals
	if r.passing() {
		t.Fatal("never allowed: a refusal must be reported, not waited out")
	}
	r.allowed()
	if !r.passing() || !r.passing() {
		t.Fatal("allowed before: a fresh refusal should pass")
	}
	r.since.Store(int64(time.Since(epoch) - passingFor))
	if r.passing() {
		t.Fatalf("refused for %s: it should be reported", passingFor)
	}
	r.allowed()
	if !r.passing() {
		t.Fatal("allowed again: the next refusal should pass")
	}
}

// Which of two resourceVersions is newer: by number, not by text, however
// long; when either is not well formed, neither is.
func TestNewer(t *testing.T) {
	for _, tc := range []struct {
		a, b string
		want bool
	}{
		{"10", "9", true}, {"9", "10", false}, {"7", "7", false},
		{"100000000000000000000", "99999999999999999999", true}, // beyond uint64
		{"", "5", false}, {"5", "", false}, {"x", "5", false}, {"05", "4", false},
	} {
		if got := newer(tc.a, tc.b); got != tc.want {
			t.Errorf("newer(%q, %q) = %v, want %v", tc.a, tc.b, got, tc.want)
		}
	}
}

// The aggregated discovery document of /apis: the versions of the group that
// list serviceimports, whatever else the group or other groups serve.
func TestServedIn(t *testing.T) {
	doc := `{"kind":"APIGroupDiscoveryList","apiVersion":"apidiscovery.k8s.io/v2","items":[
	 {"metadata":{"name":"apps"},"versions":[{"version":"v1","resources":[{"resource":"deployments"}]}]},
	 {"metadata":{"name":"multicluster.x-k8s.io"},"versions":[
	  {"version":"v1beta1","resources":[{"resource":"serviceimports"},{"resource":"serviceexports"}]},
	  {"version":"v1alpha2","resources":[{"resource":"serviceimports"}]},
	  {"version":"v1alpha1","resources":[{"resource":"serviceexports"}]},
	  {"version":"v9","resources":[{"resource":"serviceimports"}]}]},
	 {"metadata":{"name":"other.example"},"versions":[{"version":"v1alpha1","resources":[{"resource":"serviceimports"}]}]}]}`
	got, ok := servedIn([]byte(doc))
	if !ok || !maps.Equal(got, map[string]bool{V1beta1: true, V1alpha2: true}) {
		t.Errorf("served %v (a document: %v), want v1beta1 and v1alpha2", got, ok)
	}
	for _, plain := range []string{
		`{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"multicluster.x-k8s.io"}]}`,
		`not json`, ``,
	} {
		if got, ok := servedIn([]byte(plain)); ok {
			t.Errorf("%q read as an aggregated document: %v", plain, got)
		}
	}
}

// discoveryServed against an API server: one request where /apis is an
// aggregated document (v2, or v2beta1 as Kubernetes 1.27 to 1.29 serve it);
// where it is the plain group list, the group's listed versions one by one,
// and no other; an error of /apis is discovery's error.
func TestDiscoveryServed(t *testing.T) {
	aggregated := func(apiVersion string) string {
		return `{"kind":"APIGroupDiscoveryList","apiVersion":"` + apiVersion + `","items":[{"metadata":{"name":"multicluster.x-k8s.io"},` +
			`"versions":[{"version":"v1beta1","resources":[{"resource":"serviceimports"}]},{"version":"v1alpha1","resources":[{"resource":"serviceexports"}]}]}]}`
	}
	plain := `{"kind":"APIGroupList","apiVersion":"v1","groups":[{"name":"multicluster.x-k8s.io",` +
		`"versions":[{"groupVersion":"multicluster.x-k8s.io/v1beta1","version":"v1beta1"},{"groupVersion":"multicluster.x-k8s.io/v1alpha1","version":"v1alpha1"}]}]}`
	resources := map[string]string{
		"/apis/multicluster.x-k8s.io/v1beta1":  `{"kind":"APIResourceList","groupVersion":"multicluster.x-k8s.io/v1beta1","resources":[{"name":"serviceimports","namespaced":true,"kind":"ServiceImport","verbs":["list"]}]}`,
		"/apis/multicluster.x-k8s.io/v1alpha1": `{"kind":"APIResourceList","groupVersion":"multicluster.x-k8s.io/v1alpha1","resources":[{"name":"serviceexports","namespaced":true,"kind":"ServiceExport","verbs":["list"]}]}`,
	}
	for _, tc := range []struct {
		name, apis string
		status     int
		want       map[string]bool
		requests   []string
	}{
		{name: "aggregated v2", apis: aggregated("apidiscovery.k8s.io/v2"), status: 200,
			want: map[string]bool{V1beta1: true}, requests: []string{"/apis"}},
		{name: "aggregated v2beta1", apis: aggregated("apidiscovery.k8s.io/v2beta1"), status: 200,
			want: map[string]bool{V1beta1: true}, requests: []string{"/apis"}},
		{name: "plain group list", apis: plain, status: 200, want: map[string]bool{V1beta1: true},
			requests: []string{"/apis", "/apis/multicluster.x-k8s.io/v1beta1", "/apis/multicluster.x-k8s.io/v1alpha1"}},
		{name: "/apis fails", apis: `{"kind":"Status","apiVersion":"v1","status":"Failure","code":500}`, status: 500,
			requests: []string{"/apis"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var requests []string
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				requests = append(requests, r.URL.Path)
				mu.Unlock()
				w.Header().Set("Content-Type", "application/json")
				if r.URL.Path == "/apis" {
					if !strings.Contains(r.Header.Get("Accept"), "v=v2beta1;as=APIGroupDiscoveryList") {
						t.Errorf("Accept %q asks for no v2beta1 document", r.Header.Get("Accept"))
					}
					w.WriteHeader(tc.status)
					_, _ = w.Write([]byte(tc.apis))
					return
				}
				body, ok := resources[r.URL.Path]
				if !ok {
					http.NotFound(w, r)
					return
				}
				_, _ = w.Write([]byte(body))
			}))
			defer srv.Close()
			kube, err := kubernetes.NewForConfig(&rest.Config{Host: srv.URL})
			if err != nil {
				t.Fatal(err)
			}
			got, err := discoveryServed(kube.Discovery())(context.Background())
			if (err != nil) != (tc.want == nil) || !maps.Equal(got, tc.want) {
				t.Errorf("served %v, %v; want %v", got, err, tc.want)
			}
			mu.Lock()
			defer mu.Unlock()
			if !slices.Equal(requests, tc.requests) {
				t.Errorf("requests %q, want %q", requests, tc.requests)
			}
		})
	}
}

// Objects moving into the other shape ask discovery once, not once each.
func TestDataLeftAsksOncePerWhile(t *testing.T) {
	c := &Controller{crdChanged: make(chan struct{}, 1)}
	for range 100 {
		c.dataLeft()
	}
	<-c.crdChanged
	select {
	case <-c.crdChanged:
		t.Fatal("a second poke")
	default:
	}
	if c.crdHurry.Load() {
		t.Error("the poke hurries: discovery already knows the version that was written through")
	}
	c.dataLeftAt.Store(time.Now().Add(-hurryFor).UnixNano())
	c.dataLeft()
	<-c.crdChanged
}
