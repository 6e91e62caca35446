package cache

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
	"unsafe"

	"github.com/miekg/dns"
)

// The ports at a service's own name: the first of each number, in order.
func TestSRVPorts(t *testing.T) {
	tcp42, udp42 := Port{"tcp", "tcp", 42}, Port{"udp", "udp", 42}
	http, web, dns53 := Port{"http", "tcp", 80}, Port{"web", "tcp", 80}, Port{"dns", "udp", 53}
	for _, tc := range []struct {
		ports, want []Port
	}{
		{nil, nil},
		{[]Port{http}, []Port{http}},
		{[]Port{http, dns53}, []Port{http, dns53}},
		{[]Port{tcp42, udp42}, []Port{tcp42}},
		{[]Port{http, dns53, web}, []Port{http, dns53}},
		{[]Port{dns53, http, web, tcp42, udp42}, []Port{dns53, http, tcp42}},
	} {
		im := &Import{Meta: Meta{Namespace: "ns", Name: "svc"}, HasData: true,
			IPs: []netip.Addr{netip.MustParseAddr("10.0.0.1")}, Ports: tc.ports}
		n, _ := normalize(im, nil, "", "", nil)
		svc := build(im, n, []string{"clusterset.local."}, 5, 0)
		if got := svc.SRVPorts(); !slices.Equal(got, tc.want) {
			t.Errorf("ports %v: SRVPorts %v, want %v", tc.ports, got, tc.want)
		}
		if len(tc.want) == len(tc.ports) && svc.more != nil {
			t.Errorf("ports %v: a ClusterSetIP service whose ports differ in number keeps more", tc.ports)
		}
	}
	// What a hundred thousand ClusterSetIP services each hold.
	if size := unsafe.Sizeof(Service{}); size > 48 {
		t.Errorf("a Service takes %d bytes, more than 48", size)
	}
}

// A headless service answers its own name with one SRV record per endpoint and
// port number; each port name keeps its own records.
func TestHeadlessSRVOnePerTargetAndPort(t *testing.T) {
	im := &Import{Meta: Meta{Namespace: "ns", Name: "svc"}, HasData: true, Headless: true,
		Ports: []Port{{"tcp", "tcp", 42}, {"udp", "udp", 42}}}
	var eps []Endpoint
	for i, h := range []string{"a", "b", "c"} {
		eps = append(eps, Endpoint{Host: h, Addrs: []netip.Addr{netip.AddrFrom4([4]byte{10, 0, 0, byte(1 + i)})}})
	}
	n, ok := normalize(im, []*Slice{{Service: "svc", Cluster: "west", Endpoints: eps}}, "", "", nil)
	if !ok {
		t.Fatal("no answers")
	}
	z := *build(im, n, []string{"clusterset.local."}, 5, 0).Zone(0)
	for name, rs := range map[string][]dns.RR{
		"svc":       z.Service.SRV,
		"_tcp._tcp": z.Sub["_tcp._tcp"].SRV,
		"_udp._udp": z.Sub["_udp._udp"].SRV,
	} {
		if len(rs) != 3 {
			t.Errorf("%s: %d SRV records, want 3: %v", name, len(rs), rs)
		}
		for i, r := range rs {
			if w := r.(*dns.SRV).Weight; w != 33 {
				t.Errorf("%s: weight %d, want 33", name, w)
			}
			if slices.ContainsFunc(rs[:i], func(d dns.RR) bool { return dns.IsDuplicate(d, r) }) {
				t.Errorf("%s: %v twice", name, r)
			}
		}
	}
	if len(z.Service.Extra) != 3 {
		t.Errorf("glue %v, want one address per endpoint", z.Service.Extra)
	}
}

// BenchmarkBuildHeadless builds the answers of one headless service of
// max_endpoints' default, 10,000 ready endpoints in two clusters with one
// port: what every change of one of its slices costs. It must grow linearly
// with the endpoints: a hostile import may hold that many.
func BenchmarkBuildHeadless(b *testing.B) {
	im := &Import{Meta: Meta{Namespace: "ns", Name: "svc"}, HasData: true, Headless: true, Ports: []Port{{"http", "tcp", 80}}}
	var ss []*Slice
	for c, cluster := range []string{"east", "west"} {
		s := &Slice{Service: "svc", Cluster: cluster}
		for i := range DefaultMaxEndpoints / 2 {
			ip := netip.AddrFrom4([4]byte{10, byte(c), byte(i >> 8), byte(i)})
			s.Endpoints = append(s.Endpoints, Endpoint{Host: AddressLabel(ip), Addrs: []netip.Addr{ip}})
		}
		ss = append(ss, s)
	}
	for b.Loop() {
		n, _ := normalize(im, ss, "", "", nil)
		build(im, n, []string{"clusterset.local."}, 5, 0)
	}
}

// fitNames keeps the slices in order, copies only the ones that lose an
// endpoint, and hands back its input when none does. The room is worked out
// by hand: 254 characters with the final dot, less ".", "svc.ns.svc." (11)
// and "clusterset.local." (17), is 225 for "<host>.<cluster>".
func TestFitNames(t *testing.T) {
	im := &Import{Meta: Meta{Name: "svc", Namespace: "ns"}, Headless: true}
	zones := []string{"clusterset.local.", "short."}
	cluster := strings.Repeat("c", 63) + "." + strings.Repeat("d", 63) // 127
	fits := Endpoint{Host: strings.Repeat("h", 225-128)}               // 97 + 1 + 127 = 225
	long := Endpoint{Host: strings.Repeat("h", 225-127)}
	a := &Slice{Meta: Meta{Name: "a"}, Cluster: cluster, Endpoints: []Endpoint{fits}}
	b := &Slice{Meta: Meta{Name: "b"}, Cluster: cluster, Endpoints: []Endpoint{long, fits}}
	c := &Slice{Meta: Meta{Name: "c"}, Cluster: "west", Endpoints: []Endpoint{{Host: "x"}}}
	ss := []*Slice{a, b, c}
	fit, cut := fitNames(im, ss, zones)
	if len(fit) != 3 || fit[0] != a || fit[2] != c || fit[1].Name != "b" || len(fit[1].Endpoints) != 1 || fit[1].Endpoints[0].Host != fits.Host ||
		len(b.Endpoints) != 2 || !slices.Equal(cut, []*Slice{b}) {
		t.Errorf("fit %v, cut %v; b now %v", fit, cut, b.Endpoints)
	}
	ok := []*Slice{a, c}
	if fit, cut := fitNames(im, ok, zones); &fit[0] != &ok[0] || cut != nil {
		t.Errorf("nothing to cut: fit %v (a copy?), cut %v", fit, cut)
	}
}
