package cache

import (
	"fmt"
	"net/netip"
	"os"
	"runtime"
	"runtime/pprof"
	"testing"
	"time"

	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	kubefake "k8s.io/client-go/kubernetes/fake"
)

// BenchmarkMemoryPerImport reports the heap the controller keeps per
// ClusterSetIP import once synced: informer store, index and answers. The
// fake API's own copies are measured before the controller starts and left
// out. One op is one whole load, so run it with -benchtime 1x.
//
// In "two-shapes" the spec shape is served too and reads every object
// empty, as a real API server with this project's CRD shows a v1alpha2
// object through v1beta1 (conversion None): the second view's cost.
func BenchmarkMemoryPerImport(b *testing.B) {
	for _, two := range []bool{false, true} {
		n, name := 10000, "10000"
		if two {
			name += "/two-shapes"
		}
		b.Run(name, func(b *testing.B) {
			if two {
				servedOnly = map[string]bool{V1alpha2: true, V1beta1: true}
				defer func() { servedOnly = nil }()
			}
			for range b.N {
				objs := make([]k8sruntime.Object, 0, 2*n)
				for i := range n {
					ns, name := fmt.Sprintf("ns-%02d", i%20), fmt.Sprintf("svc-%05d", i)
					objs = append(objs, v2(ns, name, "1", "ClusterSetIP",
						fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)))
					if two {
						empty := v1(ns, name, "1", "")
						empty.SetAPIVersion("multicluster.x-k8s.io/v1beta1")
						objs = append(objs, empty)
					}
				}
				var before uint64
				e := startWith(b, false, func(e *env) { e.patience = 5 * time.Minute; before = liveHeap() }, objs...)
				e.eventually("loaded", func() error {
					if got := e.c.idx.count(); got != n {
						return fmt.Errorf("%d services, want %d", got, n)
					}
					return nil
				})
				after := liveHeap()
				if f := os.Getenv("HEAP_PROFILE"); f != "" {
					writeHeapProfile(b, f)
				}
				b.ReportMetric(float64(after-before)/float64(n), "B/import")
				runtime.KeepAlive(objs)
			}
		})
	}
}

// writeHeapProfile saves the heap as it is now, for `go tool pprof`.
func writeHeapProfile(b *testing.B, path string) {
	f, err := os.Create(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := pprof.WriteHeapProfile(f); err != nil {
		b.Fatal(err)
	}
}

func liveHeap() uint64 {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// BenchmarkRebuildOne measures the work after one ServiceImport changes,
// among 1,000 to 100,000: the informer store's update and the controller's
// sync of that service (choose the view, normalize, build, swap into the
// index). It must not grow with the number of services. The informers are
// not run, so that nothing else works in the background: the imports go
// straight into their stores.
func BenchmarkRebuildOne(b *testing.B) {
	for _, n := range []int{1000, 10000, 100000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c := New(dynamicfake.NewSimpleDynamicClient(k8sruntime.NewScheme()), nil, kubefake.NewClientset(),
				Config{Zones: []string{"clusterset.local."}, TTL: 5})
			v := c.newView(c.shapes[0], V1alpha2)
			c.views = []*view{v}
			store := v.imports
			im := func(i int, rv string, ip netip.Addr) *Import {
				im := blankImport(Meta{Namespace: fmt.Sprintf("ns-%02d", i%20), Name: fmt.Sprintf("svc-%05d", i), ResourceVersion: rv}, V1alpha2)
				im.HasData, im.IPs, im.Ports = true, []netip.Addr{ip}, []Port{{Name: "http", Proto: "tcp", Port: 80}}
				return im
			}
			for i := range n {
				r := im(i, "1", netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}))
				if err := store.Add(r); err != nil {
					b.Fatal(err)
				}
				c.sync(key(r.Namespace, r.Name))
			}
			if got := c.idx.count(); got != n {
				b.Fatalf("%d services, want %d", got, n)
			}
			const k = "svc-00007.ns-07"
			b.ReportAllocs()
			b.ResetTimer()
			for i := range b.N {
				if err := store.Update(im(7, fmt.Sprint(2+i), netip.AddrFrom4([4]byte{10, 200, byte(i >> 8), byte(i)}))); err != nil {
					b.Fatal(err)
				}
				c.sync(k)
			}
			b.StopTimer()
			if got := c.Lookup(k).IPs()[0]; got != netip.AddrFrom4([4]byte{10, 200, byte((b.N - 1) >> 8), byte(b.N - 1)}) {
				b.Fatalf("after the last change: %v", got)
			}
		})
	}
}

// The ClusterSetIP index for PTR answers exists only when asked for.
func TestIndexByIPOnlyWithReverse(t *testing.T) {
	ip := netip.MustParseAddr("10.0.0.1")
	svc := &Service{rec: &Import{Meta: Meta{Namespace: "ns", Name: "svc"}, HasData: true, IPs: []netip.Addr{ip}}}
	for _, reverse := range []bool{true, false} {
		x := newIndex(reverse, reverse)
		x.put("svc.ns", svc)
		if got := len(x.lookupIP(ip)); got != map[bool]int{true: 1, false: 0}[reverse] {
			t.Errorf("reverse %v: %d services for %v", reverse, got, ip)
		}
		x.put("svc.ns", nil)
		if x.lookupIP(ip) != nil || x.hasNamespace("ns") {
			t.Errorf("reverse %v: still indexed after delete", reverse)
		}
	}
}

// A headless service is indexed at its ready endpoints' addresses, and a new
// version of it moves the index with it: an endpoint that went away no longer
// names the service.
func TestIndexByIPFollowsEndpoints(t *testing.T) {
	a, b := netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")
	svc := func(addrs ...netip.Addr) *Service {
		more := &details{}
		for i, ad := range addrs {
			more.endpoints = append(more.endpoints, namedAddrs{name: fmt.Sprintf("h%d.west", i), addrs: []netip.Addr{ad}})
		}
		return &Service{rec: &Import{Meta: Meta{Namespace: "ns", Name: "db"}, HasData: true, Headless: true}, more: more}
	}
	if x := newIndex(true, false); x.put("db.ns", svc(a, b)) == nil && x.lookupIP(a) != nil {
		t.Errorf("indexed at an endpoint's address without ReverseEndpoints")
	}
	x := newIndex(true, true)
	x.put("db.ns", svc(a, b))
	if len(x.lookupIP(a)) != 1 || len(x.lookupIP(b)) != 1 {
		t.Fatalf("both endpoints: %v %v", x.lookupIP(a), x.lookupIP(b))
	}
	x.put("db.ns", svc(b))
	if x.lookupIP(a) != nil || len(x.lookupIP(b)) != 1 {
		t.Errorf("after %v went away: %v %v", a, x.lookupIP(a), x.lookupIP(b))
	}
	x.put("db.ns", nil)
	if x.lookupIP(b) != nil {
		t.Errorf("after the delete: %v", x.lookupIP(b))
	}
}

// BenchmarkMemoryPerEndpoint reports the heap the controller keeps per ready
// endpoint of a headless service once synced: 5,000 endpoints in 50 slices
// of four clusters, each in one of three zones; by default, and with the
// endpoints grouped by cluster and by zone (cluster_selectors, zonal). Run
// it with -benchtime 1x.
func BenchmarkMemoryPerEndpoint(b *testing.B) {
	b.Run("default", func(b *testing.B) { memoryPerEndpoint(b, 0) })
	b.Run("selectors", func(b *testing.B) { memoryPerEndpoint(b, SelectByCluster|SelectByZone) })
}

func memoryPerEndpoint(b *testing.B, sel Selectors) {
	const nSlices, per = 50, 100
	for range b.N {
		objs := []k8sruntime.Object{v2("demo", "db", "1", "Headless")}
		for s := range nSlices {
			addrs := make([]string, per)
			for i := range addrs {
				addrs[i] = fmt.Sprintf("10.%d.%d.%d", 100+s/250, s%250, i+1)
			}
			es := mcSlice("demo", fmt.Sprintf("db-%03d", s), "db", fmt.Sprintf("c%d", s%4), addrs...)
			for i := range es.Endpoints {
				z := fmt.Sprintf("zone-%d", i%3)
				es.Endpoints[i].Zone = &z
			}
			objs = append(objs, es)
		}
		var before uint64
		e := startWith(b, false, func(e *env) {
			e.patience = 5 * time.Minute
			e.configure = func(cfg *Config) { cfg.Selectors = sel }
			before = liveHeap()
		}, objs...)
		e.eventually("loaded", func() error {
			if s := e.c.Lookup("db.demo"); s == nil || s.Endpoints() != nSlices*per {
				return fmt.Errorf("not all endpoints yet")
			}
			return nil
		})
		after := liveHeap()
		b.ReportMetric(float64(after-before)/float64(nSlices*per), "B/endpoint")
		runtime.KeepAlive(objs)
	}
}
