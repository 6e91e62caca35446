package cache

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	toolscache "k8s.io/client-go/tools/cache"
)

// withGrace sets emptyGrace for the test; call it before start, so that the
// controller has stopped when it is restored.
func withGrace(t *testing.T, d time.Duration) {
	old := emptyGrace
	emptyGrace = d
	t.Cleanup(func() { emptyGrace = old })
}

// wantSkips waits until reason was counted n times.
func (e *env) wantSkips(reason string, n int) {
	e.t.Helper()
	e.eventually(reason, func() error {
		if got := e.skips(reason); got != n {
			return fmt.Errorf("%s counted %d times, want %d", reason, got, n)
		}
		return nil
	})
}

// absentImport is the v1beta1 import whose status says its EndpointSlices are
// absent.
func absentImport(ns, name, rv, typ string, ips ...string) *unstructured.Unstructured {
	u := beta(ns, name, rv, typ, ips...)
	u.Object["status"] = map[string]any{"endpointSliceObjects": "Absent"}
	return u
}

// A headless import with no EndpointSlice at all is reported once per write
// of it, as no_endpointslices, and again when it goes empty again; one whose
// slices have no ready endpoint, or a ClusterSetIP import, is not.
func TestWhyEmptyNoEndpointSlices(t *testing.T) {
	withGrace(t, 0)
	e := start(t, false, append(sliceMarker(),
		v2("demo", "lonely", "1", "Headless"),
		v2("demo", "idle", "1", "Headless"), mcSlice("demo", "idle-a", "idle", "west"), // a slice, no endpoint
		v2("demo", "web", "1", "ClusterSetIP", "10.0.0.1"))...)
	e.wantSkips(ReasonNoEndpointSlices, 1)
	if l := e.logged(ReasonNoEndpointSlices); len(l) != 1 ||
		!strings.Contains(l[0], "ServiceImport v1alpha2 demo/lonely") || !strings.Contains(l[0], LabelServiceName+"=lonely") {
		t.Errorf("logged %q, want one line naming demo/lonely and the label it lacks", l)
	}

	// Synced again for another reason (a slice of another service): not
	// reported again.
	e.settleSlices()
	e.haveSkips(ReasonNoEndpointSlices, 1)

	// A new write of the import, still without slices: reported again.
	e.apply(gvr2, v2("demo", "lonely", "2", "Headless"))
	e.wantSkips(ReasonNoEndpointSlices, 2)

	// Its slice comes: answered, not reported. It goes: reported again.
	slicesOf := e.kube.DiscoveryV1().EndpointSlices("demo")
	if _, err := slicesOf.Create(context.Background(), mcSlice("demo", "lonely-a", "lonely", "west", "10.1.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("lonely.demo", "10.1.0.1")
	e.haveSkips(ReasonNoEndpointSlices, 2)
	if err := slicesOf.Delete(context.Background(), "lonely-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("lonely.demo")
	e.wantSkips(ReasonNoEndpointSlices, 3)

	// Deleted: forgotten.
	e.remove(gvr2, "demo", "lonely")
	e.eventually("forgotten", func() error {
		e.c.syncMu.Lock()
		defer e.c.syncMu.Unlock()
		if _, ok := e.c.why.empty["lonely.demo"]; ok {
			return fmt.Errorf("lonely.demo still remembered")
		}
		return nil
	})
	e.settleSlices()
	e.haveSkips(ReasonNoEndpointSlices, 3)
	e.haveSkips(ReasonEndpointSlicesAbsent, 0)
}

// haveSkips is wantSkips without the wait.
func (e *env) haveSkips(reason string, n int) {
	e.t.Helper()
	if got := e.skips(reason); got != n {
		e.t.Errorf("%s counted %d times, want %d", reason, got, n)
	}
}

// An import's slices come a moment after it: no_endpointslices waits
// emptyGrace, and is not reported when they come within it.
func TestWhyEmptyWaitsForSlices(t *testing.T) {
	const grace = 300 * time.Millisecond
	withGrace(t, grace)
	e := start(t, false, sliceMarker()...)
	e.apply(gvr2, v2("demo", "soon", "1", "Headless"))
	if _, err := e.kube.DiscoveryV1().EndpointSlices("demo").Create(context.Background(),
		mcSlice("demo", "soon-a", "soon", "west", "10.1.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("soon.demo", "10.1.0.1")

	written := time.Now()
	e.apply(gvr2, v2("demo", "never", "1", "Headless"))
	e.wantSkips(ReasonNoEndpointSlices, 1)
	if waited := time.Since(written); waited < grace {
		t.Errorf("reported %v after the import was written, before the grace of %v", waited, grace)
	}
	e.haveSkips(ReasonNoEndpointSlices, 1)
}

// A headless import whose status says endpointSliceObjects: Absent is
// reported as such, once per write, and not as no_endpointslices; a
// ClusterSetIP import may well say so, and is not reported.
func TestWhyEmptyEndpointSlicesAbsent(t *testing.T) {
	withGrace(t, 0)
	servedOnly = map[string]bool{V1alpha2: true, V1beta1: true}
	defer func() { servedOnly = nil }()
	e := start(t, false, append(sliceMarker(),
		absentImport("demo", "db", "1", "Headless"), absentImport("demo", "web", "1", "ClusterSetIP", "10.0.0.1"))...)
	e.wantAddrs("web.demo", "10.0.0.1")
	e.wantSkips(ReasonEndpointSlicesAbsent, 1)
	if l := e.logged(ReasonEndpointSlicesAbsent); len(l) != 1 || !strings.Contains(l[0], "ServiceImport v1beta1 demo/db") {
		t.Errorf("logged %q, want one line naming demo/db", l)
	}
	e.apply(gvrBeta, absentImport("demo", "db", "2", "Headless"))
	e.wantSkips(ReasonEndpointSlicesAbsent, 2)
	e.settle(gvrBeta)
	e.haveSkips(ReasonEndpointSlicesAbsent, 2)
	e.haveSkips(ReasonNoEndpointSlices, 0)
}

// endpointSliceObjects is read through both versions of the spec shape,
// for headless imports only.
func TestReadEndpointSliceObjects(t *testing.T) {
	for _, version := range []string{V1beta1, V1alpha1} {
		for _, tc := range []struct {
			typ, status string
			want        bool
		}{{"Headless", "Absent", true}, {"Headless", "Present", false}, {"Headless", "", false}, {"ClusterSetIP", "Absent", false}} {
			u := absentImport("demo", "db", "1", tc.typ, "10.0.0.1")
			if tc.typ == "Headless" {
				delete(u.Object["spec"].(map[string]any), "ips")
			}
			u.SetAPIVersion("multicluster.x-k8s.io/" + version)
			u.Object["status"] = map[string]any{"endpointSliceObjects": tc.status}
			im := readUnstructured(u, version)
			if got := slices.Contains(im.Problems(), ReasonEndpointSlicesAbsent); got != tc.want {
				t.Errorf("%s %s %q: problems %v, want endpointslices_absent %v", version, tc.typ, tc.status, im.Problems(), tc.want)
			}
		}
	}
}

// statsLog keeps what OnStats was handed.
type statsLog struct {
	mu   sync.Mutex
	last Stats
}

func (s *statsLog) get() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

// The ready endpoint names answered are counted by source cluster, and each
// cluster's last EndpointSlice change is kept; a cluster without endpoints
// or slices left is dropped from both.
func TestEndpointsByCluster(t *testing.T) {
	stats := &statsLog{}
	e := startWith(t, false, func(e *env) {
		e.configure = func(cfg *Config) {
			cfg.OnStats = func(s Stats) { stats.mu.Lock(); stats.last = s; stats.mu.Unlock() }
		}
	}, v2("demo", "db", "1", "Headless"),
		mcSlice("demo", "db-w", "db", "west", "10.1.0.1", "10.1.0.2"),
		mcSlice("demo", "db-e", "db", "east.prod", "10.2.0.1"),
		mcSlice("demo", "db-x", "db", "idle")) // slices, no ready endpoint
	wantStats := func(what string, endpoints map[string]int, changed ...string) Stats {
		t.Helper()
		var st Stats
		e.eventually(what, func() error {
			st = stats.get()
			total := 0
			for _, n := range st.EndpointsByCluster {
				total += n
			}
			if !maps.Equal(st.EndpointsByCluster, endpoints) || total != st.Endpoints {
				return fmt.Errorf("endpoints %v (total %d), want %v", st.EndpointsByCluster, st.Endpoints, endpoints)
			}
			if got := slices.Sorted(maps.Keys(st.ClusterChanged)); !slices.Equal(got, changed) {
				return fmt.Errorf("changed clusters %v, want %v", got, changed)
			}
			return nil
		})
		return st
	}
	st := wantStats("first list", map[string]int{"west": 2, "east.prod": 1}, "east.prod", "idle", "west")
	for c, at := range st.ClusterChanged {
		if time.Since(at) > time.Minute || at.IsZero() {
			t.Errorf("%s changed at %v", c, at)
		}
	}

	// A change of east.prod's slice moves its time, not west's: a later
	// event, later by at least the API call between them.
	slicesOf := e.kube.DiscoveryV1().EndpointSlices("demo")
	if _, err := slicesOf.Update(context.Background(), mcSlice("demo", "db-e", "db", "east.prod", "10.2.0.1", "10.2.0.2"), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	st2 := wantStats("east.prod grew", map[string]int{"west": 2, "east.prod": 2}, "east.prod", "idle", "west")
	if !st2.ClusterChanged["east.prod"].After(st.ClusterChanged["east.prod"]) || !st2.ClusterChanged["west"].Equal(st.ClusterChanged["west"]) {
		t.Errorf("changed %v, then %v: want east.prod later, west the same", st.ClusterChanged, st2.ClusterChanged)
	}

	// east.prod's slice goes: the cluster is gone from both; and once the
	// service goes, west's endpoints are no longer counted.
	if err := slicesOf.Delete(context.Background(), "db-e", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantStats("east.prod gone", map[string]int{"west": 2}, "idle", "west")
	e.remove(gvr2, "demo", "db")
	wantStats("db gone", map[string]int{}, "idle", "west")
	if err := slicesOf.Delete(context.Background(), "db-w", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	wantStats("west's slice gone", map[string]int{}, "idle")
}

// Past MaxClusterSeries clusters, the rest are published together.
func TestCapClusters(t *testing.T) {
	m := map[string]int{}
	for i := range MaxClusterSeries + 44 {
		m[fmt.Sprintf("c%04d", i)] = 1
	}
	if got := capClusters(m, func(a, b int) int { return a + b }); len(got) != MaxClusterSeries || got[OtherClusters] != 45 || got["c0000"] != 1 {
		t.Errorf("capped to %d clusters, %s holds %d", len(got), OtherClusters, got[OtherClusters])
	}
	small := map[string]int{"west": 2, "east": 1}
	if got := capClusters(small, func(a, b int) int { return a + b }); !maps.Equal(got, small) {
		t.Errorf("capClusters(%v) = %v", small, got)
	}
}

// A relist's update holds the same write again: no change of its cluster.
// A slice that moves to another cluster changes both; one of no usable
// cluster, or in a namespace not answered, changes none.
func TestSliceChangedIgnoresRelist(t *testing.T) {
	c := &Controller{cfg: Config{Namespaces: []string{"demo"}}}
	sl := func(ns, rv, cluster string) *Slice {
		return &Slice{Meta: Meta{Namespace: ns, Name: "s", ResourceVersion: rv}, Service: "db", Cluster: cluster}
	}
	changed := func() map[string]time.Time {
		c.why.mu.Lock()
		defer c.why.mu.Unlock()
		return maps.Clone(c.why.changed)
	}
	c.sliceChanged(nil, sl("demo", "1", "west"))
	first := changed()
	c.sliceChanged(sl("demo", "1", "west"), sl("demo", "1", "west"))
	if got := changed(); !maps.Equal(got, first) {
		t.Errorf("a relist changed %v to %v", first, got)
	}
	c.sliceChanged(sl("demo", "1", "west"), sl("demo", "2", "east"))
	if got := changed(); len(got) != 1 || got["east"].IsZero() {
		t.Errorf("after a move to east: %v", got)
	}
	c.sliceChanged(nil, sl("other", "3", "north"))
	c.sliceChanged(nil, sl("demo", "4", ""))
	if got := changed(); len(got) != 1 {
		t.Errorf("a slice of another namespace, or of no cluster, counted: %v", got)
	}
	c.sliceChanged(toolscache.DeletedFinalStateUnknown{Key: "demo/s", Obj: sl("demo", "2", "east")}, nil)
	if got := changed(); len(got) != 0 {
		t.Errorf("after the delete: %v", got)
	}
}
