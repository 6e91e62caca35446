package e2e

import (
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
	"github.com/clustersetdns/multicluster/test/e2e/sandbox"
)

// partitionFor is how long the faults of these tests last: long enough
// that client-go's HTTP/2 health check (30 s idle, 15 s ping) gives up on a
// silent connection in the middle of it.
const partitionFor = 60 * time.Second

// healWithin is how soon after a fault ends a write must answer.
const healWithin = 2 * time.Second

// faultRig is the harness's rig, its CoreDNS under steady lookups of the
// names of a namespace of its own, for a fault to be played under.
type faultRig struct {
	*harness.Rig
	logged int // how much of the CoreDNS output logSince has read
}

// clusterSetIP is a v1beta1 ClusterSetIP ServiceImport of ns with one
// address and the port http.
func clusterSetIP(ns, name, ip string) *unstructured.Unstructured {
	return harness.Import{Namespace: ns, Name: name, Type: "ClusterSetIP", IPs: []string{ip},
		Ports: []corev1.ServicePort{harness.TCP("http", 80)}}.Object("v1beta1")
}

// startFaultRig writes 20 ServiceImports into ns through e, starts CoreDNS
// with opts (its Plugins and Port set here) and a prober of every name.
func startFaultRig(t *testing.T, e *harness.Env, ns, kubeconfig string, opts harness.CoreDNSOptions) *faultRig {
	t.Helper()
	r := &faultRig{Rig: harness.NewRig(t, "fault", e, ns)}
	var objs []*unstructured.Unstructured
	for i := range 20 {
		objs = append(objs, clusterSetIP(ns, fmt.Sprintf("svc%d", i), fmt.Sprintf("10.71.0.%d", i+1)))
	}
	if err := e.ApplyAll(r.Ctx, objs); err != nil {
		t.Fatal(err)
	}
	opts.Plugins = harness.MulticlusterBlock(kubeconfig)
	r.RunCoreDNS(coredns, opts)
	for i := range 20 {
		r.Answers(r.ServiceName(fmt.Sprintf("svc%d", i)), fmt.Sprintf("10.71.0.%d", i+1))
	}
	r.Probe()
	return r
}

// health is what the plugin says of itself: ready's status and the synced
// gauge.
func (r *faultRig) health() string {
	ready := "unreachable"
	if resp, err := http.Get(r.DNS.ReadyURL); err == nil {
		resp.Body.Close()
		ready = strconv.Itoa(resp.StatusCode)
	}
	synced, err := harness.ScrapeValue(r.DNS.MetricsURL, "coredns_multicluster_synced")
	if err != nil {
		return fmt.Sprintf("ready %s, synced: %v", ready, err)
	}
	return fmt.Sprintf("ready %s, synced %g", ready, synced)
}

// during samples health every 200 ms until d has passed, and checks that
// ready stays 200 and synced 1 throughout: the replica answers from what it
// knows, so it stays in its Service. It logs the plugin's log lines with the
// time since start they were first seen at.
func (r *faultRig) during(start time.Time, d time.Duration) {
	r.T.Helper()
	for end := start.Add(d); time.Now().Before(end); time.Sleep(200 * time.Millisecond) {
		if h := r.health(); h != "ready 200, synced 1" {
			r.T.Errorf("%.1fs into the fault: %s, want ready 200, synced 1", time.Since(start).Seconds(), h)
		}
		r.logSince(start)
	}
}

// logSince logs the plugin's log lines not logged yet, with the time since
// start.
func (r *faultRig) logSince(start time.Time) {
	out := r.DNS.Output()
	for line := range strings.Lines(out[r.logged:]) {
		if strings.Contains(line, "plugin/multicluster") {
			r.T.Logf("%5.1fs %s", time.Since(start).Seconds(), strings.TrimSpace(line))
		}
	}
	r.logged = len(out)
}

// answersSince waits until each name answers its IP and returns how long
// after since the last one did.
func (r *faultRig) answersSince(since time.Time, ips map[string]string) time.Duration {
	r.T.Helper()
	for name, ip := range ips {
		r.WaitA(90*time.Second, r.ServiceName(name), ip)
	}
	return time.Since(since)
}

// finish stops the prober, reports and checks its lookups, and checks that
// the log says "cannot reach" and "answers again" outages times each.
func (r *faultRig) finish(what string, healed time.Duration, outages int) {
	r.T.Helper()
	r.Logf("%s; the new imports answered %.2fs after the API server could take them", what, healed.Seconds())
	r.Report()
	if healed > healWithin {
		r.T.Errorf("%s: the new imports answered %v after the API server could take them, want at most %v", what, healed, healWithin)
	}
	out := r.DNS.Output()
	for _, line := range []string{"cannot reach the API server", "the API server answers again"} {
		if n := strings.Count(out, line); n != outages {
			r.T.Errorf("%q logged %d times, want %d\n%s", line, n, outages, harness.Abridge(out, 20, 20))
		}
	}
}

// TestNetworkPartition runs the plugin in a network namespace of its own,
// which reaches the API server only across a veth pair, and drops every
// packet between them, both ways, for 60 seconds under steady lookups: no
// lookup of a known name fails, ready and synced stay up, and ServiceImports
// written during the partition and right after it answer within 2 seconds
// of the heal.
func TestNetworkPartition(t *testing.T) {
	t.Parallel()
	ctx, cancel := harness.Context(5 * time.Minute)
	defer cancel()
	link, err := sandbox.NewNetns(t)
	if err != nil {
		t.Fatal(err)
	}
	u, err := url.Parse(env.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	api, err := link.Forward(t, u.Host)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := clientcmd.LoadFromFile(plugin.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		cl.Server, cl.TLSServerName = "https://"+api, "127.0.0.1" // the serving certificate's name
	}
	kcPath := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, kcPath); err != nil {
		t.Fatal(err)
	}
	const ns = "partition"
	r := startFaultRig(t, env, ns, kcPath, harness.CoreDNSOptions{Netns: link.Path, Host: link.IP})

	_, port, _ := net.SplitHostPort(api)
	p, _ := strconv.Atoi(port)
	r.logged = len(r.DNS.Output())
	if err := link.Drop(p); err != nil {
		t.Fatal(err)
	}
	cut := time.Now()
	time.Sleep(5 * time.Second)
	if _, err := env.Apply(ctx, clusterSetIP(ns, "during", "10.71.1.1")); err != nil {
		t.Fatal(err)
	}
	r.during(cut, partitionFor)
	if err := link.Allow(); err != nil {
		t.Fatal(err)
	}
	healed := time.Now()
	if _, err := env.Apply(ctx, clusterSetIP(ns, "after", "10.71.2.1")); err != nil {
		t.Fatal(err)
	}
	took := r.answersSince(healed, map[string]string{"during": "10.71.1.1", "after": "10.71.2.1"})
	r.logSince(cut)
	// One outage, noticed when client-go's HTTP/2 health check gives up on
	// the silent connection (45 s), and its end.
	r.finish(fmt.Sprintf("partition: %.0fs of dropped packets", healed.Sub(cut).Seconds()), took, 1)
	t.Logf("after the heal: %s", r.health())
}
