package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestSelectors: with cluster_selectors and zonal, from EndpointSlices on
// kube-apiserver, asked with dig: <cluster>.pin._cluster answers that
// cluster's ready endpoints alone, a cluster ID with a dot included, NODATA
// for a cluster with none; prefer falls back to every ready endpoint;
// <zone>.pin._zone chooses by endpoints[].zone across clusters; SRV carries
// the chosen endpoints' glue only; a change of readiness moves the answer;
// the names are in no zone transfer; without the options they are NXDOMAIN.
func TestSelectors(t *testing.T) {
	const ns = "selectors"
	with := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Corefile: func(port int) string {
			return fmt.Sprintf("clusterset.local:%d {\nbind 127.0.0.1\nerrors\nmetadata\n"+
				`log . "META {name} {/multicluster/service} {/multicluster/cluster} {/multicluster/zone} {/multicluster/selection}"`+"\n"+
				"transfer clusterset.local {\n\tto *\n}\n%s}\n", port, harness.MulticlusterBlock(plugin.Kubeconfig, "cluster_selectors", "zonal"))
		},
	})
	without := startPluginDNS(t)
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	writeImport(t, harness.Import{Namespace: ns, Name: "kv", Type: "Headless", Ports: trustPorts})
	west := mcsSlice(ns, "kv-west", "kv", "west", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{
		{addr: "10.160.0.1", hostname: "kv-0"},
		{addr: "10.160.0.2", hostname: "kv-1"},
	})
	west.Endpoints[0].Zone, west.Endpoints[1].Zone = ptr.To("zone-a"), ptr.To("zone-b")
	applyObjects(t, sliceObject(t, west))
	east := mcsSlice(ns, "kv-east", "kv", "east.prod", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{
		{addr: "10.161.0.1", hostname: "kv-0"},
		{addr: "10.161.0.2", hostname: "kv-1", ready: "false"},
	})
	east.Endpoints[0].Zone, east.Endpoints[1].Zone = ptr.To("Zone-A"), ptr.To("zone-c")
	applyObjects(t, sliceObject(t, east))

	svc := n("kv." + ns)
	name := func(sub string) string { return n(sub + ".kv." + ns) }
	for _, c := range []*harness.CoreDNS{with, without} {
		eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.160.0.1"), a(svc, "10.160.0.2"), a(svc, "10.161.0.1")}})
	}
	pinWest, pinEast := name("west.pin._cluster"), name("east.prod.pin._cluster")
	zoneA, preferC := name("zone-a.pin._zone"), name("zone-c.prefer._zone")
	target := func(host string) string { return name(host) }
	for _, tc := range []struct {
		name, qtype string
		w           want
	}{
		{pinWest, "A", want{Answer: []string{a(pinWest, "10.160.0.1"), a(pinWest, "10.160.0.2")}}},
		{pinEast, "A", want{Answer: []string{a(pinEast, "10.161.0.1")}}},
		{pinEast, "SRV", want{Answer: []string{srv(pinEast, 100, 80, target("kv-0.east.prod"))},
			Additional: []string{a(target("kv-0.east.prod"), "10.161.0.1")}}},
		{pinWest, "AAAA", nodata()},
		{name("north.pin._cluster"), "A", nodata()},
		{name("north.prefer._cluster"), "A", want{Answer: []string{
			a(name("north.prefer._cluster"), "10.160.0.1"), a(name("north.prefer._cluster"), "10.160.0.2"), a(name("north.prefer._cluster"), "10.161.0.1")}}},
		// Both clusters' endpoints in zone-a, one written Zone-A.
		{zoneA, "A", want{Answer: []string{a(zoneA, "10.160.0.1"), a(zoneA, "10.161.0.1")}}},
		// zone-c's one endpoint is not ready: prefer falls back.
		{preferC, "A", want{Answer: []string{a(preferC, "10.160.0.1"), a(preferC, "10.160.0.2"), a(preferC, "10.161.0.1")}}},
		{name("pin._cluster"), "A", nodata()},
	} {
		expect(t, with, defaultTTL, tc.name, tc.qtype, tc.w)
	}
	for _, q := range []string{pinWest, zoneA, name("pin._cluster")} {
		expect(t, without, defaultTTL, q, "A", nxdomain())
	}
	// No selector name in the zone's transfer.
	for _, rr := range digAXFR(t, with.Port, apex) {
		if h := rr.Header().Name; h == pinWest || h == zoneA {
			t.Errorf("the zone transfer holds a selector name: %s", rr)
		}
	}

	// metadata: log prints what a selector name chose by, and how (an
	// empty value prints as "-").
	for _, line := range []string{
		"META " + pinEast + " kv east.prod - pin",
		"META " + preferC + " kv - zone-c prefer",
	} {
		harness.Eventually(t, 10*time.Second, func() error {
			if !strings.Contains(with.Output(), line) {
				return fmt.Errorf("no %q in the log:\n%s", line, harness.Abridge(with.Output(), 5, 10))
			}
			return nil
		})
	}

	// east's kv-1 becomes ready: east's pin name gains it, zone-c's prefer
	// name now answers it alone.
	east.Endpoints[1].Conditions.Ready = ptr.To(true)
	applyObjects(t, sliceObject(t, east))
	eventually(t, with, pinEast, "A", want{Answer: []string{a(pinEast, "10.161.0.1"), a(pinEast, "10.161.0.2")}})
	expect(t, with, defaultTTL, preferC, "A", want{Answer: []string{a(preferC, "10.161.0.2")}})
}

// TestLocalZoneFirst: with cluster_id and local_zone, a headless service
// whose ServiceImport says trafficDistribution PreferSameZone answers, at
// its name, the local cluster's (proven) ready endpoints in the replica's
// zone; when that zone has none ready, the local cluster's; endpoints keep
// their own names. A replica in another zone answers the local cluster's.
func TestLocalZoneFirst(t *testing.T) {
	const ns = "local-zone"
	pg := []corev1.ServicePort{harness.TCP("pg", 5432)}
	inA := startTrustDNS(t, "cluster_id east", "local_zone zone-a")
	inC := startTrustDNS(t, "cluster_id east", "local_zone zone-c")
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	createSlice(t, env, serviceSlice(ns, "kv-local", "kv", sliceController, pg, "10.170.1.1", "10.170.1.2"))
	writeImport(t, harness.Import{Namespace: ns, Name: "kv", Type: "Headless", Ports: pg,
		More: map[string]any{"trafficDistribution": "PreferSameZone"}})
	east := mcsSlice(ns, "kv-east", "kv", "east", trustManagedBy, "IPv4", pg, []mcsEndpoint{
		{addr: "10.170.1.1", hostname: "kv-0"},
		{addr: "10.170.1.2", hostname: "kv-1"},
	})
	east.Endpoints[0].Zone, east.Endpoints[1].Zone = ptr.To("zone-a"), ptr.To("zone-b")
	applyObjects(t, sliceObject(t, east))
	west := mcsSlice(ns, "kv-west", "kv", "west", trustManagedBy, "IPv4", pg, []mcsEndpoint{{addr: "10.170.2.1", hostname: "kv-0"}})
	west.Endpoints[0].Zone = ptr.To("zone-a")
	applyObjects(t, sliceObject(t, west))

	kv := n("kv." + ns)
	eventually(t, inA, kv, "A", want{Answer: []string{a(kv, "10.170.1.1")}})
	eventually(t, inC, kv, "A", want{Answer: []string{a(kv, "10.170.1.1"), a(kv, "10.170.1.2")}})
	expect(t, inA, defaultTTL, n("kv-0.west.kv."+ns), "A", want{Answer: []string{a(n("kv-0.west.kv."+ns), "10.170.2.1")}})

	// zone-a's endpoint is no longer ready: the local cluster's others.
	east.Endpoints[0].Conditions.Ready = ptr.To(false)
	applyObjects(t, sliceObject(t, east))
	eventually(t, inA, kv, "A", want{Answer: []string{a(kv, "10.170.1.2")}})
}
