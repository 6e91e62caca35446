package cache

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"testing/synctest"

	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	k8stesting "k8s.io/client-go/testing"

	"github.com/miekg/dns"
)

// headlessIn is a headless import of "svc" in "ns" with the named port http,
// and one EndpointSlice per cluster, each with the given endpoints: host
// "<cluster>-<i>" at the address.
func headlessIn(preferClose bool, byCluster map[string][]string) (*Import, []*Slice) {
	im := &Import{Meta: Meta{Namespace: "ns", Name: "svc"}, HasData: true, Headless: true, PreferClose: preferClose,
		Ports: []Port{{"http", "tcp", 80}}}
	var ss []*Slice
	for cluster, addrs := range byCluster {
		s := &Slice{Service: "svc", Cluster: cluster}
		for i, a := range addrs {
			s.Endpoints = append(s.Endpoints, Endpoint{Host: fmt.Sprintf("%s-%d", cluster, i), Addrs: []netip.Addr{netip.MustParseAddr(a)}})
		}
		ss = append(ss, s)
	}
	return im, ss
}

func rrTargets(rs []dns.RR) []string {
	var out []string
	for _, r := range rs {
		switch r := r.(type) {
		case *dns.SRV:
			out = append(out, strings.TrimSuffix(r.Target, ".svc.ns.svc.clusterset.local."))
		default:
			out = append(out, rrAddr(r))
		}
	}
	slices.Sort(out)
	return out
}

// The service's own name and its port names answer the local cluster's
// ready endpoints alone while it has one, every cluster's otherwise; the
// endpoints' own names answer as before.
func TestBuildPrefersLocalCluster(t *testing.T) {
	both := map[string][]string{"east": {"10.1.0.1", "fd00::1"}, "west": {"10.2.0.1"}}
	for _, tc := range []struct {
		name      string
		prefer    bool
		local     string
		clusters  map[string][]string
		wantA     []string
		wantAAAA  []string
		wantSRV   []string
		wantClose Closest
	}{
		{"prefers, local ready", true, "east", both, []string{"10.1.0.1"}, []string{"fd00::1"}, []string{"east-0.east", "east-1.east"},
			ClosestA | ClosestAAAA | ClosestSRV},
		// West has no IPv6 endpoint: AAAA is every cluster's, east's.
		{"prefers, another cluster is local", true, "west", both, []string{"10.2.0.1"}, []string{"fd00::1"}, []string{"west-0.west"},
			ClosestA | ClosestSRV},
		{"prefers, local has none ready", true, "north", both, []string{"10.1.0.1", "10.2.0.1"}, []string{"fd00::1"},
			[]string{"east-0.east", "east-1.east", "west-0.west"}, 0},
		{"prefers, local unknown", true, "", both, []string{"10.1.0.1", "10.2.0.1"}, []string{"fd00::1"},
			[]string{"east-0.east", "east-1.east", "west-0.west"}, 0},
		{"prefers, only local", true, "east", map[string][]string{"east": {"10.1.0.1"}}, []string{"10.1.0.1"}, nil, []string{"east-0.east"},
			ClosestA | ClosestSRV},
		// The local cluster is IPv6-only: A stays every cluster's, so it never goes empty.
		{"prefers, local IPv6 only", true, "six", map[string][]string{"six": {"fd00::6"}, "west": {"10.2.0.1"}},
			[]string{"10.2.0.1"}, []string{"fd00::6"}, []string{"six-0.six"}, ClosestAAAA | ClosestSRV},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im, ss := headlessIn(tc.prefer, tc.clusters)
			cfg := Config{ClusterID: tc.local}
			n, ok := normalize(im, ss, cfg.localFor(im, cfg.ClusterID), cfg.LocalZone, nil)
			if !ok {
				t.Fatal("no answers")
			}
			z := build(im, n, []string{"clusterset.local."}, 5, 0).Zone(0)
			if got := rrTargets(z.Service.A); !slices.Equal(got, tc.wantA) {
				t.Errorf("A %v, want %v", got, tc.wantA)
			}
			if got := rrTargets(z.Service.AAAA); !slices.Equal(got, tc.wantAAAA) {
				t.Errorf("AAAA %v, want %v", got, tc.wantAAAA)
			}
			if z.Closest != tc.wantClose {
				t.Errorf("closest %b, want %b", z.Closest, tc.wantClose)
			}
			for name, a := range map[string]*Answers{"service": &z.Service, "_http._tcp": z.Sub["_http._tcp"]} {
				if got := rrTargets(a.SRV); !slices.Equal(got, tc.wantSRV) {
					t.Errorf("%s SRV %v, want %v", name, got, tc.wantSRV)
				}
				var glue []string
				for _, r := range a.Extra {
					glue = append(glue, strings.TrimSuffix(r.Header().Name, ".svc.ns.svc.clusterset.local."))
				}
				slices.Sort(glue)
				if !slices.Equal(slices.Compact(glue), tc.wantSRV) {
					t.Errorf("%s glue for %v, want %v", name, glue, tc.wantSRV)
				}
			}
			// Every endpoint keeps its own name.
			for cluster, addrs := range tc.clusters {
				for i := range addrs {
					a := z.Sub[fmt.Sprintf("%s-%d.%s", cluster, i, cluster)]
					if a == nil || len(a.A)+len(a.AAAA) != 1 {
						t.Errorf("%s-%d.%s: %+v", cluster, i, cluster, a)
					}
				}
			}
		})
	}
}

// Without a preference, or with one but no local cluster, the answers are
// exactly those the service has without the feature.
func TestBuildWithoutPreferenceUnchanged(t *testing.T) {
	both := map[string][]string{"east": {"10.1.0.1"}, "west": {"10.2.0.1", "10.2.0.2"}}
	im, ss := headlessIn(false, both)
	n0, _ := normalize(im, ss, "", "", nil)
	want := build(im, n0, []string{"clusterset.local."}, 5, 0).Zone(0)
	for _, cfg := range []Config{{ClusterID: "east"}, {PreferLocal: true}, {}} {
		n, _ := normalize(im, ss, cfg.localFor(im, cfg.ClusterID), cfg.LocalZone, nil)
		if !n.equal(n0) {
			t.Errorf("%+v: inputs differ", cfg)
		}
		got := build(im, n, []string{"clusterset.local."}, 5, 0).Zone(0)
		if fmt.Sprint(got.Service) != fmt.Sprint(want.Service) || len(got.Sub) != len(want.Sub) {
			t.Errorf("%+v: answers differ", cfg)
		}
	}
	// PreferLocal applies to every headless import, never to a ClusterSetIP one.
	all := &Config{PreferLocal: true}
	if all.localFor(im, "east") != "east" || all.localFor(&Import{PreferClose: true}, "east") != "" {
		t.Error("localFor")
	}
}

// trafficDistribution is read from every version: the spec of v1beta1 and
// v1alpha1, the root of v1alpha2. internalTrafficPolicy changes nothing.
func TestReadTrafficDistribution(t *testing.T) {
	for _, tc := range []struct {
		td   any // nil: field absent
		want bool
	}{
		{nil, false}, {"PreferClose", true}, {"PreferSameZone", true}, {"PreferSameNode", true},
		{"preferclose", false}, {"Anywhere", false}, {"", false},
	} {
		for _, version := range Versions {
			fields := map[string]any{"type": "Headless", "internalTrafficPolicy": "Local"}
			if tc.td != nil {
				fields["trafficDistribution"] = tc.td
			}
			u := &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": ServiceImports(version).GroupVersion().String(), "kind": "ServiceImport",
				"metadata": map[string]any{"namespace": "ns", "name": "svc"}}}
			if version == V1alpha2 {
				u.Object["spec"] = map[string]any{}
				for k, v := range fields {
					u.Object[k] = v
				}
			} else {
				u.Object["spec"] = fields
			}
			im, err := ReadImport(u)
			if err != nil || !im.HasData || !im.Headless {
				t.Fatalf("%s %v: %+v, %v", version, tc.td, im, err)
			}
			if im.PreferClose != tc.want {
				t.Errorf("%s trafficDistribution %v: PreferClose %v, want %v", version, tc.td, im.PreferClose, tc.want)
			}
		}
	}
}

var clusterPropertyGVR = ClusterPropertyResource.WithVersion("v1beta1")

func clusterProperty(name, value string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "about.k8s.io/v1beta1", "kind": "ClusterProperty",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"value": value},
	}}
}

func closeImport(ns, name, rv string) *unstructured.Unstructured {
	u := v2(ns, name, rv, "Headless")
	u.Object["trafficDistribution"] = "PreferClose"
	return u
}

func (e *env) setProperty(value string) {
	e.t.Helper()
	res := e.dyn.Resource(clusterPropertyGVR)
	ctx := context.Background()
	switch _, err := res.Get(ctx, ClusterIDProperty, metav1.GetOptions{}); {
	case value == "" && err == nil:
		err = res.Delete(ctx, ClusterIDProperty, metav1.DeleteOptions{})
		if err != nil {
			e.t.Fatal(err)
		}
	case value == "":
	case err == nil:
		if _, err := res.Update(ctx, clusterProperty(ClusterIDProperty, value), metav1.UpdateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	default:
		if _, err := res.Create(ctx, clusterProperty(ClusterIDProperty, value), metav1.CreateOptions{}); err != nil {
			e.t.Fatal(err)
		}
	}
}

// The local cluster follows the ClusterProperty without a restart: named,
// renamed, made invalid and deleted; the answers of a service that prefers
// close endpoints follow it, and those of one that does not never change.
func TestControllerFollowsClusterProperty(t *testing.T) {
	e := start(t, false,
		closeImport("demo", "db", "1"), mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), mcSlice("demo", "db-w", "db", "west", "10.2.0.1"),
		localServiceSlice("demo", "db-own", "db", "10.1.0.1", "10.2.0.1"),
		v2("demo", "any", "1", "Headless"), mcSlice("demo", "any-e", "any", "east", "10.1.0.2"), mcSlice("demo", "any-w", "any", "west", "10.2.0.2"),
		clusterProperty("other.clusterset.k8s.io", "east"))
	e.wantAddrs("db.demo", "10.1.0.1", "10.2.0.1")
	for _, step := range []struct {
		value string
		want  []string
	}{
		{"east", []string{"10.1.0.1"}},
		{"west", []string{"10.2.0.1"}},
		{"Not_A_Cluster", []string{"10.1.0.1", "10.2.0.1"}},
		{"west", []string{"10.2.0.1"}},
		{"", []string{"10.1.0.1", "10.2.0.1"}},
	} {
		e.setProperty(step.value)
		e.wantAddrs("db.demo", step.want...)
		e.haveAddrs("any.demo", "10.1.0.2", "10.2.0.2")
	}
	if len(e.logged(`the local cluster is "west"`)) != 2 || len(e.logged("is not a cluster ID")) != 1 {
		t.Errorf("logs: %q", e.logged("cluster"))
	}
}

// Readiness decides within one rebuild: the local cluster's last ready
// endpoint going away gives every cluster's, its return the local one's.
func TestControllerLocalReadinessFlips(t *testing.T) {
	e := startWith(t, false, func(e *env) { e.configure = func(c *Config) { c.ClusterID = "east" } },
		closeImport("demo", "db", "1"), mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), mcSlice("demo", "db-w", "db", "west", "10.2.0.1"),
		localServiceSlice("demo", "db-own", "db", "10.1.0.1"))
	e.wantAddrs("db.demo", "10.1.0.1")
	slicesOf := e.kube.DiscoveryV1().EndpointSlices("demo")
	ctx := context.Background()
	notReady := mcSlice("demo", "db-e", "db", "east", "10.1.0.1")
	no := false
	notReady.Endpoints[0].Conditions.Ready = &no
	for range 3 {
		if _, err := slicesOf.Update(ctx, notReady, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.wantAddrs("db.demo", "10.2.0.1") // every cluster's ready endpoints: west's
		if c := e.c.Lookup("db.demo").Zone(0).Closest; c != 0 {
			t.Errorf("closest %b with no local endpoint ready", c)
		}
		if _, err := slicesOf.Update(ctx, mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		e.wantAddrs("db.demo", "10.1.0.1")
	}
	// The endpoints' own names answer, in either cluster.
	if z := e.c.Lookup("db.demo").Zone(0); z.Sub["10-2-0-1.west"] == nil || z.Sub["10-1-0-1.east"] == nil || z.Closest != ClosestA|ClosestSRV {
		t.Errorf("endpoint names: %v", z.Sub)
	}
}

// prefer_local makes every headless service prefer the local cluster, with
// the ID from the Config: the ClusterProperty is then not read at all.
func TestControllerPreferLocalOption(t *testing.T) {
	e := startWith(t, false, func(e *env) {
		e.configure = func(c *Config) { c.ClusterID, c.PreferLocal = "west", true }
	}, v2("demo", "db", "1", "Headless"), mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), mcSlice("demo", "db-w", "db", "west", "10.2.0.1"),
		localServiceSlice("demo", "db-own", "db", "10.2.0.1"), clusterProperty(ClusterIDProperty, "east"))
	e.wantAddrs("db.demo", "10.2.0.1")
	if e.c.cluster != nil {
		t.Error("the ClusterProperty is watched although cluster_id is set")
	}
	for _, a := range e.dyn.Actions() {
		if a.GetResource().Resource == ClusterPropertyResource.Resource {
			t.Errorf("read the ClusterProperty: %v", a)
		}
	}
}

// A cluster without the ClusterProperty API, or a plugin refused it,
// answers at once, as without the feature, and says so once.
func TestControllerWithoutClusterProperty(t *testing.T) {
	for _, tc := range []struct {
		name string
		err  error
		log  string
	}{
		{"not served", apierrors.NewNotFound(schema.GroupResource{}, ""), "serves no ClusterProperty"},
		{"refused", apierrors.NewForbidden(ClusterPropertyResource, "", fmt.Errorf("RBAC")), "cannot read ClusterProperty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := startWith(t, false, func(e *env) {
				e.dyn.PrependReactor("list", ClusterPropertyResource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
					return true, nil, tc.err
				})
			}, closeImport("demo", "db", "1"), mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), mcSlice("demo", "db-w", "db", "west", "10.2.0.1"))
			e.wantAddrs("db.demo", "10.1.0.1", "10.2.0.1")
			if got := e.logged(tc.log); len(got) != 1 {
				t.Errorf("logged %q", e.logged(""))
			}
		})
	}
}

// The first answers are already the local cluster's: answering waits for
// the ClusterProperty's first list.
func TestControllerFirstAnswersLocal(t *testing.T) {
	// The ClusterProperty is listed last: its first list is throttled (429,
	// Retry-After 1 s), which the controller waits out on the bubble's fake
	// clock, and that clock moves only once every other goroutine of the
	// bubble, the other informers and the controller among them, has done
	// all it can without it.
	synctest.Test(t, func(t *testing.T) {
		var throttled atomic.Bool
		e := startWith(t, false, func(e *env) {
			e.dyn.PrependReactor("list", ClusterPropertyResource.Resource, func(k8stesting.Action) (bool, runtime.Object, error) {
				if throttled.CompareAndSwap(false, true) {
					return true, nil, apierrors.NewTooManyRequests("the ClusterProperty waits", 1)
				}
				return false, nil, nil
			})
		}, clusterProperty(ClusterIDProperty, "east"), localServiceSlice("demo", "db-own", "db", "10.1.0.1"),
			closeImport("demo", "db", "1"), mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), mcSlice("demo", "db-w", "db", "west", "10.2.0.1"))
		if !throttled.Load() {
			t.Fatal("the ClusterProperty was never listed")
		}
		e.haveAddrs("db.demo", "10.1.0.1")
	})
}

// Where only v1alpha1 of ClusterProperty is served, it is read through it.
func TestControllerClusterPropertyV1alpha1(t *testing.T) {
	old := clusterProperty(ClusterIDProperty, "west")
	old.SetAPIVersion("about.k8s.io/v1alpha1")
	e := startWith(t, false, func(e *env) {
		e.dyn.PrependReactor("list", ClusterPropertyResource.Resource, func(a k8stesting.Action) (bool, runtime.Object, error) {
			if a.GetResource().Version == "v1beta1" {
				return true, nil, apierrors.NewNotFound(a.GetResource().GroupResource(), "")
			}
			return false, nil, nil
		})
	}, old, closeImport("demo", "db", "1"), mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), mcSlice("demo", "db-w", "db", "west", "10.2.0.1"),
		localServiceSlice("demo", "db-own", "db", "10.2.0.1"))
	e.haveAddrs("db.demo", "10.2.0.1")
	if len(e.logged("serves no ClusterProperty")) != 0 {
		t.Errorf("logs: %q", e.logged("ClusterProperty"))
	}
}

// localServiceSlice is an EndpointSlice of the local Service ns/svc, as
// kube-controller-manager's EndpointSlice controller writes it.
func localServiceSlice(ns, name, svc string, ips ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{discoveryv1.LabelServiceName: svc, discoveryv1.LabelManagedBy: "endpointslice-controller.k8s.io"}},
		AddressType: discoveryv1.AddressTypeIPv4}
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{ip}})
	}
	return es
}

// A peer's slice that claims the local cluster's ID captures nothing: only
// endpoints whose addresses the local Service's own EndpointSlices hold
// count as local, whatever the label says. A slice of the local Service
// written by hand (mirrored, or labelled by another manager) proves
// nothing; the proof follows the local Service's slices as they change.
func TestControllerLocalNeedsProof(t *testing.T) {
	mirrored := localServiceSlice("demo", "db-mirror", "db", "10.9.0.66")
	mirrored.Labels[discoveryv1.LabelManagedBy] = "endpointslicemirroring-controller.k8s.io"
	e := startWith(t, false, func(e *env) { e.configure = func(c *Config) { c.ClusterID = "east" } },
		closeImport("demo", "db", "1"),
		mcSlice("demo", "db-e", "db", "east", "10.1.0.1"),  // the local cluster's, proven below
		mcSlice("demo", "db-w", "db", "west", "10.2.0.1"),  // a peer's
		mcSlice("demo", "db-x", "db", "east", "10.9.0.66"), // a peer claiming the local ID
		mirrored, localServiceSlice("demo", "db-own", "db", "10.1.0.1"), // the proof of 10.1.0.1 alone
		localServiceSlice("other", "db-own", "db", "10.9.0.66")) // another namespace's Service proves nothing here
	e.wantAddrs("db.demo", "10.1.0.1")
	// The claim is still answered under its own name, as any endpoint.
	if z := e.c.Lookup("db.demo").Zone(0); z.Sub["10-9-0-66.east"] == nil {
		t.Errorf("endpoint names: %v", z.Sub)
	}
	if e.skips(ReasonUnprovenLocal) != 1 {
		t.Errorf("unproven_local counted %d times, want once", e.skips(ReasonUnprovenLocal))
	}
	// Without proof for any local endpoint, no endpoint is local: every
	// cluster's answer, the claim among them.
	ctx := context.Background()
	if err := e.kube.DiscoveryV1().EndpointSlices("demo").Delete(ctx, "db-own", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.1.0.1", "10.2.0.1", "10.9.0.66")
	// Once the local Service has the address, it is local.
	if _, err := e.kube.DiscoveryV1().EndpointSlices("demo").Create(ctx, localServiceSlice("demo", "db-own", "db", "10.1.0.1", "10.9.0.66"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.1.0.1", "10.9.0.66")
}

// A peer's claim of the local cluster that takes a proven endpoint's
// hostname is not answered under that name, which is the local cluster's
// endpoint: merged into it, its addresses would be answered as local, and
// an IPv6 one would make the local cluster seem to have IPv6 endpoints,
// hiding the peers' (a review's finding on the real binary).
func TestControllerLocalNameNotCaptured(t *testing.T) {
	named := func(es *discoveryv1.EndpointSlice, family discoveryv1.AddressType) *discoveryv1.EndpointSlice {
		es.AddressType = family
		es.Endpoints[0].Hostname = ptr("db-0")
		return es
	}
	e := startWith(t, false, func(e *env) { e.configure = func(c *Config) { c.ClusterID = "east" } },
		closeImport("demo", "db", "1"),
		named(mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), discoveryv1.AddressTypeIPv4),
		named(mcSlice("demo", "db-w", "db", "west", "10.2.0.1"), discoveryv1.AddressTypeIPv4),
		named(mcSlice("demo", "db-w6", "db", "west", "fd00::2:1"), discoveryv1.AddressTypeIPv6),
		named(mcSlice("demo", "db-x", "db", "east", "10.9.0.9"), discoveryv1.AddressTypeIPv4),
		named(mcSlice("demo", "db-x6", "db", "east", "fd00::66"), discoveryv1.AddressTypeIPv6),
		localServiceSlice("demo", "db-own", "db", "10.1.0.1"))
	// The local cluster's proven A alone; no local AAAA, so every
	// cluster's AAAA: the peer's.
	e.wantAddrs("db.demo", "10.1.0.1", "fd00::2:1")
	z := e.c.Lookup("db.demo").Zone(0)
	if got := z.Sub["db-0.east"]; got == nil || len(got.A) != 1 || rrAddr(got.A[0]) != "10.1.0.1" || len(got.AAAA) != 0 {
		t.Errorf("db-0.east answers %v", got)
	}
	if n := e.skips(ReasonUnprovenLocal); n != 2 {
		t.Errorf("unproven_local counted %d times, want 2", n)
	}
}

// No service prefers anything: the local Services' EndpointSlices are never
// listed.
func TestControllerOwnSlicesOnlyWhenPreferred(t *testing.T) {
	e := startWith(t, false, func(e *env) { e.configure = func(c *Config) { c.ClusterID = "east" } },
		v2("demo", "db", "1", "Headless"), mcSlice("demo", "db-e", "db", "east", "10.1.0.1"),
		localServiceSlice("demo", "db-own", "db", "10.1.0.1"))
	e.wantAddrs("db.demo", "10.1.0.1")
	for _, a := range e.kube.Actions() {
		if l, ok := a.(k8stesting.ListAction); ok && strings.Contains(l.GetListRestrictions().Labels.String(), discoveryv1.LabelManagedBy) {
			t.Errorf("listed the local Services' slices: %v", a)
		}
	}
}
