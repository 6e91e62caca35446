package multicluster

import (
	"testing"

	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/runtime"
)

// The fixture's headless service db: in west db-0 (10.1.0.1) and 10-1-0-2
// (10.1.0.2); in east.prod, a cluster ID with a dot, db-0 (10.2.0.1 and
// fd00::2:1) and db-1 (10.2.0.2); one named port, mysql 3306 (the
// unnamed 9104 has no SRV record).
const (
	dbName  = "db.demo.svc.clusterset.local."
	westDB0 = "db-0.west." + dbName
	west102 = "10-1-0-2.west." + dbName
	eastDB0 = "db-0.east.prod." + dbName
	eastDB1 = "db-1.east.prod." + dbName
)

// TestClusterSelectors: with cluster_selectors, <cluster>.pin._cluster
// answers that cluster's ready endpoints alone (NODATA without them) and
// <cluster>.prefer._cluster those, else the service's own answers, for A,
// AAAA and SRV with glue of the chosen endpoints; the names above them are
// empty non-terminals; without the option every such name is NXDOMAIN.
func TestClusterSelectors(t *testing.T) {
	m := newTestPlugin(t, fixture()...)
	m.clusterSel = true
	const soa = "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 1 7200 1800 86400 5"
	nodata := func(q string, qt uint16) test.Case {
		return test.Case{Qname: q, Qtype: qt, Ns: []dns.RR{test.SOA(soa)}}
	}
	a := func(owner, ip string) dns.RR { return test.A(owner + " 5 IN A " + ip) }
	srv := func(owner, weight, port, target string) dns.RR {
		return test.SRV(owner + " 5 IN SRV 0 " + weight + " " + port + " " + target)
	}
	pinWest := "west.pin._cluster." + dbName
	pinEast := "east.prod.pin._cluster." + dbName
	preferEast := "east.prod.prefer._cluster." + dbName
	preferNorth := "north.prefer._cluster." + dbName
	runCases(t, m, []test.Case{
		{Qname: pinWest, Qtype: dns.TypeA, Answer: []dns.RR{a(pinWest, "10.1.0.1"), a(pinWest, "10.1.0.2")}},
		nodata(pinWest, dns.TypeAAAA), // west has no IPv6 endpoint
		{Qname: pinWest, Qtype: dns.TypeSRV, Answer: []dns.RR{
			srv(pinWest, "50", "3306", westDB0), srv(pinWest, "50", "3306", west102),
		}, Extra: []dns.RR{a(westDB0, "10.1.0.1"), a(west102, "10.1.0.2")}},
		{Qname: pinEast, Qtype: dns.TypeA, Answer: []dns.RR{a(pinEast, "10.2.0.1"), a(pinEast, "10.2.0.2")}},
		{Qname: pinEast, Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA(pinEast + " 5 IN AAAA fd00::2:1")}},
		{Qname: "East.Prod.PIN._cluster.db.demo.svc.clusterset.local.", Qtype: dns.TypeA, Answer: []dns.RR{
			a("East.Prod.PIN._cluster.db.demo.svc.clusterset.local.", "10.2.0.1"),
			a("East.Prod.PIN._cluster.db.demo.svc.clusterset.local.", "10.2.0.2")}},
		nodata("north.pin._cluster."+dbName, dns.TypeA), // a cluster with no ready endpoint
		nodata(pinWest, dns.TypeTXT),
		// prefer: the cluster's, else every ready endpoint the name answers.
		{Qname: preferEast, Qtype: dns.TypeA, Answer: []dns.RR{a(preferEast, "10.2.0.1"), a(preferEast, "10.2.0.2")}},
		{Qname: "west.prefer._cluster." + dbName, Qtype: dns.TypeAAAA, Answer: []dns.RR{
			test.AAAA("west.prefer._cluster." + dbName + " 5 IN AAAA fd00::2:1")}},
		{Qname: preferNorth, Qtype: dns.TypeA, Answer: []dns.RR{
			a(preferNorth, "10.1.0.1"), a(preferNorth, "10.1.0.2"), a(preferNorth, "10.2.0.1"), a(preferNorth, "10.2.0.2")}},
		{Qname: preferEast, Qtype: dns.TypeSRV, Answer: []dns.RR{
			srv(preferEast, "50", "3306", eastDB0), srv(preferEast, "50", "3306", eastDB1),
		}, Extra: []dns.RR{a(eastDB0, "10.2.0.1"), test.AAAA(eastDB0 + " 5 IN AAAA fd00::2:1"), a(eastDB1, "10.2.0.2")}},
		// Empty non-terminals above the selector names.
		nodata("pin._cluster."+dbName, dns.TypeA),
		nodata("prefer._cluster."+dbName, dns.TypeA),
		nodata("_cluster."+dbName, dns.TypeA),
		// Not a selector: NXDOMAIN as before.
		{Qname: "west.pick._cluster." + dbName, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}},
		{Qname: "west.pin._zone." + dbName, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}},
		// A ClusterSetIP service has no selector names.
		{Qname: "west.pin._cluster.web.demo.svc.clusterset.local.", Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}},
	})

	m.clusterSel = false
	runCases(t, m, []test.Case{
		{Qname: pinWest, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}},
		{Qname: "_cluster." + dbName, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}},
	})
}

// An address two endpoints of one cluster share is answered once.
func TestClusterSelectorSharedAddress(t *testing.T) {
	m := newTestPlugin(t,
		headless("demo", "s", port("http", "TCP", 80)),
		slice("demo", "s-west", "s", "west", "IPv4",
			ep{host: "a", addrs: []string{"10.7.0.1"}}, ep{host: "b", addrs: []string{"10.7.0.1"}}))
	m.clusterSel = true
	q := "west.pin._cluster.s.demo.svc.clusterset.local."
	runCases(t, m, []test.Case{{Qname: q, Qtype: dns.TypeA, Answer: []dns.RR{test.A(q + " 5 IN A 10.7.0.1")}}})
}

// TestZonal: with zonal, <zone>.pin._zone and <zone>.prefer._zone choose by
// the endpoints' topology zone (EndpointSlice endpoints[].zone), in any
// cluster: pin that zone's ready endpoints alone, NODATA without them;
// prefer those, else every ready endpoint; a zone written in another case
// matches; an endpoint without a zone, or with one that is not a DNS
// label, is in no zone. Without the option, NXDOMAIN.
func TestZonal(t *testing.T) {
	objs := []runtime.Object{
		headless("demo", "kv", port("client", "TCP", 2379)),
		slice("demo", "kv-west", "kv", "west", "IPv4",
			ep{host: "kv-0", addrs: []string{"10.8.0.1"}, zone: "eu-west-1a"},
			ep{host: "kv-1", addrs: []string{"10.8.0.2"}, zone: "eu-west-1b"},
			ep{host: "kv-2", addrs: []string{"10.8.0.3"}}, // no zone
			ep{host: "kv-3", addrs: []string{"10.8.0.4"}, zone: "eu_west"}),
		slice("demo", "kv-east", "kv", "east.prod", "IPv4",
			ep{host: "kv-0", addrs: []string{"10.9.0.1"}, zone: "EU-West-1A"},
			ep{host: "kv-9", addrs: []string{"10.9.0.9"}, ready: &no, zone: "eu-west-1b"}),
	}
	m := newTestPlugin(t, objs...)
	m.zonal = true
	const kv = "kv.demo.svc.clusterset.local."
	const soa = "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. 1 7200 1800 86400 5"
	a := func(owner, ip string) dns.RR { return test.A(owner + " 5 IN A " + ip) }
	pinA := "eu-west-1a.pin._zone." + kv
	pinB := "eu-west-1b.pin._zone." + kv
	preferC := "eu-west-1c.prefer._zone." + kv
	runCases(t, m, []test.Case{
		// Both clusters' endpoints in the zone, whatever the case it was written in.
		{Qname: pinA, Qtype: dns.TypeA, Answer: []dns.RR{a(pinA, "10.8.0.1"), a(pinA, "10.9.0.1")}},
		{Qname: pinA, Qtype: dns.TypeSRV, Answer: []dns.RR{
			test.SRV(pinA + " 5 IN SRV 0 50 2379 kv-0.east.prod." + kv), test.SRV(pinA + " 5 IN SRV 0 50 2379 kv-0.west." + kv),
		}, Extra: []dns.RR{a("kv-0.east.prod."+kv, "10.9.0.1"), a("kv-0.west."+kv, "10.8.0.1")}},
		// kv-9 of the zone is not ready.
		{Qname: pinB, Qtype: dns.TypeA, Answer: []dns.RR{a(pinB, "10.8.0.2")}},
		{Qname: "eu-west-1c.pin._zone." + kv, Qtype: dns.TypeA, Ns: []dns.RR{test.SOA(soa)}},
		{Qname: pinA, Qtype: dns.TypeAAAA, Ns: []dns.RR{test.SOA(soa)}},
		{Qname: preferC, Qtype: dns.TypeA, Answer: []dns.RR{
			a(preferC, "10.8.0.1"), a(preferC, "10.8.0.2"), a(preferC, "10.8.0.3"), a(preferC, "10.8.0.4"), a(preferC, "10.9.0.1")}},
		{Qname: "pin._zone." + kv, Qtype: dns.TypeA, Ns: []dns.RR{test.SOA(soa)}},
		// cluster_selectors is not on.
		{Qname: "west.pin._cluster." + kv, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}},
	})
	m.zonal = false
	runCases(t, m, []test.Case{{Qname: pinA, Qtype: dns.TypeA, Rcode: dns.RcodeNameError, Ns: []dns.RR{test.SOA(soa)}}})
}
