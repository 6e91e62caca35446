package multicluster

import (
	"context"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/pkg/fall"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
)

// newLocalPlugin is newTestPlugin with the local cluster, and perhaps
// prefer_local, set.
func newLocalPlugin(t testing.TB, cluster string, preferAll bool, objs ...runtime.Object) *Multicluster {
	t.Helper()
	st, err := cache.Config{Zones: []string{zone}, TTL: defaultTTL, ClusterID: cluster, PreferLocal: preferAll}.Static(objs...)
	if err != nil {
		t.Fatal(err)
	}
	m := &Multicluster{TTL: defaultTTL, Fall: fall.Zero, backend: st}
	m.setZones([]string{zone})
	return m
}

// counterValue is c's value now.
func counterValue(c prometheus.Counter) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		return -1
	}
	return m.GetCounter().GetValue()
}

// closeFixture is fixture's db, which prefers close endpoints, and a copy
// of it, any, which does not; and one with internalTrafficPolicy Local.
func closeFixture() []runtime.Object {
	preferClose, local := "PreferClose", corev1.ServiceInternalTrafficPolicyLocal
	var objs []runtime.Object
	for _, o := range fixture() {
		if si, ok := o.(interface{ GetName() string }); ok && si.GetName() == "db" {
			db := headless("demo", "db", port("mysql", corev1.ProtocolTCP, 3306))
			db.TrafficDistribution = &preferClose
			objs = append(objs, db)
			continue
		}
		objs = append(objs, o)
	}
	itp := headless("demo", "itp", port("mysql", corev1.ProtocolTCP, 3306))
	itp.InternalTrafficPolicy = &local
	return append(objs, itp,
		slice("demo", "itp-west", "itp", "west", discoveryv1.AddressTypeIPv4, ep{host: "a", addrs: []string{"10.7.0.1"}}),
		slice("demo", "itp-east", "itp", "east.prod", discoveryv1.AddressTypeIPv4, ep{host: "a", addrs: []string{"10.8.0.1"}}))
}

// eastSRV is the SRV answer at owner, db's name or port name, with
// east.prod the local cluster: its two endpoints, and their addresses.
func eastSRV(owner string) test.Case {
	target := func(host string) string { return host + ".east.prod.db.demo.svc.clusterset.local." }
	return test.Case{Qname: owner, Qtype: dns.TypeSRV, Answer: []dns.RR{
		test.SRV(owner + " 5 IN SRV 0 50 3306 " + target("db-0")),
		test.SRV(owner + " 5 IN SRV 0 50 3306 " + target("db-1")),
	}, Extra: []dns.RR{
		test.A(target("db-0") + " 5 IN A 10.2.0.1"),
		test.AAAA(target("db-0") + " 5 IN AAAA fd00::2:1"),
		test.A(target("db-1") + " 5 IN A 10.2.0.2"),
	}}
}

// A headless service that prefers close endpoints answers, at its name and
// port names, the local cluster's ready endpoints only; its endpoints' own
// names are unchanged; internalTrafficPolicy Local changes nothing.
func TestServeDNSPrefersLocalCluster(t *testing.T) {
	m := newLocalPlugin(t, "east.prod", false, closeFixture()...)
	local, wide := localAnswers, clustersetAnswers
	local0, wide0 := counterValue(local), counterValue(wide)
	runCases(t, m, []test.Case{
		{Qname: "db.demo.svc.clusterset.local.", Qtype: dns.TypeA, Answer: []dns.RR{
			test.A("db.demo.svc.clusterset.local. 5 IN A 10.2.0.1"), test.A("db.demo.svc.clusterset.local. 5 IN A 10.2.0.2")}},
		{Qname: "db.demo.svc.clusterset.local.", Qtype: dns.TypeAAAA, Answer: []dns.RR{
			test.AAAA("db.demo.svc.clusterset.local. 5 IN AAAA fd00::2:1")}},
		eastSRV("_mysql._tcp.db.demo.svc.clusterset.local."),
		eastSRV("db.demo.svc.clusterset.local."),
		// Another cluster's endpoints keep their own names.
		{Qname: "db-0.west.db.demo.svc.clusterset.local.", Qtype: dns.TypeA, Answer: []dns.RR{
			test.A("db-0.west.db.demo.svc.clusterset.local. 5 IN A 10.1.0.1")}},
		{Qname: "10-1-0-2.west.db.demo.svc.clusterset.local.", Qtype: dns.TypeA, Answer: []dns.RR{
			test.A("10-1-0-2.west.db.demo.svc.clusterset.local. 5 IN A 10.1.0.2")}},
		nodata("db.demo.svc.clusterset.local.", dns.TypeTXT),
		// internalTrafficPolicy Local: every cluster's endpoints.
		{Qname: "itp.demo.svc.clusterset.local.", Qtype: dns.TypeA, Answer: []dns.RR{
			test.A("itp.demo.svc.clusterset.local. 5 IN A 10.7.0.1"), test.A("itp.demo.svc.clusterset.local. 5 IN A 10.8.0.1")}},
	})
	// Four local answers (A, AAAA, two SRV), one clusterset-wide (itp);
	// endpoint names and NODATA are not counted.
	if d := counterValue(local) - local0; d != 4 {
		t.Errorf("local answers counted %v, want 4", d)
	}
	if d := counterValue(wide) - wide0; d != 1 {
		t.Errorf("clusterset answers counted %v, want 1", d)
	}
}

// A local cluster with no ready endpoint of the service: every cluster's.
func TestServeDNSLocalClusterWithoutEndpoints(t *testing.T) {
	for _, cluster := range []string{"north", ""} {
		m := newLocalPlugin(t, cluster, true, closeFixture()...)
		runCases(t, m, []test.Case{
			{Qname: "db.demo.svc.clusterset.local.", Qtype: dns.TypeA, Answer: []dns.RR{
				test.A("db.demo.svc.clusterset.local. 5 IN A 10.1.0.1"), test.A("db.demo.svc.clusterset.local. 5 IN A 10.1.0.2"),
				test.A("db.demo.svc.clusterset.local. 5 IN A 10.2.0.1"), test.A("db.demo.svc.clusterset.local. 5 IN A 10.2.0.2")}},
			nx("idle.demo.svc.clusterset.local.", dns.TypeA),
		})
	}
}

// With a local cluster but no service preferring it, every case of the
// contract answers as without one: the testdata sets no trafficDistribution.
func TestServeDNSContractWithLocalCluster(t *testing.T) {
	objs, err := contract.ReadObjects("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, cluster := range []string{"west", "east", "cluster-a"} {
		m := newLocalPlugin(t, cluster, false, objects(objs)...)
		for _, tc := range contract.Cases {
			req := new(dns.Msg)
			req.SetQuestion(tc.Name, dns.StringToType[tc.Type])
			rec := dnstest.NewRecorder(&test.ResponseWriter{})
			if _, err := m.ServeDNS(context.Background(), rec, req); err != nil {
				t.Fatal(err)
			}
			if err := tc.Check(rec.Msg, contract.TTL); err != nil {
				t.Errorf("cluster %s, %s %s: %v", cluster, tc.Type, tc.Name, err)
			}
		}
	}
}

// With local_zone, a headless service that prefers close endpoints
// (trafficDistribution PreferSameZone here) answers, at its name and port
// names, the local cluster's ready endpoints in the replica's zone, else
// the local cluster's, else every cluster's; each address family, and SRV,
// decided on its own. Endpoints' own names are untouched.
func TestLocalZoneFirst(t *testing.T) {
	sameZone := "PreferSameZone"
	kv := headless("demo", "kv", port("client", corev1.ProtocolTCP, 2379))
	kv.TrafficDistribution = &sameZone
	objs := []runtime.Object{kv,
		slice("demo", "kv-west", "kv", "west", discoveryv1.AddressTypeIPv4,
			ep{host: "a", addrs: []string{"10.1.0.1"}, zone: "zone-a"},
			ep{host: "b", addrs: []string{"10.1.0.2"}, zone: "zone-b"}),
		slice("demo", "kv-west-v6", "kv", "west", discoveryv1.AddressTypeIPv6,
			ep{host: "b", addrs: []string{"fd00::1:2"}, zone: "zone-b"}),
		slice("demo", "kv-east", "kv", "east", discoveryv1.AddressTypeIPv4,
			ep{host: "a", addrs: []string{"10.2.0.1"}, zone: "zone-a"}),
	}
	newZonePlugin := func(localZone string) *Multicluster {
		st, err := cache.Config{Zones: []string{zone}, TTL: defaultTTL, ClusterID: "west", LocalZone: localZone}.Static(objs...)
		if err != nil {
			t.Fatal(err)
		}
		m := &Multicluster{TTL: defaultTTL, Fall: fall.Zero, backend: st}
		m.setZones([]string{zone})
		return m
	}
	const name = "kv.demo.svc.clusterset.local."
	const port = "_client._tcp." + name
	a := func(ip string) dns.RR { return test.A(name + " 5 IN A " + ip) }
	target := func(host string) string { return host + ".west." + name }
	runCases(t, newZonePlugin("zone-a"), []test.Case{
		// west's zone-a endpoint alone: not east's in zone-a, not west's in zone-b.
		{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{a("10.1.0.1")}},
		// No IPv6 endpoint of west in zone-a: west's IPv6 ones.
		{Qname: name, Qtype: dns.TypeAAAA, Answer: []dns.RR{test.AAAA(name + " 5 IN AAAA fd00::1:2")}},
		{Qname: port, Qtype: dns.TypeSRV, Answer: []dns.RR{test.SRV(port + " 5 IN SRV 0 100 2379 " + target("a"))},
			Extra: []dns.RR{test.A(target("a") + " 5 IN A 10.1.0.1")}},
		{Qname: "a.east." + name, Qtype: dns.TypeA, Answer: []dns.RR{test.A("a.east." + name + " 5 IN A 10.2.0.1")}},
	})
	// A zone where west has nothing: west's endpoints, as without a zone.
	runCases(t, newZonePlugin("zone-c"), []test.Case{
		{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{a("10.1.0.1"), a("10.1.0.2")}},
	})
	runCases(t, newZonePlugin(""), []test.Case{
		{Qname: name, Qtype: dns.TypeA, Answer: []dns.RR{a("10.1.0.1"), a("10.1.0.2")}},
	})
}
