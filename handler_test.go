package multicluster

import (
	"context"
	"slices"
	"sort"
	"strings"
	"testing"
	"unsafe"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
)

const soa = "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 1 7200 1800 86400 5"

func nx(name string, qtype uint16) test.Case {
	return test.Case{Qname: name, Qtype: qtype, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}
}

func nodata(name string, qtype uint16) test.Case {
	return test.Case{Qname: name, Qtype: qtype, Rcode: dns.RcodeSuccess, Ns: []dns.RR{test.SOA(soa)}}
}

// TestServeDNSContract asks the handler every question of the contract
// table on the objects of testdata/, as the e2e tests ask the real CoreDNS.
func TestServeDNSContract(t *testing.T) {
	objs, err := contract.ReadObjects("testdata")
	if err != nil {
		t.Fatal(err)
	}
	m := newTestPlugin(t, objects(objs)...)
	for _, tc := range contract.Cases {
		t.Run(tc.Type+" "+tc.Name, func(t *testing.T) {
			req := new(dns.Msg)
			req.SetQuestion(tc.Name, dns.StringToType[tc.Type])
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			if _, err := m.ServeDNS(context.Background(), rec, req); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == nil {
				t.Fatal("no reply written")
			}
			if err := tc.Check(rec.Msg, contract.TTL); err != nil {
				t.Error(err)
			}
		})
	}
	// The SOA on its own: the table leaves its serial out.
	runCases(t, m, []test.Case{{Qname: "clusterset.local.", Qtype: dns.TypeSOA, Answer: []dns.RR{test.SOA(soa)}}})
}

// Answers name the question's owner in the case it was asked.
func TestServeDNSAnswersInTheCaseAsked(t *testing.T) {
	runCases(t, newTestPlugin(t, fixture()...), []test.Case{
		{Qname: "WeB.DeMo.SVC.clusterset.LOCAL.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("WeB.DeMo.SVC.clusterset.LOCAL. 5 IN A 10.42.0.10")}},
		{Qname: "DB-0.East.Prod.db.demo.svc.clusterset.local.", Qtype: dns.TypeA,
			Answer: []dns.RR{test.A("DB-0.East.Prod.db.demo.svc.clusterset.local. 5 IN A 10.2.0.1")}},
	})
}

func runCases(t *testing.T, m *Multicluster, cases []test.Case) {
	t.Helper()
	for _, tc := range cases {
		t.Run(dns.TypeToString[tc.Qtype]+" "+tc.Qname, func(t *testing.T) {
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			if _, err := m.ServeDNS(context.Background(), rec, tc.Msg()); err != nil {
				t.Fatal(err)
			}
			if rec.Msg == nil {
				t.Fatal("no reply written")
			}
			if !rec.Msg.Authoritative {
				t.Error("AA not set")
			}
			for _, sec := range [][]dns.RR{tc.Answer, tc.Ns, tc.Extra} {
				sort.Sort(test.RRSet(sec))
			}
			if err := test.SortAndCheck(rec.Msg, tc); err != nil {
				t.Error(err)
			}
		})
	}
}

func TestServeDNSNotSynced(t *testing.T) {
	m := newTestPlugin(t, fixture()...)
	m.backend.(*cache.Static).Synced = false
	runCases(t, m, []test.Case{
		{Qname: "web.demo.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeServerFailure},
		{Qname: "nothing.demo.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeServerFailure},
	})
	if m.Ready() {
		t.Error("ready before sync")
	}
}

type nextHandler struct{ called bool }

func (n *nextHandler) ServeDNS(_ context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	n.called = true
	m := new(dns.Msg)
	m.SetRcode(r, dns.RcodeRefused)
	w.WriteMsg(m)
	return dns.RcodeRefused, nil
}
func (n *nextHandler) Name() string { return "next" }

func TestFallthrough(t *testing.T) {
	for _, tc := range []struct {
		name     string
		fall     []string
		qname    string
		wantNext bool
	}{
		{"off", nil, "nope.demo.svc.clusterset.local.", false},
		{"nxdomain falls", []string{"clusterset.local."}, "nope.demo.svc.clusterset.local.", true},
		{"other zone only", []string{"other.local."}, "nope.demo.svc.clusterset.local.", false},
		{"nodata does not fall", []string{"clusterset.local."}, "web.demo.svc.clusterset.local.", false},
		{"not our zone", nil, "example.org.", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := newTestPlugin(t, fixture()...)
			next := &nextHandler{}
			m.Next = next
			if tc.fall != nil {
				m.Fall = fall.F{Zones: tc.fall}
			}
			r := new(dns.Msg)
			r.SetQuestion(tc.qname, dns.TypeAAAA)
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			m.ServeDNS(context.Background(), rec, r)
			if next.called != tc.wantNext {
				t.Errorf("next called %v, want %v", next.called, tc.wantNext)
			}
		})
	}
}

// Replies hold copies: a plugin that edits a reply in place (its records'
// names, TTLs or addresses) must not change what the next query gets. A
// headless service's records are precomputed in the snapshot, a ClusterSetIP
// service's are made per query: both are asked.
func TestRepliesDoNotShareRecords(t *testing.T) {
	m := newTestPlugin(t, fixture()...)
	for _, q := range []question{
		{"db.demo.svc.clusterset.local.", dns.TypeA},
		{"_mysql._tcp.db.demo.svc.clusterset.local.", dns.TypeSRV},
		{"_http._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV},
		{"dual.demo.svc.clusterset.local.", dns.TypeAAAA},
	} {
		want := ask(m, q).Copy()
		first := ask(m, q)
		for _, rr := range append(first.Answer, first.Extra...) {
			rr.Header().Name = "changed."
			rr.Header().Ttl = 1
			switch v := rr.(type) {
			case *dns.A:
				v.A[len(v.A)-1]++
			case *dns.AAAA:
				v.AAAA[15]++
			case *dns.SRV:
				v.Target = "changed."
			}
		}
		if got, want := records(ask(m, q)), records(want); got != want {
			t.Errorf("%s: a reply's edit leaked into the next reply:\n%s\nwant\n%s", q, got, want)
		}
	}
}

// records is a reply's answer and additional records, one a line, sorted.
func records(m *dns.Msg) string {
	var lines []string
	for _, rr := range append(slices.Clone(m.Answer), m.Extra...) {
		lines = append(lines, rr.String())
	}
	slices.Sort(lines)
	return strings.Join(lines, "\n")
}

// At the service's own name, one SRV record per target and port number: ports
// that share a number (tcp 42/TCP and udp 42/UDP) give one record there, as an
// RRset holds no duplicates (RFC 2181 §5), and the weight counts the records
// given. Each port name keeps its own records. The glue holds each address once.
func TestServiceSRVOnePerTargetAndPort(t *testing.T) {
	m := newTestPlugin(t, samePortNumbers()...)
	const hello, hl = "hello.mcs.svc.clusterset.local.", "hello-headless.mcs.svc.clusterset.local."
	helloGlue := []dns.RR{test.A(hello + " 5 IN A 10.42.0.42"), test.AAAA(hello + " 5 IN AAAA fd00::42")}
	hlGlue := []dns.RR{
		test.A("hello-0.east." + hl + " 5 IN A 10.6.0.1"),
		test.AAAA("hello-0.east." + hl + " 5 IN AAAA fd00::6:1"),
		test.A("hello-1.east." + hl + " 5 IN A 10.6.0.2"),
		test.A("hello-0.west." + hl + " 5 IN A 10.5.0.1"),
	}
	hlSRV := func(owner string) []dns.RR {
		var rs []dns.RR
		for _, target := range []string{"hello-0.east.", "hello-1.east.", "hello-0.west."} {
			rs = append(rs, test.SRV(owner+" 5 IN SRV 0 33 42 "+target+hl))
		}
		return rs
	}
	runCases(t, m, []test.Case{
		{Qname: hello, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV(hello + " 5 IN SRV 0 100 42 " + hello)}, Extra: helloGlue},
		{Qname: "_tcp._tcp." + hello, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_tcp._tcp." + hello + " 5 IN SRV 0 100 42 " + hello)}, Extra: helloGlue},
		{Qname: "_udp._udp." + hello, Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_udp._udp." + hello + " 5 IN SRV 0 100 42 " + hello)}, Extra: helloGlue},
		nx("_tcp._udp."+hello, dns.TypeSRV),
		{Qname: "Hello.MCS.svc.clusterset.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("Hello.MCS.svc.clusterset.local. 5 IN SRV 0 100 42 " + hello)}, Extra: helloGlue},
		// Two TCP ports of one number and a UDP port: two records of weight 50.
		{Qname: "mixed.mcs.svc.clusterset.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{
				test.SRV("mixed.mcs.svc.clusterset.local. 5 IN SRV 0 50 80 mixed.mcs.svc.clusterset.local."),
				test.SRV("mixed.mcs.svc.clusterset.local. 5 IN SRV 0 50 53 mixed.mcs.svc.clusterset.local."),
			},
			Extra: []dns.RR{test.A("mixed.mcs.svc.clusterset.local. 5 IN A 10.42.0.43")}},
		{Qname: "_web._tcp.mixed.mcs.svc.clusterset.local.", Qtype: dns.TypeSRV,
			Answer: []dns.RR{test.SRV("_web._tcp.mixed.mcs.svc.clusterset.local. 5 IN SRV 0 100 80 mixed.mcs.svc.clusterset.local.")},
			Extra:  []dns.RR{test.A("mixed.mcs.svc.clusterset.local. 5 IN A 10.42.0.43")}},
		// Headless: one record per ready endpoint, N = 3.
		{Qname: hl, Qtype: dns.TypeSRV, Answer: hlSRV(hl), Extra: hlGlue},
		{Qname: "_tcp._tcp." + hl, Qtype: dns.TypeSRV, Answer: hlSRV("_tcp._tcp." + hl), Extra: hlGlue},
		{Qname: "_udp._udp." + hl, Qtype: dns.TypeSRV, Answer: hlSRV("_udp._udp." + hl), Extra: hlGlue},
		{Qname: hl, Qtype: dns.TypeA, Answer: []dns.RR{
			test.A(hl + " 5 IN A 10.5.0.1"), test.A(hl + " 5 IN A 10.6.0.1"), test.A(hl + " 5 IN A 10.6.0.2")}},
	})
}

// A ClusterSetIP answer, glue included, costs one allocation: the reply. The
// reply stays in Go's 768-byte size class, which holds at most 760 bytes of
// an object with pointers (the rest is its malloc header); at 761 every
// query would cost 896.
func TestClusterSetIPAnswerIsOneAllocation(t *testing.T) {
	if s := unsafe.Sizeof(reply{}); s > 760 {
		t.Errorf("reply is %d bytes, want at most 760", s)
	}
	m := newTestPlugin(t, fixture()...)
	for _, q := range []question{
		{"web.demo.svc.clusterset.local.", dns.TypeA},
		{"dual.demo.svc.clusterset.local.", dns.TypeAAAA},
		{"_http._tcp.web.demo.svc.clusterset.local.", dns.TypeSRV},
		{"dual.demo.svc.clusterset.local.", dns.TypeSRV},
	} {
		if rep := ask(m, q); len(rep.Answer) == 0 || (q.qtype == dns.TypeSRV && len(rep.Extra) == 0) {
			t.Fatalf("%s: no answer or no glue: %v", q, rep)
		}
		r := new(dns.Msg)
		r.SetQuestion(q.name, q.qtype)
		ctx, w := context.Background(), &discardWriter{}
		if n := testing.AllocsPerRun(100, func() { m.ServeDNS(ctx, w, r) }); n != 1 {
			t.Errorf("%s: %v allocations, want 1", q, n)
		}
	}
}

// question is a query's name and type.
type question struct {
	name  string
	qtype uint16
}

func (q question) String() string { return q.name + " " + dns.TypeToString[q.qtype] }

// ask puts q to m and returns its reply.
func ask(m *Multicluster, q question) *dns.Msg {
	r := new(dns.Msg)
	r.SetQuestion(q.name, q.qtype)
	rec := dnstest.NewRecorder(&test.ResponseWriter{})
	m.ServeDNS(context.Background(), rec, r)
	return rec.Msg
}
