package multicluster

import (
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

func reversePlugin(t *testing.T) *Multicluster {
	t.Helper()
	st, err := cache.NewStatic([]string{zone}, defaultTTL, fixture()...)
	if err != nil {
		t.Fatal(err)
	}
	m := &Multicluster{TTL: defaultTTL, Fall: fall.Zero, backend: st}
	m.setZones([]string{zone, "42.10.in-addr.arpa.", "0.0.d.f.ip6.arpa."})
	return m
}

func TestReverse(t *testing.T) {
	const revSOA = "42.10.in-addr.arpa. 5 IN SOA ns.dns.42.10.in-addr.arpa. hostmaster.42.10.in-addr.arpa. 1 7200 1800 86400 5"
	runCases(t, reversePlugin(t), []test.Case{
		{Qname: "10.0.42.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("10.0.42.10.in-addr.arpa. 5 IN PTR web.demo.svc.clusterset.local.")}},
		{Qname: "11.0.42.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("11.0.42.10.in-addr.arpa. 5 IN PTR dual.demo.svc.clusterset.local.")}},
		{Qname: "1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR dual.demo.svc.clusterset.local.")}},
		{Qname: "99.0.42.10.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(revSOA)}},
		{Qname: "0.42.10.in-addr.arpa.", Qtype: dns.TypePTR, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(revSOA)}},
		{Qname: "10.0.42.10.in-addr.arpa.", Qtype: dns.TypeA, Ns: []dns.RR{test.SOA(revSOA)}},
		{Qname: "42.10.in-addr.arpa.", Qtype: dns.TypeSOA, Answer: []dns.RR{test.SOA(revSOA)}},
		// The name server the apex NS names, whose address a transfer carries.
		{Qname: "ns.dns.42.10.in-addr.arpa.", Qtype: dns.TypeA, Answer: []dns.RR{test.A("ns.dns.42.10.in-addr.arpa. 5 IN A 127.0.0.1")}},
		{Qname: "ns.dns.42.10.in-addr.arpa.", Qtype: dns.TypeTXT, Ns: []dns.RR{test.SOA(revSOA)}},
		{Qname: "dns.42.10.in-addr.arpa.", Qtype: dns.TypeA, Ns: []dns.RR{test.SOA(revSOA)}},
	})
}

func TestReverseZonesFromCIDR(t *testing.T) {
	m, err := parseInput("multicluster clusterset.local 10.42.0.0/16 fd00::/8")
	if err != nil {
		t.Fatal(err)
	}
	if len(m.forward) != 1 || m.forward[0] != zone || len(m.Zones) != 3 || m.zones[1].forward != -1 || m.zones[2].forward != -1 {
		t.Fatalf("zones %v forward %v", m.Zones, m.forward)
	}
}

// The bare reverse zones, as kubeadm's Corefile gives the kubernetes plugin
// (`kubernetes cluster.local in-addr.arpa ip6.arpa`), are reverse zones:
// PTR answers there, and no forward name is read inside them.
func TestBareReverseZones(t *testing.T) {
	m := reversePlugin(t)
	m.setZones([]string{zone, "in-addr.arpa.", "ip6.arpa."})
	if len(m.forward) != 1 || m.forward[0] != zone {
		t.Fatalf("forward zones %v", m.forward)
	}
	const revSOA = "in-addr.arpa. 5 IN SOA ns.dns.in-addr.arpa. hostmaster.in-addr.arpa. 1 7200 1800 86400 5"
	runCases(t, m, []test.Case{
		{Qname: "10.0.42.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("10.0.42.10.in-addr.arpa. 5 IN PTR web.demo.svc.clusterset.local.")}},
		{Qname: "1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1.1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa. 5 IN PTR dual.demo.svc.clusterset.local.")}},
		{Qname: "web.demo.svc.in-addr.arpa.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(revSOA)}},
	})
}

// A headless service's ready endpoints answer PTR at their addresses, with
// the names the specification gives them: <hostname>.<clusterid>.<svc>.<ns>,
// else the address with dashes; an endpoint that is not ready, or a slice
// without the MCS labels, has none.
func TestReverseHeadlessEndpoints(t *testing.T) {
	m := reversePlugin(t)
	m.setZones([]string{zone, "10.in-addr.arpa.", "0.0.d.f.ip6.arpa."})
	m.endpointPTR = true
	const revSOA = "10.in-addr.arpa. 5 IN SOA ns.dns.10.in-addr.arpa. hostmaster.10.in-addr.arpa. 1 7200 1800 86400 5"
	const v6 = "1.0.0.0.2.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.f.ip6.arpa."
	nx := func(q string) test.Case {
		return test.Case{Qname: q, Qtype: dns.TypePTR, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(revSOA)}}
	}
	runCases(t, m, []test.Case{
		{Qname: "1.0.1.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("1.0.1.10.in-addr.arpa. 5 IN PTR db-0.west.db.demo.svc.clusterset.local.")}},
		{Qname: "2.0.1.10.in-addr.arpa.", Qtype: dns.TypePTR, // ready unset: ready; no hostname
			Answer: []dns.RR{test.PTR("2.0.1.10.in-addr.arpa. 5 IN PTR 10-1-0-2.west.db.demo.svc.clusterset.local.")}},
		{Qname: "1.0.2.10.in-addr.arpa.", Qtype: dns.TypePTR, // a cluster ID with a dot
			Answer: []dns.RR{test.PTR("1.0.2.10.in-addr.arpa. 5 IN PTR db-0.east.prod.db.demo.svc.clusterset.local.")}},
		{Qname: v6, Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR(v6 + " 5 IN PTR db-0.east.prod.db.demo.svc.clusterset.local.")}},
		{Qname: "1.0.2.10.in-addr.arpa.", Qtype: dns.TypeA, Ns: []dns.RR{test.SOA(revSOA)}},
		nx("3.0.1.10.in-addr.arpa."), // db-2: not ready
		nx("1.0.3.10.in-addr.arpa."), // idle's only endpoint: not ready
		nx("9.9.9.10.in-addr.arpa."), // a slice without the MCS labels
		{Qname: "10.0.42.10.in-addr.arpa.", Qtype: dns.TypePTR,
			Answer: []dns.RR{test.PTR("10.0.42.10.in-addr.arpa. 5 IN PTR web.demo.svc.clusterset.local.")}},
	})
	// Without endpoint_ptr, as before it: the cluster that runs the pod
	// has their PTR records.
	m.endpointPTR = false
	runCases(t, m, []test.Case{nx("1.0.1.10.in-addr.arpa."), nx("1.0.2.10.in-addr.arpa.")})
}

// One PTR per name at an address: two clusters' endpoints, and two
// services, that report the same one.
func TestReverseSharedEndpointAddress(t *testing.T) {
	st, err := cache.NewStatic([]string{zone}, defaultTTL,
		headless("demo", "a", port("http", "TCP", 80)),
		headless("demo", "b", port("http", "TCP", 80)),
		slice("demo", "a-west", "a", "west", "IPv4", ep{host: "x", addrs: []string{"10.5.0.1"}}),
		slice("demo", "a-east", "a", "east", "IPv4", ep{host: "y", addrs: []string{"10.5.0.1"}}),
		slice("demo", "b-west", "b", "west", "IPv4", ep{addrs: []string{"10.5.0.1"}}))
	if err != nil {
		t.Fatal(err)
	}
	m := &Multicluster{TTL: defaultTTL, Fall: fall.Zero, backend: st, endpointPTR: true}
	m.setZones([]string{zone, "10.in-addr.arpa."})
	const q = "1.0.5.10.in-addr.arpa."
	rr := func(target string) dns.RR { return test.PTR(q + " 5 IN PTR " + target) }
	runCases(t, m, []test.Case{{Qname: q, Qtype: dns.TypePTR, Answer: []dns.RR{
		rr("y.east.a.demo.svc.clusterset.local."), rr("x.west.a.demo.svc.clusterset.local."),
		rr("10-5-0-1.west.b.demo.svc.clusterset.local."),
	}}})
	got := collect(t, m, "10.in-addr.arpa.", 0)
	ptrs := 0
	for _, r := range got {
		if strings.Contains(r, " IN PTR ") {
			ptrs++
		}
	}
	if ptrs != 3 {
		t.Errorf("reverse zone transfer: %d PTR records, want 3 (each name once):\n%s", ptrs, strings.Join(got, "\n"))
	}
}
