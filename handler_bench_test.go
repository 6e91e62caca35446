package multicluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/coredns/coredns/plugin/test"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/miekg/dns"
)

// discardWriter drops replies, so the benchmarks measure the plugin alone.
type discardWriter struct{ test.ResponseWriter }

func (discardWriter) WriteMsg(*dns.Msg) error { return nil }

// benchPlugin serves 2,000 ClusterSetIP services and the headless db, 40
// endpoints in each of three clusters; with local, db prefers close
// endpoints and cluster-1 is the local cluster.
func benchPlugin(b *testing.B, local bool) *Multicluster {
	db := headless("bench", "db", port("http", corev1.ProtocolTCP, 80))
	if local {
		preferClose := "PreferClose"
		db.TrafficDistribution = &preferClose
	}
	objs := []runtime.Object{db}
	for i := range 2000 {
		objs = append(objs, clusterSetIP("bench", fmt.Sprintf("svc%d", i), []string{fmt.Sprintf("10.%d.%d.1", i/250, i%250)}, port("http", corev1.ProtocolTCP, 80)))
	}
	for c := range 3 {
		var eps []ep
		for e := range 40 {
			eps = append(eps, ep{host: fmt.Sprintf("db-%d", e), addrs: []string{fmt.Sprintf("10.200.%d.%d", c, e+1)}})
		}
		objs = append(objs, slice("bench", fmt.Sprintf("db-%d", c), "db", fmt.Sprintf("cluster-%d", c), discoveryv1.AddressTypeIPv4, eps...))
	}
	if local {
		return newLocalPlugin(b, "cluster-1", false, objs...)
	}
	return newTestPlugin(b, objs...)
}

func benchQuery(b *testing.B, name string, qtype uint16) {
	benchQueryOf(b, benchPlugin(b, false), name, qtype)
}

func benchQueryOf(b *testing.B, m *Multicluster, name string, qtype uint16) {
	r := new(dns.Msg)
	r.SetQuestion(name, qtype)
	w := &discardWriter{}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		m.ServeDNS(ctx, w, r)
	}
}

func BenchmarkServeDNSClusterSetIPA(b *testing.B) {
	benchQuery(b, "svc1234.bench.svc.clusterset.local.", dns.TypeA)
}

func BenchmarkServeDNSClusterSetIPSRV(b *testing.B) {
	benchQuery(b, "_http._tcp.svc1234.bench.svc.clusterset.local.", dns.TypeSRV)
}

func BenchmarkServeDNSHeadlessA(b *testing.B) {
	benchQuery(b, "db.bench.svc.clusterset.local.", dns.TypeA)
}

func BenchmarkServeDNSHeadlessSRV(b *testing.B) {
	benchQuery(b, "_http._tcp.db.bench.svc.clusterset.local.", dns.TypeSRV)
}

// The local cluster's 40 endpoints of db's 120.
func BenchmarkServeDNSHeadlessLocalA(b *testing.B) {
	benchQueryOf(b, benchPlugin(b, true), "db.bench.svc.clusterset.local.", dns.TypeA)
}

func BenchmarkServeDNSHeadlessLocalSRV(b *testing.B) {
	benchQueryOf(b, benchPlugin(b, true), "_http._tcp.db.bench.svc.clusterset.local.", dns.TypeSRV)
}

func BenchmarkServeDNSNXDOMAIN(b *testing.B) {
	benchQuery(b, "nope.bench.svc.clusterset.local.", dns.TypeA)
}

// One cluster's 40 endpoints of db's 120, by cluster_selectors' pin name:
// beside HeadlessLocalA and HeadlessLocalSRV, which answer as many.
func BenchmarkServeDNSPinClusterA(b *testing.B) {
	m := benchPlugin(b, false)
	m.clusterSel = true
	benchQueryOf(b, m, "cluster-1.pin._cluster.db.bench.svc.clusterset.local.", dns.TypeA)
}

func BenchmarkServeDNSPinClusterSRV(b *testing.B) {
	m := benchPlugin(b, false)
	m.clusterSel = true
	benchQueryOf(b, m, "cluster-1.pin._cluster.db.bench.svc.clusterset.local.", dns.TypeSRV)
}
