package cluster

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// resolverCase is a lookup with a resolver of the client pod, and the
// addresses (or, with fails, the failure) testdata/ and the contract give.
type resolverCase struct {
	args  []string
	want  []string // each must be in the output
	fails bool     // the command must fail (name not found)
}

// testResolvers resolves the contract's names as programs in a pod do:
// glibc's getent (hosts: one family; ahosts: A and AAAA asked together) and
// busybox's nslookup, through the pod's resolv.conf.
func testResolvers(t *testing.T) {
	cases := []resolverCase{
		{args: []string{"getent", "hosts", "web.demo.svc.clusterset.local"}, want: []string{"10.42.0.10"}},
		{args: []string{"getent", "ahosts", "dual.demo.svc.clusterset.local"}, want: []string{"10.42.0.20", "fd00:42::20"}},
		{args: []string{"getent", "hosts", "cart.shop.svc.clusterset.local"}, want: []string{"fd00:42::30"}},
		{args: []string{"getent", "ahosts", "db.demo.svc.clusterset.local"}, want: []string{"10.1.0.11", "10.1.0.12", "10.2.0.21", "fd00:2::23"}},
		{args: []string{"getent", "hosts", "db-0.west.db.demo.svc.clusterset.local"}, want: []string{"10.1.0.11"}},
		{args: []string{"getent", "hosts", "db-0.east.prod.db.demo.svc.clusterset.local"}, want: []string{"10.2.0.21"}},
		{args: []string{"getent", "ahosts", "fd00-2--23.east.prod.db.demo.svc.clusterset.local"}, want: []string{"fd00:2::23"}},
		{args: []string{"getent", "hosts", "nosuch.demo.svc.clusterset.local"}, fails: true},
		{args: []string{"getent", "hosts", "idle.demo.svc.clusterset.local"}, fails: true},
		{args: []string{"nslookup", "web.demo.svc.clusterset.local"}, want: []string{"Address: 10.42.0.10"}},
		{args: []string{"nslookup", "dual.demo.svc.clusterset.local"}, want: []string{"Address: 10.42.0.20", "Address: fd00:42::20"}},
		{args: []string{"nslookup", "-type=SRV", "_http._tcp.web.demo.svc.clusterset.local"}, want: []string{"80 web.demo.svc.clusterset.local"}},
		{args: []string{"nslookup", "nosuch.demo.svc.clusterset.local"}, want: []string{"NXDOMAIN"}, fails: true},
	}
	for _, c := range cases {
		out, err := inClient(c.args...)
		t.Logf("$ %s\n%s", strings.Join(c.args, " "), strings.TrimRight(out, "\n"))
		if (err != nil) != c.fails {
			t.Errorf("%s: %v, want it to fail: %v", strings.Join(c.args, " "), err, c.fails)
		}
		for _, w := range c.want {
			if !strings.Contains(out, w) {
				t.Errorf("%s: no %q in its output", strings.Join(c.args, " "), w)
			}
		}
	}
}

// testSearchList checks KEP-1645's rule for short names: web.demo goes
// through the search list, all of it in cluster.local, and never becomes the
// clusterset.local name, with or without a local Service of that name.
func testSearchList(t *testing.T) {
	out, err := inClient("getent", "hosts", "web.demo")
	t.Logf("$ getent hosts web.demo (no Service web in demo)\n%s", out)
	if err == nil || strings.Contains(out, zoneAddress) {
		t.Errorf("web.demo resolved without a local Service: %v\n%s", err, out)
	}
	ctx, cancel := harness.Context(2 * time.Minute)
	defer cancel()
	svc, err := env.Clientset.CoreV1().Services("demo").Create(ctx, &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "demo"},
		Spec:       corev1.ServiceSpec{Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Clientset.CoreV1().Services("demo").Delete(ctx, "web", metav1.DeleteOptions{}) }()
	harness.Eventually(t, time.Minute, func() error {
		out, err := inClient("getent", "hosts", "web.demo")
		if err != nil || !strings.Contains(out, svc.Spec.ClusterIP) {
			return fmt.Errorf("getent hosts web.demo: %v\n%s", err, out)
		}
		t.Logf("$ getent hosts web.demo (Service web in demo: %s)\n%s", svc.Spec.ClusterIP, out)
		return nil
	})
}

// manyEndpoints is more ready endpoints than a 512-byte UDP answer holds.
const manyEndpoints = 100

// testTruncated checks a headless service whose answer does not fit in 512
// bytes: UDP without EDNS says so (TC), dig and glibc then ask over TCP
// and get every ready endpoint.
func testTruncated(t *testing.T) {
	ctx, cancel := harness.Context(2 * time.Minute)
	defer cancel()
	var addrs []string
	for i := range manyEndpoints {
		addrs = append(addrs, fmt.Sprintf("10.77.%d.%d", i/200, 1+i%200))
	}
	objs := fmt.Sprintf(`apiVersion: v1
kind: Namespace
metadata: {name: big}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: many, namespace: big}
spec:
  type: Headless
  ports: [{name: http, protocol: TCP, port: 80}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: many-c1
  namespace: big
  labels:
    multicluster.kubernetes.io/service-name: many
    multicluster.kubernetes.io/source-cluster: c1
addressType: IPv4
ports: [{name: http, protocol: TCP, port: 80}]
endpoints:
- addresses: ["%s"]
`, strings.Join(addrs, `"]
- addresses: ["`))
	if _, err := env.ApplyYAML(ctx, objs); err != nil {
		t.Fatal(err)
	}
	const name = "many.big.svc.clusterset.local."
	slices.Sort(addrs)
	harness.Eventually(t, time.Minute, func() error {
		r, err := dig(name, "A", "+noedns")
		if err != nil {
			return err
		}
		if got := answerAddrs(r.Answer); !slices.Equal(got, addrs) {
			return fmt.Errorf("dig +noedns: %d addresses, want the %d of the slice\n%s", len(got), len(addrs), r)
		}
		return nil
	})
	r, err := dig(name, "A", "+noedns", "+ignore")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("over UDP without EDNS: flags %v, %d records", r.Flags, len(r.Answer))
	if !slices.Contains(r.Flags, "tc") {
		t.Errorf("no TC flag on a UDP answer of %d endpoints:\n%s", manyEndpoints, r)
	}
	out, err := inClient("getent", "ahosts", strings.TrimSuffix(name, "."))
	if err != nil {
		t.Fatalf("getent ahosts: %v\n%s", err, out)
	}
	seen := map[string]bool{}
	for line := range strings.Lines(out) {
		if f := strings.Fields(line); len(f) > 0 {
			seen[f[0]] = true
		}
	}
	if got := slices.Sorted(maps.Keys(seen)); !slices.Equal(got, addrs) {
		t.Errorf("getent ahosts: %d addresses, want the %d of the slice", len(got), len(addrs))
	}
}

// answerAddrs are the addresses of the A and AAAA records of rrs, sorted.
func answerAddrs(rrs []dns.RR) []string {
	var out []string
	for _, rr := range rrs {
		switch rr := rr.(type) {
		case *dns.A:
			out = append(out, rr.A.String())
		case *dns.AAAA:
			out = append(out, netip.MustParseAddr(rr.AAAA.String()).String())
		}
	}
	sort.Strings(out)
	return out
}

// testIdle checks, from kube-apiserver's audit log, that CoreDNS's
// ServiceAccount (the kubernetes plugin and ours, in one process) makes at
// most one request a minute beyond its watches while nothing changes, and
// that CoreDNS logged no denial.
func testIdle(t *testing.T) {
	const user = "system:serviceaccount:kube-system:coredns"
	since := time.Now()
	time.Sleep(harness.QuietWindow) // a window of time is what is measured
	evs, err := env.AuditEvents(user, since)
	if err != nil {
		t.Fatal(err)
	}
	beyond := harness.BeyondWatches(evs)
	t.Logf("idle for %s: %s made %d requests beyond its watches (%s)", harness.QuietWindow, user, len(beyond), harness.AuditSummary(beyond))
	if perMinute := float64(len(beyond)) / harness.QuietWindow.Minutes(); perMinute > 1 {
		t.Errorf("idle, %.2f requests a minute beyond the watches, want at most 1: %s", perMinute, harness.AuditSummary(beyond))
	}
	ctx, cancel := harness.Context(time.Minute)
	defer cancel()
	logs, err := kubectl(ctx, "-n", ns, "logs", "-l", "k8s-app=kube-dns", "--tail=-1")
	if err != nil {
		t.Fatal(err)
	}
	if l := strings.ToLower(logs); strings.Contains(l, "forbidden") || strings.Contains(l, "panic") {
		t.Errorf("CoreDNS ran into a denial or a panic:\n%s", logs)
	}
}
