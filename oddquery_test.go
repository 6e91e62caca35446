package multicluster

import (
	"context"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
)

// Odd queries get the right rcode, never SERVFAIL, never a panic.
func TestOddQueries(t *testing.T) {
	long := strings.Repeat("a", 63)
	runCases(t, newTestPlugin(t, fixture()...), []test.Case{
		nx(long+"."+long+"."+long+".demo.svc.clusterset.local.", dns.TypeA),
		nx("*.demo.svc.clusterset.local.", dns.TypeA),
		nx("*.web.demo.svc.clusterset.local.", dns.TypeA),
		nx("_*._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV),
		nx(`web\.demo.svc.clusterset.local.`, dns.TypeA),
		nx(`\000.web.demo.svc.clusterset.local.`, dns.TypeA),
		nx("web.demo.svc.svc.clusterset.local.", dns.TypeA),
		nodata("web.demo.svc.clusterset.local.", dns.TypeANY),
		nodata("web.demo.svc.clusterset.local.", 65280), // a private-use type
		nodata("web.demo.svc.clusterset.local.", dns.TypeMX),
		nx("nope.demo.svc.clusterset.local.", dns.TypeHTTPS),
		{Qname: "clusterset.local.", Qtype: dns.TypeAXFR, Rcode: dns.RcodeRefused},
		{Qname: "clusterset.local.", Qtype: dns.TypeIXFR, Rcode: dns.RcodeRefused},
		{Qname: "WEB.DEMO.SVC.CLUSTERSET.LOCAL.", Qtype: dns.TypeAAAA, Ns: []dns.RR{test.SOA(soa)}},
	})
}

// A message without a question asks nothing of our zones: it goes to the
// next plugin, and the plugin writes nothing itself.
func TestNoQuestion(t *testing.T) {
	m := newTestPlugin(t, fixture()...)
	next := &nextHandler{}
	m.Next = next
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	rcode, err := m.ServeDNS(context.Background(), rec, new(dns.Msg))
	if !next.called || rcode != dns.RcodeRefused || err != nil {
		t.Errorf("next called %v, rcode %s, err %v; want the next plugin's REFUSED", next.called, dns.RcodeToString[rcode], err)
	}
	if rec.Msg == nil || rec.Msg.Rcode != dns.RcodeRefused {
		t.Errorf("reply %v, want only the next plugin's", rec.Msg)
	}
}
