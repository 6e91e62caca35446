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

func TestNoQuestion(t *testing.T) {
	m := newTestPlugin(t, fixture()...)
	defer func() {
		if r := recover(); r != nil {
			t.Fatalf("panic: %v", r)
		}
	}()
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	m.Next = &nextHandler{}
	m.ServeDNS(context.Background(), rec, new(dns.Msg))
}
