package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// dnsCase is one question about the objects of testdata/ and its answer
// under the DNS contract.
type dnsCase struct {
	name, qtype string
	want        want
}

// Names of testdata/'s headless endpoints.
var (
	db0West     = n("db-0.west.db.demo")
	ipWest      = n("10-1-0-12.west.db.demo") // no hostname, ready unset
	db0EastProd = n("db-0.east.prod.db.demo")
	v6EastProd  = n("fd00-2--23.east.prod.db.demo") // IPv6 slice, no hostname
	dbGlue      = []string{a(db0West, "10.1.0.11"), a(ipWest, "10.1.0.12"), a(db0EastProd, "10.2.0.21"), aaaa(v6EastProd, "fd00:2::23")}
	dbTargets   = []string{db0West, ipWest, db0EastProd, v6EastProd}
	webGlue     = []string{a(n("web.demo"), "10.42.0.10")}
	dualGlue    = []string{a(n("dual.demo"), "10.42.0.20"), aaaa(n("dual.demo"), "fd00:42::20")}
	cartGlue    = []string{aaaa(n("cart.shop"), "fd00:42::30")}
)

// dbSRV is the SRV answer at owner for the db ports (name, port), one record
// per ready endpoint and port, weight floor(100 / records).
func dbSRV(owner string, ports map[string]int) []string {
	var out []string
	weight := 100 / (len(dbTargets) * len(ports))
	for _, port := range ports {
		for _, target := range dbTargets {
			out = append(out, srv(owner, weight, port, target))
		}
	}
	return out
}

// contractCases cover the contract's bullets on testdata/.
var contractCases = []dnsCase{
	// The apex, the schema version and names that do not exist.
	{apex, "NS", want{answer: []string{apex + " ns ns.dns." + apex}}},
	{apex, "A", nodata()},
	{apex, "TXT", nodata()},
	{"dns-version." + apex, "TXT", want{answer: []string{"dns-version." + apex + ` txt "1.0.0"`}}},
	{"dns-version." + apex, "A", nodata()},
	{"nosuch." + apex, "A", nxdomain()},
	{"nosuch." + apex, "TXT", nxdomain()},
	// Empty non-terminals down to the services, and names beside them.
	{"svc." + apex, "A", nodata()},
	{"svc." + apex, "SRV", nodata()},
	{n("demo"), "A", nodata()},
	{n("shop"), "AAAA", nodata()},
	{n("nosuch"), "A", nxdomain()},
	{n("web.nosuch"), "A", nxdomain()},
	{n("nosuch.demo"), "A", nxdomain()},
	{n("cart.demo"), "AAAA", nxdomain()}, // cart is in shop only
	{"web.demo.svc.nosuch." + apex, "A", nxdomain()},

	// ClusterSetIP, IPv4 only: named ports http/TCP 80 and dns/UDP 53, and an unnamed TCP 8080.
	{n("web.demo"), "A", want{answer: []string{a(n("web.demo"), "10.42.0.10")}}},
	{n("web.demo"), "AAAA", nodata()},
	{n("web.demo"), "TXT", nodata()},
	{"WeB.DeMo.SVC.clusterset.LOCAL.", "A", want{answer: []string{a(n("web.demo"), "10.42.0.10")}}},
	{n("_http._tcp.web.demo"), "SRV", want{
		answer:     []string{srv(n("_http._tcp.web.demo"), 100, 80, n("web.demo"))},
		additional: webGlue,
	}},
	{n("_dns._udp.web.demo"), "SRV", want{
		answer:     []string{srv(n("_dns._udp.web.demo"), 100, 53, n("web.demo"))},
		additional: webGlue,
	}},
	{"_HTTP._Tcp.Web.Demo.svc.clusterset.local.", "SRV", want{
		answer:     []string{srv(n("_http._tcp.web.demo"), 100, 80, n("web.demo"))},
		additional: webGlue,
	}},
	{n("web.demo"), "SRV", want{
		answer: []string{
			srv(n("web.demo"), 50, 80, n("web.demo")),
			srv(n("web.demo"), 50, 53, n("web.demo")),
		},
		additional: webGlue,
	}},
	{n("_http._tcp.web.demo"), "A", nodata()},
	{n("_http._tcp.web.demo"), "TXT", nodata()},
	{n("_tcp.web.demo"), "SRV", nodata()}, // empty non-terminal above _http._tcp
	{n("_dns._tcp.web.demo"), "SRV", nxdomain()},
	{n("_http._udp.web.demo"), "SRV", nxdomain()},
	{n("_8080._tcp.web.demo"), "SRV", nxdomain()}, // unnamed ports have no SRV name
	{n("_https._tcp.web.demo"), "SRV", nxdomain()},
	{n("west.web.demo"), "A", nxdomain()}, // cluster names are for headless services
	{n("foo.web.demo"), "A", nxdomain()},
	{n("db-0.west.web.demo"), "A", nxdomain()},

	// ClusterSetIP, dual-stack.
	{n("dual.demo"), "A", want{answer: []string{a(n("dual.demo"), "10.42.0.20")}}},
	{n("dual.demo"), "AAAA", want{answer: []string{aaaa(n("dual.demo"), "fd00:42::20")}}},
	{n("_http._tcp.dual.demo"), "SRV", want{
		answer:     []string{srv(n("_http._tcp.dual.demo"), 100, 80, n("dual.demo"))},
		additional: dualGlue,
	}},

	// ClusterSetIP, IPv6 only.
	{n("cart.shop"), "AAAA", want{answer: []string{aaaa(n("cart.shop"), "fd00:42::30")}}},
	{n("cart.shop"), "A", nodata()},
	{n("_grpc._tcp.cart.shop"), "SRV", want{
		answer:     []string{srv(n("_grpc._tcp.cart.shop"), 100, 9090, n("cart.shop"))},
		additional: cartGlue,
	}},

	// Headless: ready endpoints across both clusters; not-ready ones and
	// plain EndpointSlices (10.9.9.9, 10.9.9.8) never appear.
	{n("db.demo"), "A", want{answer: []string{
		a(n("db.demo"), "10.1.0.11"), a(n("db.demo"), "10.1.0.12"), a(n("db.demo"), "10.2.0.21"),
	}}},
	{n("db.demo"), "AAAA", want{answer: []string{aaaa(n("db.demo"), "fd00:2::23")}}},
	{n("db.demo"), "TXT", nodata()},
	{n("_pg._tcp.db.demo"), "SRV", want{
		answer:     dbSRV(n("_pg._tcp.db.demo"), map[string]int{"pg": 5432}),
		additional: dbGlue,
	}},
	{n("_gossip._udp.db.demo"), "SRV", want{
		answer:     dbSRV(n("_gossip._udp.db.demo"), map[string]int{"gossip": 7946}),
		additional: dbGlue,
	}},
	{n("db.demo"), "SRV", want{
		answer:     dbSRV(n("db.demo"), map[string]int{"pg": 5432, "gossip": 7946}),
		additional: dbGlue,
	}},
	{n("_pg._tcp.db.demo"), "A", nodata()},
	{n("_pg._udp.db.demo"), "SRV", nxdomain()},
	{n("_9999._tcp.db.demo"), "SRV", nxdomain()},

	// Headless endpoint names: <hostname or IP>.<cluster>.<svc>.<ns>.
	{db0West, "A", want{answer: []string{a(db0West, "10.1.0.11")}}},
	{db0West, "AAAA", nodata()},
	{db0West, "SRV", nodata()},
	{ipWest, "A", want{answer: []string{a(ipWest, "10.1.0.12")}}},
	{db0EastProd, "A", want{answer: []string{a(db0EastProd, "10.2.0.21")}}},
	{"DB-0.East.Prod.DB.demo.SVC.clusterset.local.", "A", want{answer: []string{a(db0EastProd, "10.2.0.21")}}},
	{v6EastProd, "AAAA", want{answer: []string{aaaa(v6EastProd, "fd00:2::23")}}},
	{v6EastProd, "A", nodata()},
	{n("db-2.west.db.demo"), "A", nxdomain()},               // not ready
	{n("10-1-0-13.west.db.demo"), "A", nxdomain()},          // not ready (and it has a hostname)
	{n("10-2-0-22.east.prod.db.demo"), "A", nxdomain()},     // not ready
	{n("10-1-0-11.west.db.demo"), "A", nxdomain()},          // named by its hostname, db-0
	{n("db-0.north.db.demo"), "A", nxdomain()},              // no such cluster
	{n("db-0.prod.db.demo"), "A", nxdomain()},               // "prod" is no cluster
	{n("db-0.east.db.demo"), "A", nxdomain()},               // nor is "east"
	{n("fd00-2--23.west.db.demo"), "AAAA", nxdomain()},      // endpoint of the other cluster
	{n("leak.west.db.demo"), "A", nxdomain()},               // plain EndpointSlice
	{n("stray.west.db.demo"), "A", nxdomain()},              // slice without the service-name label
	{n("10-9-9-9.west.db.demo"), "A", nxdomain()},           // plain EndpointSlice
	{n("db-0.west.db.demo.extra.db.demo"), "A", nxdomain()}, // nonsense below a service
	// Empty non-terminals: the clusters of a headless service.
	{n("west.db.demo"), "A", nodata()},
	{n("east.prod.db.demo"), "A", nodata()},
	{n("prod.db.demo"), "A", nodata()},
	{n("north.db.demo"), "A", nxdomain()},
	{n("db-0.db.demo"), "A", nxdomain()},
}

// TestContract asks the plugin's CoreDNS, run as its least-privilege
// identity, every question of contractCases.
func TestContract(t *testing.T) {
	c := startPluginDNS(t)
	waitForTestdata(t, c)

	for _, tc := range contractCases {
		t.Run(caseName(tc), func(t *testing.T) {
			expect(t, c, defaultTTL, tc.name, tc.qtype, tc.want)
		})
	}

	t.Run("clusterset.local._SOA", func(t *testing.T) { // on its own: the serial varies
		r := dig(t, c, apex, "SOA")
		if r.Rcode != "NOERROR" || !r.AA() || len(r.Answer) != 1 {
			t.Fatalf("want one SOA record, NOERROR, AA:\n%s", r)
		}
		s, ok := r.Answer[0].(*dns.SOA)
		if !ok {
			t.Fatalf("answer is no SOA:\n%s", r)
		}
		if err := checkSOA(s, defaultTTL); err != nil {
			t.Errorf("%v\n%s", err, r)
		}
		if s.Hdr.Ttl != defaultTTL {
			t.Errorf("SOA TTL %d, want %d\n%s", s.Hdr.Ttl, defaultTTL, r)
		}
	})

	// The same over TCP.
	t.Run("tcp", func(t *testing.T) {
		for _, tc := range []dnsCase{contractCases[0], findCase(t, n("db.demo"), "SRV"), findCase(t, n("nosuch.demo"), "A")} {
			expect(t, c, defaultTTL, tc.name, tc.qtype, tc.want, "+tcp")
		}
	})

	t.Run("no forbidden calls", func(t *testing.T) {
		// The plugin needs no permission beyond deploy/rbac.yaml's.
		if out := strings.ToLower(c.Output()); strings.Contains(out, "forbidden") {
			t.Errorf("CoreDNS ran into RBAC denials:\n%s", c.Output())
		}
	})
}

func caseName(tc dnsCase) string {
	return strings.TrimSuffix(strings.TrimSuffix(tc.name, "."+apex), ".svc") + "_" + tc.qtype
}

func findCase(t testing.TB, name, qtype string) dnsCase {
	for _, tc := range contractCases {
		if tc.name == name && tc.qtype == qtype {
			return tc
		}
	}
	t.Fatalf("no case %s %s", name, qtype)
	return dnsCase{}
}

// waitForTestdata waits until c serves every object of testdata/, so the
// table runs against a synced plugin. It goes on when that never happens:
// the table then says what is wrong.
func waitForTestdata(t testing.TB, c *harness.CoreDNS) {
	t.Helper()
	sentinels := []dnsCase{
		findCase(t, n("web.demo"), "A"),
		findCase(t, n("dual.demo"), "AAAA"),
		findCase(t, n("cart.shop"), "AAAA"),
		findCase(t, n("db.demo"), "A"),
		findCase(t, n("db.demo"), "AAAA"),
	}
	err := harness.Poll(syncWithin, func() error {
		var errs []error
		for _, s := range sentinels {
			r, err := c.Dig(s.name, s.qtype)
			if err != nil {
				return err
			}
			if len(r.Answer) != len(s.want.answer) {
				errs = append(errs, fmt.Errorf("%s %s: %d records, want %d", s.name, s.qtype, len(r.Answer), len(s.want.answer)))
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Errorf("CoreDNS did not serve testdata/ within %v: %v", syncWithin, err)
	}
}
