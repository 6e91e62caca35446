package multicluster

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"

	corev1 "k8s.io/api/core/v1"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

// ClusterSetIP answers are made at query time from the service's addresses
// and ports; these cases cover what the contract table does not: addresses
// given IPv6 first, three ports, a UDP and an SCTP port, a second zone.
func TestClusterSetIPAnswers(t *testing.T) {
	const second = "mcs.example."
	st, err := cache.NewStatic([]string{zone, second}, defaultTTL,
		clusterSetIP("shop", "cart", []string{"fd00::30", "10.42.0.30"},
			port("http", corev1.ProtocolTCP, 80), port("dns", corev1.ProtocolUDP, 53), port("assoc", corev1.ProtocolSCTP, 9000)))
	if err != nil {
		t.Fatal(err)
	}
	m := &Multicluster{TTL: defaultTTL, Fall: fall.Zero, backend: st}
	m.setZones([]string{zone, second})
	glue := func(name string) []dns.RR {
		return []dns.RR{test.A(name + " 5 IN A 10.42.0.30"), test.AAAA(name + " 5 IN AAAA fd00::30")}
	}
	runCases(t, m, []test.Case{
		{Qname: "cart.shop.svc.clusterset.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("cart.shop.svc.clusterset.local. 5 IN A 10.42.0.30")}},
		{Qname: "cart.shop.svc.mcs.example.", Qtype: dns.TypeAAAA,
			Answer: []dns.RR{test.AAAA("cart.shop.svc.mcs.example. 5 IN AAAA fd00::30")}},
		{Qname: "cart.shop.svc.mcs.example.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{
				test.SRV("cart.shop.svc.mcs.example. 5 IN SRV 0 33 80 cart.shop.svc.mcs.example."),
				test.SRV("cart.shop.svc.mcs.example. 5 IN SRV 0 33 53 cart.shop.svc.mcs.example."),
				test.SRV("cart.shop.svc.mcs.example. 5 IN SRV 0 33 9000 cart.shop.svc.mcs.example."),
			},
			Extra: glue("cart.shop.svc.mcs.example.")},
		{Qname: "_dns._udp.cart.shop.svc.clusterset.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_dns._udp.cart.shop.svc.clusterset.local. 5 IN SRV 0 100 53 cart.shop.svc.clusterset.local.")},
			Extra:  glue("cart.shop.svc.clusterset.local.")},
		{Qname: "_assoc._sctp.cart.shop.svc.clusterset.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_assoc._sctp.cart.shop.svc.clusterset.local. 5 IN SRV 0 100 9000 cart.shop.svc.clusterset.local.")},
			Extra:  glue("cart.shop.svc.clusterset.local.")},
		// Mixed case: answers echo the question, targets and glue are the canonical name.
		{Qname: "_HTTP._Tcp.Cart.shop.svc.clusterset.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_HTTP._Tcp.Cart.shop.svc.clusterset.local. 5 IN SRV 0 100 80 cart.shop.svc.clusterset.local.")},
			Extra:  glue("cart.shop.svc.clusterset.local.")},
		nodata("_udp.cart.shop.svc.clusterset.local.", dns.TypeSRV),
		nodata("_sctp.cart.shop.svc.clusterset.local.", dns.TypeA),
		nodata("_http._tcp.cart.shop.svc.clusterset.local.", dns.TypeAAAA),
		nodata("cart.shop.svc.clusterset.local.", dns.TypeTXT),
		nx("_http._udp.cart.shop.svc.clusterset.local.", dns.TypeSRV),
		nx("_dns._tcp.cart.shop.svc.clusterset.local.", dns.TypeSRV),
		nx("_tcpx.cart.shop.svc.clusterset.local.", dns.TypeSRV),
		nx("_http._tcp.x.cart.shop.svc.clusterset.local.", dns.TypeSRV),
		nx("http._tcp.cart.shop.svc.clusterset.local.", dns.TypeSRV),
		nx("x.cart.shop.svc.clusterset.local.", dns.TypeA),
		nx("10-42-0-30.west.cart.shop.svc.clusterset.local.", dns.TypeA),
	})
	// runCases sorts; the glue is A before AAAA whatever the object's order.
	r := new(dns.Msg)
	r.SetQuestion("_http._tcp.cart.shop.svc.clusterset.local.", dns.TypeSRV)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	m.ServeDNS(context.Background(), rec, r)
	if len(rec.Msg.Extra) != 2 || rec.Msg.Extra[0].Header().Rrtype != dns.TypeA || rec.Msg.Extra[1].Header().Rrtype != dns.TypeAAAA {
		t.Errorf("glue %v, want A then AAAA", rec.Msg.Extra)
	}
}
