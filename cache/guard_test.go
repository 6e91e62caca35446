package cache

import (
	"context"
	"fmt"
	"net/netip"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
)

// The special-purpose ranges no Service address can be in, from the IANA
// registries (RFC 6890): "this network" 0.0.0.0/8 and ::, loopback
// 127.0.0.0/8 and ::1, link-local 169.254.0.0/16 and fe80::/10, multicast
// 224.0.0.0/4 and ff00::/8, limited broadcast 255.255.255.255; the mapped
// form ::ffff:a.b.c.d of each IPv4 one is refused alike.
func TestAddressProblem(t *testing.T) {
	deny := []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16"), netip.MustParsePrefix("fd00:10::/64")}
	for addr, want := range map[string]string{
		"0.0.0.0": ReasonUnspecifiedAddress, "0.1.2.3": ReasonUnspecifiedAddress, "::": ReasonUnspecifiedAddress,
		"::ffff:0.0.0.0": ReasonUnspecifiedAddress,
		"127.0.0.1":      ReasonLoopbackAddress, "127.255.1.2": ReasonLoopbackAddress, "::1": ReasonLoopbackAddress,
		"::ffff:127.0.0.1": ReasonLoopbackAddress,
		"169.254.169.254":  ReasonLinkLocalAddress, "169.254.0.1": ReasonLinkLocalAddress, "fe80::1": ReasonLinkLocalAddress,
		"febf::1": ReasonLinkLocalAddress, "::ffff:169.254.169.254": ReasonLinkLocalAddress,
		"224.0.0.251": ReasonMulticastAddress, "239.1.1.1": ReasonMulticastAddress, "ff02::fb": ReasonMulticastAddress,
		"ff05::1:3": ReasonMulticastAddress, "ff01::1": ReasonMulticastAddress, "::ffff:224.0.0.1": ReasonMulticastAddress,
		"255.255.255.255": ReasonBroadcastAddress, "::ffff:255.255.255.255": ReasonBroadcastAddress,
		"10.244.3.4": ReasonDeniedAddress, "::ffff:10.244.3.4": ReasonDeniedAddress, "fd00:10::9": ReasonDeniedAddress,
		// Usable: private, shared, documentation and global addresses, the
		// edges of the ranges above, and a denied range's neighbours.
		"10.42.1.2": "", "1.0.0.0": "", "126.255.255.255": "", "128.0.0.0": "", "169.253.255.255": "", "169.255.0.0": "",
		"223.255.255.255": "", "240.0.0.1": "", "255.255.255.254": "", "100.64.0.1": "", "192.0.2.1": "",
		"10.245.0.1": "", "fd00::1": "", "fd00:11::1": "", "2001:db8::1": "", "fec0::1": "", "::ffff:10.42.1.2": "",
	} {
		if got := addressProblem(netip.MustParseAddr(addr), deny); got != want {
			t.Errorf("%s: %q, want %q", addr, got, want)
		}
	}
}

// An import's first address of a family that may not be answered gives way
// to the next one, which answers; each refused one is counted by its reason.
func TestImportAddressesGuarded(t *testing.T) {
	for _, tc := range []struct {
		ips  []string
		want string
	}{
		{[]string{"169.254.169.254", "10.42.1.2"}, "[10.42.1.2] [link_local_address]"},
		{[]string{"127.0.0.1", "::1", "fd00::5", "10.42.1.3"}, "[fd00::5 10.42.1.3] [loopback_address]"}, // each reason once (README: once per write)
		{[]string{"x", "y", "10.42.1.5", "10.42.1.6", "10.42.1.7"}, "[10.42.1.5] [bad_ip extra_ip]"},
		{[]string{"::ffff:127.0.0.1"}, "[] [loopback_address no_ips]"},
		{[]string{"0.0.0.0", "224.0.0.251", "255.255.255.255", "fe80::1"},
			"[] [unspecified_address multicast_address broadcast_address link_local_address no_ips]"},
		{[]string{"10.244.0.9", "10.42.1.4"}, "[10.42.1.4] [denied_address]"},
	} {
		im := &Import{Meta: Meta{Name: "svc", Namespace: "ns"}}
		readShared(im, rawImport{typ: "ClusterSetIP", ips: tc.ips}, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")})
		if got := fmt.Sprint(im.IPs, im.Problems()); got != tc.want {
			t.Errorf("%v: %s, want %s", tc.ips, got, tc.want)
		}
	}
}

// An EndpointSlice's addresses that may not be answered are left out, and
// an endpoint with none left has no name: the addresses kube-apiserver's
// validation lets through (multicast outside 224.0.0.0/24, broadcast) and
// those a fake or older API server would.
func TestSliceAddressesGuarded(t *testing.T) {
	es := mcSlice("ns", "s", "svc", "west", "239.1.1.1", "255.255.255.255", "10.42.0.7", "127.0.0.1", "10.244.1.1")
	es.Endpoints[2].Addresses = append(es.Endpoints[2].Addresses, "224.0.1.1")
	s := sliceFrom(es, []netip.Prefix{netip.MustParsePrefix("10.244.0.0/16")})
	if got := fmt.Sprint(s.Endpoints, s.Problems); got != "[{10-42-0-7  [10.42.0.7]}] "+
		"[multicast_address broadcast_address loopback_address denied_address]" { // each reason once: once per write in logs and counts (README)
		t.Errorf("got %s", got)
	}
	v6 := mcSlice("ns", "s6", "svc", "west", "::ffff:127.0.0.1", "ff02::1", "fd00::7")
	v6.AddressType = discoveryv1.AddressTypeIPv6
	if got := fmt.Sprint(sliceFrom(v6, nil).Endpoints, sliceFrom(v6, nil).Problems); got != "[{fd00--7  [fd00::7]}] [loopback_address multicast_address]" {
		t.Errorf("IPv6: %s", got)
	}
}

func withClusters(u *unstructured.Unstructured, clusters ...string) *unstructured.Unstructured {
	var cs []any
	for _, c := range clusters {
		cs = append(cs, map[string]any{"cluster": c})
	}
	u.Object["clusters"] = cs
	return u
}

// A headless import that lists its clusters takes EndpointSlices of those
// clusters only; one that lists none takes every cluster's. A slice of an
// unlisted cluster is counted once per write, and answers once its cluster
// is listed.
func TestControllerUnlistedCluster(t *testing.T) {
	e := start(t, false,
		withClusters(v2("demo", "db", "1", "Headless"), "east", "West.Example"),
		mcSlice("demo", "db-e", "db", "east", "10.1.0.1"), mcSlice("demo", "db-w", "db", "west.example", "10.2.0.1"),
		mcSlice("demo", "db-x", "db", "rogue", "10.9.0.1"),
		v2("demo", "any", "1", "Headless"), mcSlice("demo", "any-e", "any", "east", "10.1.0.2"),
		mcSlice("demo", "any-x", "any", "rogue", "10.9.0.2"))
	e.wantAddrs("db.demo", "10.1.0.1", "10.2.0.1")
	e.wantAddrs("any.demo", "10.1.0.2", "10.9.0.2")
	if z := e.c.Lookup("db.demo").Zone(0); z.Sub["10-9-0-1.rogue"] != nil || z.Sub["10-2-0-1.west.example"] == nil {
		t.Errorf("endpoint names: %v", z.Sub)
	}
	if n := e.skips(ReasonUnlistedCluster); n != 1 {
		t.Errorf("unlisted_cluster counted %d times, want 1", n)
	}
	e.apply(gvr2, withClusters(v2("demo", "db", "2", "Headless"), "east", "rogue"))
	e.wantAddrs("db.demo", "10.1.0.1", "10.9.0.1")
	if n := e.skips(ReasonUnlistedCluster); n != 2 {
		t.Errorf("unlisted_cluster counted %d times after the import's write, want 2", n)
	}
}

// Imports in protected namespaces are not answered, and counted once per
// write; AllowNamespaces lets one in, by name or pattern; namespaces keeps
// selecting as before, and a protected namespace it names stays refused
// unless allowed.
func TestControllerProtectedNamespaces(t *testing.T) {
	objs := []runtime.Object{
		v2("kube-system", "dns", "1", "ClusterSetIP", "10.0.0.1"), v2("kube-public", "web", "1", "ClusterSetIP", "10.0.0.2"),
		v2("kube-node-lease", "web", "1", "ClusterSetIP", "10.0.0.3"), v2("kube-x", "web", "1", "ClusterSetIP", "10.0.0.4"),
		v2("openshift-dns", "web", "1", "ClusterSetIP", "10.0.0.5"), v2("demo", "web", "1", "ClusterSetIP", "10.0.0.6"),
		v2("kubelike", "web", "1", "ClusterSetIP", "10.0.0.7"), v2("openshift", "web", "1", "ClusterSetIP", "10.0.0.8"),
	}
	e := start(t, false, objs...)
	e.wantAddrs("web.demo", "10.0.0.6")
	e.haveAddrs("web.kubelike", "10.0.0.7")
	e.haveAddrs("web.openshift", "10.0.0.8")
	for _, k := range []string{"dns.kube-system", "web.kube-public", "web.kube-node-lease", "web.kube-x", "web.openshift-dns"} {
		e.haveAddrs(k)
	}
	if n := e.skips(ReasonProtectedNamespace); n != 5 {
		t.Errorf("protected_namespace counted %d times, want 5", n)
	}
	e.apply(gvr2, v2("kube-system", "dns", "2", "ClusterSetIP", "10.0.0.9"))
	e.settle(gvr2)
	e.haveAddrs("dns.kube-system")
	if n := e.skips(ReasonProtectedNamespace); n != 6 {
		t.Errorf("protected_namespace counted %d times after a write, want 6", n)
	}

	allowed := startWith(t, false, func(e *env) {
		e.configure = func(c *Config) { c.AllowNamespaces = []string{"kube-system", "openshift-*"} }
	}, objs...)
	allowed.wantAddrs("dns.kube-system", "10.0.0.1")
	allowed.haveAddrs("web.openshift-dns", "10.0.0.5")
	allowed.haveAddrs("web.kube-public")

	selected := startWith(t, false, func(e *env) {
		e.configure = func(c *Config) { c.Namespaces = []string{"demo", "kube-public"} }
	}, objs...)
	selected.wantAddrs("web.demo", "10.0.0.6")
	selected.haveAddrs("web.kube-public")
	selected.haveAddrs("web.kubelike")
	if n := selected.skips(ReasonProtectedNamespace); n != 1 {
		t.Errorf("with namespaces, protected_namespace counted %d times, want 1 (kube-public)", n)
	}
}

// The cap counts addresses, not endpoints: an endpoint may hold up to 100
// (discovery/v1), each a record, so one of many addresses is cut to what
// fits, and the next slice of the service finds no room.
func TestEndpointBudgetCountsAddresses(t *testing.T) {
	b := newEndpointBudget(3)
	s := &Slice{Meta: Meta{Namespace: "demo", Name: "db-a"}, Service: "db", Endpoints: []Endpoint{
		{Host: "db-0", Addrs: []netip.Addr{netip.MustParseAddr("10.1.0.1"), netip.MustParseAddr("10.1.0.2")}},
		{Host: "db-1", Addrs: []netip.Addr{netip.MustParseAddr("10.1.0.3"), netip.MustParseAddr("10.1.0.4")}},
	}}
	b.fit(s)
	if got := fmt.Sprint(s.Endpoints, s.Problems); got != "[{db-0  [10.1.0.1 10.1.0.2]} {db-1  [10.1.0.3]}] [too_many_endpoints]" {
		t.Errorf("got %s", got)
	}
	dbB := func() *Slice {
		return &Slice{Meta: Meta{Namespace: "demo", Name: "db-b"}, Service: "db", Endpoints: []Endpoint{
			{Host: "db-2", Addrs: []netip.Addr{netip.MustParseAddr("10.1.0.5")}}}}
	}
	next := dbB()
	b.fit(next)
	if len(next.Endpoints) != 0 {
		t.Errorf("the full service's next slice kept %v", next.Endpoints)
	}
	b.release("demo", "db-a")
	next = dbB()
	b.fit(next)
	if len(next.Endpoints) != 1 {
		t.Errorf("after the release the slice kept %v", next.Endpoints)
	}
}

// A service keeps at most MaxEndpoints endpoints: slices beyond the cap
// keep what fits, what is cut is counted once per write, and a deleted
// slice's room goes to the next write.
func TestControllerMaxEndpoints(t *testing.T) {
	e := startWith(t, false, func(e *env) { e.configure = func(c *Config) { c.MaxEndpoints = 3 } },
		v2("demo", "db", "1", "Headless"), mcSlice("demo", "db-a", "db", "east", "10.1.0.1", "10.1.0.2"))
	e.wantAddrs("db.demo", "10.1.0.1", "10.1.0.2")
	slicesOf := e.kube.DiscoveryV1().EndpointSlices("demo")
	ctx := context.Background()
	if _, err := slicesOf.Create(ctx, mcSlice("demo", "db-b", "db", "west", "10.2.0.1", "10.2.0.2", "10.2.0.3"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.1.0.1", "10.1.0.2", "10.2.0.1")
	if n := e.skips(ReasonTooManyEndpoints); n != 1 {
		t.Errorf("too_many_endpoints counted %d times, want 1", n)
	}
	if n := e.c.Lookup("db.demo").Endpoints(); n != 3 {
		t.Errorf("%d endpoints kept, want 3", n)
	}
	if err := slicesOf.Delete(ctx, "db-a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.2.0.1")
	grown := mcSlice("demo", "db-b", "db", "west", "10.2.0.1", "10.2.0.2", "10.2.0.3", "10.2.0.4")
	grown.ResourceVersion = "2" // the fake clientset keeps what it is given
	if _, err := slicesOf.Update(ctx, grown, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	e.wantAddrs("db.demo", "10.2.0.1", "10.2.0.2", "10.2.0.3")
	if n := e.skips(ReasonTooManyEndpoints); n != 2 {
		t.Errorf("too_many_endpoints counted %d times, want 2", n)
	}
}
