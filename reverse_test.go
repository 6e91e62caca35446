package multicluster

import (
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
