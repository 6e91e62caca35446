package e2e

import (
	"fmt"
	"maps"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/metricname"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestWhyEmpty (issue 43): a headless ServiceImport with no EndpointSlice,
// and one whose status says endpointSliceObjects: Absent, answer NXDOMAIN
// and are each counted once, under their own reason, in
// coredns_multicluster_skipped_objects_total; then slices of two clusters
// are counted by cluster in coredns_multicluster_endpoints{cluster}, and
// coredns_multicluster_cluster_last_change_timestamp_seconds{cluster}
// follows each cluster's changes; a cluster whose slices are gone has
// neither series.
func TestWhyEmpty(t *testing.T) {
	const ns = "why-empty"
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Metrics: true,
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, "namespaces "+ns)})
	before := skipCounts(t, c)

	writeImport(t, harness.Import{Namespace: ns, Name: "lonely", Type: "Headless", Ports: trustPorts})
	writeImport(t, harness.Import{Namespace: ns, Name: "absent", Type: "Headless", Ports: trustPorts})
	// The MCS controller says, in the import's status, that it syncs no
	// EndpointSlice for it (mcs-api v0.5.1's endpointSliceObjects).
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	ri := env.Dynamic.Resource(confImportGVR).Namespace(ns)
	stored, err := ri.Get(ctx, "absent", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stored.Object["status"] = map[string]any{"endpointSliceObjects": "Absent"}
	if _, err := ri.UpdateStatus(ctx, stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing endpointSliceObjects: Absent: %v", err)
	}

	svc := func(name string) string { return n(name + "." + ns) }
	wantSkips := map[skipKey]float64{
		{kindImportV1beta1, cache.ReasonNoEndpointSlices}:     1,
		{kindImportV1beta1, cache.ReasonEndpointSlicesAbsent}: 1,
	}
	harness.Eventually(t, 30*time.Second, func() error {
		after := skipCounts(t, c)
		for k, v := range wantSkips {
			if got := after[k] - before[k]; got != v {
				return fmt.Errorf("%v moved by %v, want %v", k, got, v)
			}
		}
		return nil
	})
	nxdomainAll(t, c, []string{svc("lonely"), svc("absent")}, "A", "SRV")
	// Once, not once per rebuild: the service was rebuilt during the grace
	// of 5 seconds, and reported at its end.
	checkSkipped(t, c, before, wantSkips)
	for _, l := range []string{ns + "/lonely: " + cache.ReasonNoEndpointSlices, ns + "/absent: " + cache.ReasonEndpointSlicesAbsent} {
		if got := strings.Count(c.Output(), l); got != 1 {
			t.Errorf("%d log lines with %q, want 1", got, l)
		}
	}

	// Slices of two clusters for lonely: counted by cluster, each cluster's
	// change timed.
	since := float64(time.Now().UnixNano()) / 1e9
	applyMCSSlice(t, ns, "lonely-west", "lonely", "west", trustManagedBy, "IPv4", trustPorts,
		[]mcsEndpoint{{addr: "10.160.0.1", hostname: "a"}, {addr: "10.160.0.2", hostname: "b"}, {addr: "10.160.0.3", ready: "false"}})
	applyMCSSlice(t, ns, "lonely-east", "lonely", "east.prod", trustManagedBy, "IPv4", trustPorts,
		[]mcsEndpoint{{addr: "10.161.0.1", hostname: "a"}})
	first := waitByCluster(t, c, map[string]float64{"west": 2, "east.prod": 1}, nil, "east.prod", "west")
	for cl, at := range first {
		if now := float64(time.Now().UnixNano()) / 1e9; at < since-1 || at > now {
			t.Errorf("%s{%s=%q} = %f, want between %f and %f", metricname.ClusterLastChange, metricname.Cluster, cl, at, since, now)
		}
	}
	expect(t, c, defaultTTL, svc("lonely"), "A", want2(svc("lonely"), "10.160.0.1", "10.160.0.2", "10.161.0.1"))

	// east.prod's slice changes: its time moves, west's does not (the
	// gauge holds nanoseconds; an API round trip lies between the two).
	// The two gauges are set apart: a rebuild that reads the new slice
	// from the informer's store before its event is handled may publish
	// the new count a moment before the new time, so the time is waited
	// for.
	applyMCSSlice(t, ns, "lonely-east", "lonely", "east.prod", trustManagedBy, "IPv4", trustPorts,
		[]mcsEndpoint{{addr: "10.161.0.1", hostname: "a"}, {addr: "10.161.0.2", hostname: "b"}})
	second := waitByCluster(t, c, map[string]float64{"west": 2, "east.prod": 2}, func(second map[string]float64) error {
		if second["east.prod"] <= first["east.prod"] {
			return fmt.Errorf("last change %v, then %v: want east.prod's later", first, second)
		}
		return nil
	}, "east.prod", "west")
	if second["west"] != first["west"] {
		t.Errorf("last change %v, then %v: want west's the same", first, second)
	}

	// west's slice goes: west has neither series.
	if err := env.Clientset.DiscoveryV1().EndpointSlices(ns).Delete(ctx, "lonely-west", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitByCluster(t, c, map[string]float64{"east.prod": 2}, nil, "east.prod")
	checkSkipped(t, c, before, wantSkips)
}

// endpointsTotal is coredns_multicluster_endpoints summed over its cluster
// label: every ready headless endpoint name answered (0 with no series).
func endpointsTotal(m harness.Metrics) float64 {
	total := 0.0
	for _, s := range m[metricname.Endpoints].GetMetric() {
		total += harness.SeriesValue(s)
	}
	return total
}

// want2 is the A answer of name with addrs.
func want2(name string, addrs ...string) want {
	var w want
	for _, ip := range addrs {
		w.Answer = append(w.Answer, a(name, ip))
	}
	return w
}

// waitByCluster waits until coredns_multicluster_endpoints has exactly the
// series of endpoints, by cluster, and the last-change gauge those of
// changed, and also (unless nil) accepts those; it returns the last-change
// gauge's values.
func waitByCluster(t *testing.T, c *harness.CoreDNS, endpoints map[string]float64, also func(last map[string]float64) error, changed ...string) map[string]float64 {
	t.Helper()
	var last map[string]float64
	harness.Eventually(t, 30*time.Second, func() error {
		m, err := harness.Scrape(c.MetricsURL)
		if err != nil {
			return err
		}
		byCluster := func(name string) map[string]float64 {
			out := map[string]float64{}
			for _, s := range m[name].GetMetric() {
				out[harness.Labels(s)[metricname.Cluster]] = harness.SeriesValue(s)
			}
			return out
		}
		if got := byCluster(metricname.Endpoints); !maps.Equal(got, endpoints) {
			return fmt.Errorf("%s by cluster: %v, want %v", metricname.Endpoints, got, endpoints)
		}
		sum := 0.0
		for _, v := range endpoints {
			sum += v
		}
		if total := endpointsTotal(m); total != sum {
			return fmt.Errorf("%s in all: %v, want %v", metricname.Endpoints, total, sum)
		}
		last = byCluster(metricname.ClusterLastChange)
		if len(last) != len(changed) {
			return fmt.Errorf("%s by cluster: %v, want clusters %v", metricname.ClusterLastChange, last, changed)
		}
		for _, cl := range changed {
			if _, ok := last[cl]; !ok {
				return fmt.Errorf("%s by cluster: %v, want clusters %v", metricname.ClusterLastChange, last, changed)
			}
		}
		if also != nil {
			return also(last)
		}
		return nil
	})
	return last
}
