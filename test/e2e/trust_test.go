package e2e

import (
	"fmt"
	"io"
	"math"
	"net/http"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/metricname"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// Trust no peer (issue 40): objects a hostile or careless member cluster
// could have an MCS controller write, on the real kube-apiserver, in
// namespaces of these tests' own. Each test starts its CoreDNS before it
// writes anything, reads coredns_multicluster_skipped_objects_total then,
// and checks by how much every series moved: these tests do not run in
// parallel, so only their own writes move them.

// The kinds and reasons of the skipped counter that issue 40 names.
const (
	kindImportV1beta1 = "ServiceImport v1beta1" // the version the import was read through
	kindSlice         = "EndpointSlice"
)

// trustPorts are the ports of every service of these tests but the local one.
var trustPorts = []corev1.ServicePort{harness.TCP("http", 80)}

// trustManagedBy is the MCS controller that writes the multi-cluster
// EndpointSlices of these tests.
const trustManagedBy = "mcs-controller.example.com"

// startTrustDNS runs CoreDNS with the multicluster plugin (the plugin's
// least-privilege identity, options), the prometheus plugin, and zone
// transfers of clusterset.local allowed.
func startTrustDNS(t testing.TB, options ...string) *harness.CoreDNS {
	t.Helper()
	return harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Metrics: true,
		Plugins: "transfer clusterset.local {\n\tto *\n}\n" + harness.MulticlusterBlock(plugin.Kubeconfig, options...),
	})
}

// skipKey is one series of coredns_multicluster_skipped_objects_total.
type skipKey struct{ kind, reason string }

// skipCounts reads every series of coredns_multicluster_skipped_objects_total.
func skipCounts(t testing.TB, c *harness.CoreDNS) map[skipKey]float64 {
	t.Helper()
	m, err := harness.Scrape(c.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	out := map[skipKey]float64{}
	for _, s := range m[metricname.SkippedObjects].GetMetric() {
		l := harness.Labels(s)
		out[skipKey{l[metricname.Kind], l[metricname.Reason]}] = harness.SeriesValue(s)
	}
	return out
}

// checkSkipped checks that since before every series of the skipped counter
// moved by exactly what want says (0 for a series want does not name), and
// that each series want names is exported.
func checkSkipped(t testing.TB, c *harness.CoreDNS, before, want map[skipKey]float64) {
	t.Helper()
	after := skipCounts(t, c)
	keys := map[skipKey]bool{}
	for k := range after {
		keys[k] = true
	}
	for k := range want {
		if _, ok := after[k]; !ok {
			t.Errorf("%s{kind=%q,reason=%q} is not exported", metricname.SkippedObjects, k.kind, k.reason)
		}
		keys[k] = true
	}
	sorted := make([]skipKey, 0, len(keys))
	for k := range keys {
		sorted = append(sorted, k)
	}
	slices.SortFunc(sorted, func(x, y skipKey) int { return strings.Compare(x.kind+" "+x.reason, y.kind+" "+y.reason) })
	for _, k := range sorted {
		if got := after[k] - before[k]; got != want[k] {
			t.Errorf("%s{kind=%q,reason=%q} moved by %v, want %v", metricname.SkippedObjects, k.kind, k.reason, got, want[k])
		}
	}
}

// nxdomainAll checks that each name is NXDOMAIN for each type.
func nxdomainAll(t testing.TB, c *harness.CoreDNS, names []string, qtypes ...string) {
	t.Helper()
	for _, name := range names {
		for _, qtype := range qtypes {
			expect(t, c, defaultTTL, name, qtype, nxdomain())
		}
	}
}

// transferred is every record of the zone clusterset.local, as a zone
// transfer gives them.
func transferred(t *testing.T, c *harness.CoreDNS) []dns.RR {
	t.Helper()
	rrs := digAXFR(t, c.Port, apex)
	if len(rrs) < 3 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("AXFR does not start and end with the SOA: %v", rrs)
	}
	return rrs
}

// checkTransfer checks that a transfer holds every record of must, and no
// record that is at or targets a name ending in one of badNames, or holds an
// address of badAddrs (but at ns.dns.<zone>, the server's own).
func checkTransfer(t *testing.T, rrs []dns.RR, must, badNames, badAddrs []string) {
	t.Helper()
	have := map[string]bool{}
	for _, rr := range rrs {
		have[contract.Brief(rr)] = true
		names := []string{rr.Header().Name}
		var addr string
		switch rr := rr.(type) {
		case *dns.A:
			addr = rr.A.String()
		case *dns.AAAA:
			addr = rr.AAAA.String()
		case *dns.SRV:
			names = append(names, rr.Target)
		case *dns.PTR:
			names = append(names, rr.Ptr)
		}
		for _, name := range names {
			for _, bad := range badNames {
				if strings.HasSuffix(strings.ToLower(name), "."+bad) || strings.EqualFold(name, bad) {
					t.Errorf("AXFR holds a record of %s: %s", bad, rr)
				}
			}
		}
		if strings.HasPrefix(strings.ToLower(rr.Header().Name), "ns.dns.") {
			continue // the server's own address, for the apex NS: no peer's
		}
		if addr != "" && slices.ContainsFunc(badAddrs, func(b string) bool { return netip.MustParseAddr(b) == netip.MustParseAddr(addr) }) {
			t.Errorf("AXFR holds a refused address: %s", rr)
		}
	}
	for _, w := range must {
		if !have[strings.ToLower(w)] {
			t.Errorf("AXFR lacks %q", w)
		}
	}
}

// ensureNamespace creates a namespace unless it exists; kube-apiserver
// creates kube-system, kube-public and kube-node-lease itself, which must
// not be replaced.
func ensureNamespace(t testing.TB, name string) {
	t.Helper()
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	_, err := env.Clientset.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

// createSlice creates es as the admin on env's control plane and deletes it
// when the test ends.
func createSlice(t testing.TB, e *harness.Env, es *discoveryv1.EndpointSlice) {
	t.Helper()
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	slicesOf := e.Clientset.DiscoveryV1().EndpointSlices(es.Namespace)
	if _, err := slicesOf.Create(ctx, es, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating EndpointSlice %s/%s: %v", es.Namespace, es.Name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := harness.Context(30 * time.Second)
		defer cancel()
		if err := slicesOf.Delete(ctx, es.Name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})
}

// TestTrustSpecialAddresses: addresses no Service can have (unspecified,
// loopback, link-local, multicast, broadcast, in IPv4, IPv6 and
// IPv4-mapped IPv6 form) and the operator's deny_ranges, in a ServiceImport's
// spec.ips and in EndpointSlices' endpoints, never answer: not in A, AAAA,
// SRV or its additional section, not as endpoint names, not in a zone
// transfer, not as PTR; a ClusterSetIP import answers its first usable
// address of a family; every other name keeps answering; each address left
// out is counted once under its own reason.
func TestTrustSpecialAddresses(t *testing.T) {
	const ns = "trust-addr"
	// Reverse zones holding every address below, one per first label, so
	// that each zone's transfer is small.
	reverseZones := []string{"0.in-addr.arpa", "10.in-addr.arpa", "127.in-addr.arpa", "169.in-addr.arpa", "192.in-addr.arpa",
		"224.in-addr.arpa", "239.in-addr.arpa", "255.in-addr.arpa", "0.ip6.arpa", "f.ip6.arpa"}
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Zones:   append([]string{"clusterset.local"}, reverseZones...),
		Metrics: true,
		Plugins: "transfer clusterset.local " + strings.Join(reverseZones, " ") + " {\n\tto *\n}\n" +
			harness.MulticlusterBlock(plugin.Kubeconfig, "deny_ranges 10.149.0.0/16 192.0.2.7 fd00:149::/64"),
	})
	before := skipCounts(t, c)
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")

	// ClusterSetIP imports, as a hostile peer's data would be copied: at
	// most two entries in ips (the v1beta1 schema's maxItems).
	imports := []struct {
		name string
		ips  []string
	}{
		{"meta", []string{"169.254.169.254", "10.140.1.2"}}, // the cloud metadata endpoint first
		{"loop", []string{"127.0.0.1", "::1"}},
		{"zero", []string{"0.0.0.0", "::"}},
		{"thisnet", []string{"0.1.2.3", "fe80::1"}},
		{"mcast", []string{"224.0.0.251", "ff02::fb"}},
		{"bcast", []string{"255.255.255.255", "fd00:140::1:6"}},
		{"mapped", []string{"::ffff:127.0.0.1", "fd00:140::1:7"}},
		{"denied", []string{"10.149.0.5", "10.140.1.8"}},
		{"denied6", []string{"192.0.2.7", "fd00:149::8"}},
	}
	for _, im := range imports {
		writeImport(t, harness.Import{Namespace: ns, Name: im.name, Type: "ClusterSetIP", IPs: im.ips, Ports: trustPorts})
	}
	writeImport(t, harness.Import{Namespace: ns, Name: "hl", Type: "Headless", Ports: trustPorts})
	// Written last: once it answers, every import before it has been read.
	writeImport(t, harness.Import{Namespace: ns, Name: "good", Type: "ClusterSetIP", IPs: []string{"10.140.1.9", "fd00:140::1:9"}, Ports: trustPorts})

	// EndpointSlices: kube-apiserver refuses loopback, link-local and
	// unspecified endpoint addresses, and link-local multicast, but takes
	// these.
	v4 := mcsSlice(ns, "hl-west-v4", "hl", "west", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{
		{addr: "10.140.2.1", hostname: "ok-0"},
		{addr: "239.1.1.1", hostname: "mc-0"},
		{addr: "255.255.255.255", hostname: "bc-0"},
		{addr: "10.149.0.7", hostname: "denied-0"},
		{addr: "239.3.3.3"}, // named 239-3-3-3 if it were answered
	})
	// One endpoint with a usable address and a multicast one: the usable one answers.
	v4.Endpoints = append(v4.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.140.2.2", "239.2.2.2"}, Hostname: ptr.To("mixed-0")})
	applyObjects(t, sliceObject(t, v4))
	applyMCSSlice(t, ns, "hl-west-v6", "hl", "west", trustManagedBy, "IPv6", trustPorts, []mcsEndpoint{
		{addr: "fd00:140::2:1", hostname: "ok-0"},
		{addr: "ff05::1", hostname: "mc6-0"},
		{addr: "fd00:149::7", hostname: "denied6-0"},
	})

	svc := func(name string) string { return n(name + "." + ns) }
	hl, ok0, mixed0 := svc("hl"), n("ok-0.west.hl."+ns), n("mixed-0.west.hl."+ns)
	// Each slice has been read once its usable endpoint answers.
	eventually(t, c, svc("good"), "A", want{Answer: []string{a(svc("good"), "10.140.1.9")}})
	eventually(t, c, ok0, "A", want{Answer: []string{a(ok0, "10.140.2.1")}})
	eventually(t, c, ok0, "AAAA", want{Answer: []string{aaaa(ok0, "fd00:140::2:1")}})
	expect(t, c, defaultTTL, hl, "A", want{Answer: []string{a(hl, "10.140.2.1"), a(hl, "10.140.2.2")}})
	expect(t, c, defaultTTL, hl, "AAAA", want{Answer: []string{aaaa(hl, "fd00:140::2:1")}})

	// ClusterSetIP: the first usable address of each family, or no name.
	for _, tc := range []struct {
		name, qtype string
		want        want
	}{
		{svc("meta"), "A", want{Answer: []string{a(svc("meta"), "10.140.1.2")}}},
		{svc("meta"), "AAAA", nodata()},
		{svc("bcast"), "A", nodata()},
		{svc("bcast"), "AAAA", want{Answer: []string{aaaa(svc("bcast"), "fd00:140::1:6")}}},
		{svc("mapped"), "A", nodata()}, // never the A record 127.0.0.1
		{svc("mapped"), "AAAA", want{Answer: []string{aaaa(svc("mapped"), "fd00:140::1:7")}}},
		{svc("denied"), "A", want{Answer: []string{a(svc("denied"), "10.140.1.8")}}},
		{svc("meta"), "SRV", want{Answer: []string{srv(svc("meta"), 100, 80, svc("meta"))},
			Additional: []string{a(svc("meta"), "10.140.1.2")}}},
		{n("_http._tcp.meta." + ns), "SRV", want{Answer: []string{srv(n("_http._tcp.meta."+ns), 100, 80, svc("meta"))},
			Additional: []string{a(svc("meta"), "10.140.1.2")}}},
		{svc("good"), "AAAA", want{Answer: []string{aaaa(svc("good"), "fd00:140::1:9")}}},
		{n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}}},
	} {
		expect(t, c, defaultTTL, tc.name, tc.qtype, tc.want)
	}
	nxdomainAll(t, c, []string{svc("loop"), svc("zero"), svc("thisnet"), svc("mcast"), svc("denied6")}, "A", "AAAA", "SRV")

	// Headless: the endpoints' usable addresses only, and no name for an
	// endpoint that has none.
	glue := []string{a(ok0, "10.140.2.1"), aaaa(ok0, "fd00:140::2:1"), a(mixed0, "10.140.2.2")}
	for _, owner := range []string{hl, n("_http._tcp.hl." + ns)} {
		expect(t, c, defaultTTL, owner, "SRV", want{Answer: []string{srv(owner, 50, 80, ok0), srv(owner, 50, 80, mixed0)}, Additional: glue})
	}
	expect(t, c, defaultTTL, mixed0, "A", want{Answer: []string{a(mixed0, "10.140.2.2")}})
	expect(t, c, defaultTTL, mixed0, "AAAA", nodata())
	dropped := []string{"mc-0", "bc-0", "denied-0", "239-3-3-3", "mc6-0", "denied6-0"}
	var droppedNames []string
	for _, h := range dropped {
		droppedNames = append(droppedNames, n(h+".west.hl."+ns))
	}
	nxdomainAll(t, c, droppedNames, "A", "AAAA")

	// Counted once per object write and reason, however many of its
	// addresses have it (README): unspecified in zero (0.0.0.0, ::) and
	// thisnet (0.1.2.3); loopback in loop (127.0.0.1, ::1) and mapped
	// (::ffff:127.0.0.1); link-local in meta and thisnet; multicast in mcast
	// (224.0.0.251, ff02::fb); broadcast in bcast; denied in denied and
	// denied6 (192.0.2.7, fd00:149::8); and the five imports left without a
	// usable address have no IPs (docs/operations.md). In the slices:
	// multicast in each (239.1.1.1, 239.2.2.2, 239.3.3.3; ff05::1),
	// broadcast in the IPv4 one, denied in each.
	checkSkipped(t, c, before, map[skipKey]float64{
		{kindImportV1beta1, "unspecified_address"}: 2,
		{kindImportV1beta1, "loopback_address"}:    2,
		{kindImportV1beta1, "link_local_address"}:  2,
		{kindImportV1beta1, "multicast_address"}:   1,
		{kindImportV1beta1, "broadcast_address"}:   1,
		{kindImportV1beta1, "denied_address"}:      2,
		{kindImportV1beta1, "no_ips"}:              5,
		{kindSlice, "multicast_address"}:           2,
		{kindSlice, "broadcast_address"}:           1,
		{kindSlice, "denied_address"}:              2,
	})
	for _, line := range []string{ns + "/meta: link_local_address", ns + "/mapped: loopback_address", ns + "/hl-west-v4: broadcast_address"} {
		if got := strings.Count(c.Output(), line); got != 1 {
			t.Errorf("%d log lines with %q, want 1", got, line)
		}
	}

	// Refused addresses of imports and slices alike.
	refused := []string{"169.254.169.254", "127.0.0.1", "::1", "0.0.0.0", "::", "0.1.2.3", "fe80::1", "224.0.0.251",
		"ff02::fb", "255.255.255.255", "10.149.0.5", "192.0.2.7", "fd00:149::8",
		"239.1.1.1", "239.2.2.2", "239.3.3.3", "ff05::1", "10.149.0.7", "fd00:149::7"}

	// Zone transfer: the usable records, none of what was refused.
	badNames := []string{"loop." + ns + ".svc." + apex, "zero." + ns + ".svc." + apex, "thisnet." + ns + ".svc." + apex,
		"mcast." + ns + ".svc." + apex, "denied6." + ns + ".svc." + apex}
	for _, h := range droppedNames {
		badNames = append(badNames, strings.ToLower(h))
	}
	checkTransfer(t, transferred(t, c), []string{
		a(svc("meta"), "10.140.1.2"), aaaa(svc("mapped"), "fd00:140::1:7"), a(svc("denied"), "10.140.1.8"),
		a(hl, "10.140.2.1"), a(hl, "10.140.2.2"), aaaa(hl, "fd00:140::2:1"), a(mixed0, "10.140.2.2"),
		srv(hl, 50, 80, ok0), a(n("web.demo"), "10.42.0.10"),
	}, badNames, refused)

	// PTR: the usable ClusterSetIPs point at their services; the refused
	// ones are not in the reverse zones at all.
	usable := map[string]string{"10.140.1.2": svc("meta"), "fd00:140::1:7": svc("mapped"), "10.140.1.8": svc("denied"), "fd00:140::1:6": svc("bcast")}
	for ip, name := range usable {
		rev, err := dns.ReverseAddr(ip)
		if err != nil {
			t.Fatal(err)
		}
		r := dig(t, c, rev, "PTR")
		if err := (want{Answer: []string{rev + " ptr " + name}}).CheckAnswer(r.Msg()); err != nil || !r.AA() {
			t.Errorf("PTR %s: %v\n%s", ip, err, r)
		}
	}
	for _, ip := range refused {
		rev, err := dns.ReverseAddr(ip)
		if err != nil {
			t.Fatal(err)
		}
		if r := dig(t, c, rev, "PTR"); r.Rcode != "NXDOMAIN" || len(r.Answer) != 0 || !r.AA() {
			t.Errorf("PTR %s: want an authoritative NXDOMAIN\n%s", ip, r)
		}
	}
	// The reverse zones' transfers: PTR records for the usable addresses
	// alone.
	var ptrs []string
	for _, zone := range reverseZones {
		for _, rr := range digAXFR(t, c.Port, zone+".") {
			if p, ok := rr.(*dns.PTR); ok {
				ptrs = append(ptrs, contract.Brief(p))
			}
		}
	}
	for _, ip := range refused {
		r, _ := dns.ReverseAddr(ip)
		if i := slices.IndexFunc(ptrs, func(p string) bool { return strings.HasPrefix(p, r+" ") }); i >= 0 {
			t.Errorf("a reverse zone's transfer holds a PTR for %s: %s", ip, ptrs[i])
		}
	}
	for ip, name := range usable {
		if r, _ := dns.ReverseAddr(ip); !slices.Contains(ptrs, r+" ptr "+name) {
			t.Errorf("the reverse zones' transfers lack %q: %q", r+" ptr "+name, ptrs)
		}
	}
}

// TestTrustProtectedNamespaces: imports in kube-system, kube-public,
// kube-node-lease and namespaces matching kube-* or openshift-* never answer
// (NXDOMAIN, and nothing of them in a zone transfer), each counted once per
// write as protected_namespace; a namespace that only looks alike (kubetrust)
// answers. allow_namespaces lets the named ones in, and only those; the
// namespaces option stays a filter that lets nothing protected in.
func TestTrustProtectedNamespaces(t *testing.T) {
	plain := startTrustDNS(t)
	allowed := startTrustDNS(t, "allow_namespaces kube-system openshift-*")
	filtered := startTrustDNS(t, "namespaces kube-system trust-prot")
	before := map[*harness.CoreDNS]map[skipKey]float64{}
	for _, c := range []*harness.CoreDNS{plain, allowed, filtered} {
		before[c] = skipCounts(t, c)
	}

	for _, ns := range []string{"kube-system", "kube-public", "kube-node-lease", "kube-trust", "openshift-trust", "kubetrust", "trust-prot"} {
		ensureNamespace(t, ns)
	}
	evil := []struct{ ns, name, ip string }{
		{"kube-system", "trust-evil", "10.152.0.1"},
		{"kube-public", "trust-evil", "10.152.0.2"},
		{"kube-node-lease", "trust-evil", "10.152.0.3"},
		{"kube-trust", "trust-evil", "10.152.0.4"},
		{"openshift-trust", "trust-evil", "10.152.0.6"},
	}
	for _, e := range evil {
		writeImport(t, harness.Import{Namespace: e.ns, Name: e.name, Type: "ClusterSetIP", IPs: []string{e.ip}, Ports: trustPorts})
	}
	writeImport(t, harness.Import{Namespace: "kube-trust", Name: "trust-evil-hl", Type: "Headless", Ports: trustPorts})
	applyMCSSlice(t, "kube-trust", "trust-evil-hl-west", "trust-evil-hl", "west", trustManagedBy, "IPv4", trustPorts,
		[]mcsEndpoint{{addr: "10.152.0.5", hostname: "h-0"}})
	writeImport(t, harness.Import{Namespace: "kubetrust", Name: "fine", Type: "ClusterSetIP", IPs: []string{"10.152.0.7"}, Ports: trustPorts})
	// Written last: once it answers, every import before it has been read.
	writeImport(t, harness.Import{Namespace: "trust-prot", Name: "fine", Type: "ClusterSetIP", IPs: []string{"10.152.0.8"}, Ports: trustPorts})

	name := func(e struct{ ns, name, ip string }) string { return n(e.name + "." + e.ns) }
	fineProt, fineLookalike := n("fine.trust-prot"), n("fine.kubetrust")
	hl, hlHost := n("trust-evil-hl.kube-trust"), n("h-0.west.trust-evil-hl.kube-trust")
	for _, c := range []*harness.CoreDNS{plain, allowed, filtered} {
		eventually(t, c, fineProt, "A", want{Answer: []string{a(fineProt, "10.152.0.8")}})
	}

	// No options: nothing protected answers; the look-alike does.
	for _, e := range evil {
		nxdomainAll(t, plain, []string{name(e)}, "A", "SRV")
	}
	nxdomainAll(t, plain, []string{hl, hlHost, n("_http._tcp.trust-evil-hl.kube-trust")}, "A", "SRV")
	expect(t, plain, defaultTTL, fineLookalike, "A", want{Answer: []string{a(fineLookalike, "10.152.0.7")}})
	expect(t, plain, defaultTTL, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	var badNames, badAddrs []string
	for _, e := range evil {
		badNames = append(badNames, e.ns+".svc."+apex)
		badAddrs = append(badAddrs, e.ip)
	}
	checkTransfer(t, transferred(t, plain), []string{a(fineLookalike, "10.152.0.7"), a(fineProt, "10.152.0.8")},
		append(badNames, "kube-trust.svc."+apex), append(badAddrs, "10.152.0.5"))
	// Five ClusterSetIP imports and one headless one, each written once.
	checkSkipped(t, plain, before[plain], map[skipKey]float64{{kindImportV1beta1, "protected_namespace"}: 6})

	// allow_namespaces kube-system openshift-*: those two answer, the
	// other protected ones do not.
	for _, e := range evil {
		w := nxdomain()
		if e.ns == "kube-system" || e.ns == "openshift-trust" {
			w = want{Answer: []string{a(name(e), e.ip)}}
		}
		expect(t, allowed, defaultTTL, name(e), "A", w)
	}
	nxdomainAll(t, allowed, []string{hl, hlHost}, "A")
	checkSkipped(t, allowed, before[allowed], map[skipKey]float64{{kindImportV1beta1, "protected_namespace"}: 4})

	// namespaces kube-system trust-prot: a filter, which lets kube-system's
	// import in no more than without it; said at start-up.
	expect(t, filtered, defaultTTL, name(evil[0]), "A", nxdomain())
	expect(t, filtered, defaultTTL, fineLookalike, "A", nxdomain())
	expect(t, filtered, defaultTTL, n("web.demo"), "A", nxdomain())
	checkSkipped(t, filtered, before[filtered], map[skipKey]float64{{kindImportV1beta1, "protected_namespace"}: 1})
	if !strings.Contains(filtered.Output(), "namespaces names kube-system, a protected namespace") {
		t.Errorf("no warning that the namespaces option names a protected namespace:\n%s", harness.Abridge(filtered.Output(), 20, 20))
	}
}

// TestTrustListedClusters: a headless import that lists its clusters
// (status.clusters in v1beta1, clusters at the root in v1alpha2) answers
// the EndpointSlices of those source clusters only: another cluster's
// endpoints have no name and are in no A, SRV or transfer, and each such
// slice is counted once as unlisted_cluster. An import that lists no
// clusters takes every cluster's, as before.
func TestTrustListedClusters(t *testing.T) {
	t.Run("v1beta1 status.clusters", func(t *testing.T) {
		const ns = "trust-clusters"
		c := startTrustDNS(t)
		before := skipCounts(t, c)
		apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
		writeImport(t, harness.Import{Namespace: ns, Name: "listed", Type: "Headless", Ports: trustPorts, Clusters: []string{"east", "west"}})
		writeImport(t, harness.Import{Namespace: ns, Name: "open", Type: "Headless", Ports: trustPorts})
		applyMCSSlice(t, ns, "listed-rogue", "listed", "rogue", trustManagedBy, "IPv4", trustPorts,
			[]mcsEndpoint{{addr: "10.153.9.9", hostname: "r-0"}, {addr: "10.153.9.8"}})
		applyMCSSlice(t, ns, "listed-east", "listed", "east", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{{addr: "10.153.1.1", hostname: "a-0"}})
		applyMCSSlice(t, ns, "listed-west", "listed", "west", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{{addr: "10.153.2.1", hostname: "b-0"}})
		applyMCSSlice(t, ns, "open-east", "open", "east", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{{addr: "10.153.3.1", hostname: "o-0"}})
		applyMCSSlice(t, ns, "open-rogue", "open", "rogue", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{{addr: "10.153.3.9", hostname: "o-9"}})

		listed, open := n("listed."+ns), n("open."+ns)
		a0, b0 := n("a-0.east.listed."+ns), n("b-0.west.listed."+ns)
		// Until the import's clusters are read it takes every cluster's:
		// this answer says they are.
		eventually(t, c, listed, "A", want{Answer: []string{a(listed, "10.153.1.1"), a(listed, "10.153.2.1")}})
		eventually(t, c, open, "A", want{Answer: []string{a(open, "10.153.3.1"), a(open, "10.153.3.9")}})
		for _, owner := range []string{listed, n("_http._tcp.listed." + ns)} {
			expect(t, c, defaultTTL, owner, "SRV", want{Answer: []string{srv(owner, 50, 80, a0), srv(owner, 50, 80, b0)},
				Additional: []string{a(a0, "10.153.1.1"), a(b0, "10.153.2.1")}})
		}
		expect(t, c, defaultTTL, a0, "A", want{Answer: []string{a(a0, "10.153.1.1")}})
		rogueNames := []string{n("r-0.rogue.listed." + ns), n("10-153-9-8.rogue.listed." + ns)}
		nxdomainAll(t, c, rogueNames, "A")
		expect(t, c, defaultTTL, n("rogue.listed."+ns), "A", nxdomain()) // not even an empty non-terminal
		o9 := n("o-9.rogue.open." + ns)
		expect(t, c, defaultTTL, o9, "A", want{Answer: []string{a(o9, "10.153.3.9")}})
		checkTransfer(t, transferred(t, c), []string{a(listed, "10.153.1.1"), a(b0, "10.153.2.1"), a(o9, "10.153.3.9")},
			[]string{"rogue.listed." + ns + ".svc." + apex}, []string{"10.153.9.9", "10.153.9.8"})
		checkSkipped(t, c, before, map[skipKey]float64{{kindSlice, "unlisted_cluster"}: 1})
	})

	t.Run("v1alpha2 clusters", func(t *testing.T) {
		// The root shape is stored only where v1alpha2 is the storage
		// version: a control plane of its own, with deploy/crds-v1alpha2-storage.
		const ns = "trust-clusters"
		menv, err := harness.Start(harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{migV1alpha2StorageCRD(t)}})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = menv.Stop() })
		ctx, cancel := harness.Context(2 * time.Minute)
		t.Cleanup(cancel)
		id, err := menv.PluginIdentity(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := menv.ApplyYAML(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"); err != nil {
			t.Fatal(err)
		}
		c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Metrics: true, Plugins: harness.MulticlusterBlock(id.Kubeconfig)})
		before := skipCounts(t, c)
		im := harness.Import{Namespace: ns, Name: "listed", Type: "Headless", Ports: trustPorts, Clusters: []string{"east"}}.Object("v1alpha2")
		if _, err := menv.Dynamic.Resource(cache.ServiceImports("v1alpha2")).Namespace(ns).Create(ctx, im, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		createSlice(t, menv, harness.MCSSlice(ns, "listed-rogue", "listed", "rogue", trustManagedBy, trustPorts, harness.Endpoint("10.153.4.9", "r-0", true)))
		createSlice(t, menv, harness.MCSSlice(ns, "listed-east", "listed", "east", trustManagedBy, trustPorts, harness.Endpoint("10.153.4.1", "a-0", true)))

		listed, a0 := n("listed."+ns), n("a-0.east.listed."+ns)
		eventually(t, c, listed, "A", want{Answer: []string{a(listed, "10.153.4.1")}})
		expect(t, c, defaultTTL, listed, "SRV", want{Answer: []string{srv(listed, 100, 80, a0)}, Additional: []string{a(a0, "10.153.4.1")}})
		expect(t, c, defaultTTL, n("r-0.rogue.listed."+ns), "A", nxdomain())
		checkSkipped(t, c, before, map[skipKey]float64{{kindSlice, "unlisted_cluster"}: 1})
	})
}

// TestTrustLocalClaims: with cluster_id east, a headless import that prefers
// close endpoints answers, at its name and port names, only the endpoints of
// a slice claiming east whose every address is in an EndpointSlice of the
// local Service (labelled kubernetes.io/service-name and managed by
// kube-controller-manager's endpointslice-controller.k8s.io). Other
// endpoints that claim east keep their own names, as any other cluster's;
// a peer that claims east for its own addresses alone does not make the
// service answer them alone, and one that claims a proven endpoint's
// hostname is not answered under that name. Each slice with such endpoints
// is counted once as unproven_local.
func TestTrustLocalClaims(t *testing.T) {
	const ns = "trust-local"
	pg := []corev1.ServicePort{harness.TCP("pg", 5432)}
	c := startTrustDNS(t, "cluster_id east")
	before := skipCounts(t, c)
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	preferClose := map[string]any{"trafficDistribution": "PreferClose"}

	// db: the local Service's own slice holds 10.150.1.1 and 10.150.1.2;
	// a slice labelled as the local Service's but not written by its
	// controller holds the hostile addresses, and proves nothing.
	createSlice(t, env, serviceSlice(ns, "db-x7k2p", "db", sliceController, pg, "10.150.1.1", "10.150.1.2"))
	createSlice(t, env, serviceSlice(ns, "db-decoy", "db", "evil.example.com", pg, "10.150.9.9", "10.150.9.8"))
	writeImport(t, harness.Import{Namespace: ns, Name: "db", Type: "Headless", Ports: pg, More: preferClose})
	applyMCSSlice(t, ns, "db-west", "db", "west", trustManagedBy, "IPv4", pg, []mcsEndpoint{{addr: "10.150.2.1", hostname: "db-0"}})
	applyMCSSlice(t, ns, "db-west6", "db", "west", trustManagedBy, "IPv6", pg, []mcsEndpoint{{addr: "fd00::2:1", hostname: "db-0"}})
	// A peer claims east under the proven endpoint's hostname: merged into
	// that name, its addresses would be answered as the local cluster's, and
	// its IPv6 one would hide west's. Written before east's own slice, so
	// that east's answer below comes after them.
	applyMCSSlice(t, ns, "db-spoof", "db", "east", trustManagedBy, "IPv4", pg, []mcsEndpoint{{addr: "10.150.9.7", hostname: "db-0"}})
	applyMCSSlice(t, ns, "db-spoof6", "db", "east", trustManagedBy, "IPv6", pg, []mcsEndpoint{{addr: "fd00::66", hostname: "db-0"}})
	east := mcsSlice(ns, "db-east", "db", "east", trustManagedBy, "IPv4", pg, []mcsEndpoint{
		{addr: "10.150.1.1", hostname: "db-0"},   // the local Service's: proven
		{addr: "10.150.9.9", hostname: "evil-0"}, // not the local Service's
	})
	// Half proven: one address is the local Service's, the other not.
	east.Endpoints = append(east.Endpoints, discoveryv1.Endpoint{Addresses: []string{"10.150.1.2", "10.150.9.8"}, Hostname: ptr.To("half-0")})
	applyObjects(t, sliceObject(t, east))

	db := n("db." + ns)
	dbEast, evilEast, halfEast, dbWest := n("db-0.east.db."+ns), n("evil-0.east.db."+ns), n("half-0.east.db."+ns), n("db-0.west.db."+ns)
	eventually(t, c, db, "A", want{Answer: []string{a(db, "10.150.1.1")}})
	for _, owner := range []string{db, n("_pg._tcp.db." + ns)} {
		expect(t, c, defaultTTL, owner, "SRV", want{Answer: []string{srv(owner, 100, 5432, dbEast)}, Additional: []string{a(dbEast, "10.150.1.1")}})
	}
	// No local AAAA is proven: every cluster's, west's.
	expect(t, c, defaultTTL, db, "AAAA", want{Answer: []string{aaaa(db, "fd00::2:1")}})
	// Every endpoint keeps its own name, the unproven ones under east too,
	// but those that would take a proven one's.
	expect(t, c, defaultTTL, dbEast, "A", want{Answer: []string{a(dbEast, "10.150.1.1")}})
	expect(t, c, defaultTTL, dbEast, "AAAA", nodata())
	expect(t, c, defaultTTL, evilEast, "A", want{Answer: []string{a(evilEast, "10.150.9.9")}})
	expect(t, c, defaultTTL, halfEast, "A", want{Answer: []string{a(halfEast, "10.150.1.2"), a(halfEast, "10.150.9.8")}})
	expect(t, c, defaultTTL, dbWest, "A", want{Answer: []string{a(dbWest, "10.150.2.1")}})

	// cache: a peer claims east for its own address, and no local Service
	// has it: the service answers every cluster's endpoints, as one whose
	// local cluster has none, never the claimed one alone.
	writeImport(t, harness.Import{Namespace: ns, Name: "cache", Type: "Headless", Ports: pg, More: preferClose})
	applyMCSSlice(t, ns, "cache-west", "cache", "west", trustManagedBy, "IPv4", pg, []mcsEndpoint{{addr: "10.151.2.1", hostname: "c-0"}})
	applyMCSSlice(t, ns, "cache-east", "cache", "east", trustManagedBy, "IPv4", pg, []mcsEndpoint{{addr: "10.151.9.9", hostname: "evil-0"}})
	cache, cWest, cEvil := n("cache."+ns), n("c-0.west.cache."+ns), n("evil-0.east.cache."+ns)
	eventually(t, c, cache, "A", want{Answer: []string{a(cache, "10.151.2.1"), a(cache, "10.151.9.9")}})
	expect(t, c, defaultTTL, cache, "SRV", want{Answer: []string{srv(cache, 50, 5432, cWest), srv(cache, 50, 5432, cEvil)},
		Additional: []string{a(cWest, "10.151.2.1"), a(cEvil, "10.151.9.9")}})

	// Four slices hold unproven endpoints (db's east and its two spoofs,
	// cache's east); each was written once.
	checkSkipped(t, c, before, map[skipKey]float64{{kindSlice, "unproven_local"}: 4})
}

// TestTrustEndpointCap: with max_endpoints 1000, a headless service keeps
// the first 1000 ready endpoints it is given; 30 more slices of 1000 each
// are cut whole, counted once each as too_many_endpoints, and never stored:
// the live Go heap stays flat, growing by less than 1 MiB, where storing
// them would take 30 times what the first 1000 took. The kept endpoints
// keep answering, the cut ones never do.
func TestTrustEndpointCap(t *testing.T) {
	const (
		ns, svc  = "trust-cap", "big"
		perSlice = 1000 // kube-apiserver's limit on a slice's endpoints
		more     = 30   // slices written past the cap
		bound    = 1 << 20
	)
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Metrics: true, Pprof: true, NoLog: true,
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, "max_endpoints 1000")})
	before := skipCounts(t, c)
	base := endpointsGauge(t, c)

	// The address of endpoint j of slice i, and its name.
	addr := func(i, j int) string { return fmt.Sprintf("10.%d.%d.%d", 160+i, j/250, j%250+1) }
	epName := func(i, j int) string { return n(strings.ReplaceAll(addr(i, j), ".", "-") + ".west." + svc + "." + ns) }
	slice := func(i int) *discoveryv1.EndpointSlice {
		es := harness.MCSSlice(ns, fmt.Sprintf("%s-west-%02d", svc, i), svc, "west", trustManagedBy, trustPorts)
		for j := range perSlice {
			es.Endpoints = append(es.Endpoints, harness.Endpoint(addr(i, j), "", true))
		}
		return es
	}

	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	writeImport(t, harness.Import{Namespace: ns, Name: svc, Type: "Headless", Ports: trustPorts})
	empty := liveHeap(t, c)
	createSlice(t, env, slice(0))
	waitEndpoints(t, c, base+perSlice)
	var first []string
	for j := range perSlice {
		first = append(first, a(n(svc+"."+ns), addr(0, j)))
	}
	checkBig := func(what string) {
		t.Helper()
		m, err := harness.Exchange(c.Addr(), n(svc+"."+ns), dns.TypeA)
		if err != nil {
			t.Fatal(err)
		}
		if err := (want{Answer: first}).Check(m, defaultTTL); err != nil {
			t.Errorf("%s: %s A is not exactly the first slice's %d addresses: %.2000s", what, svc, perSlice, err)
		}
	}
	checkBig("at the cap")
	atCap := liveHeap(t, c)

	for i := 1; i <= more; i++ {
		createSlice(t, env, slice(i))
	}
	cut := skipKey{kindSlice, "too_many_endpoints"}
	harness.Eventually(t, syncWithin, func() error {
		if got := skipCounts(t, c)[cut] - before[cut]; got != more {
			return fmt.Errorf("too_many_endpoints counted %v slices, want %d", got, more)
		}
		return nil
	})
	past := liveHeap(t, c)
	t.Logf("live Go heap: %.2f MiB before any endpoint, %.2f MiB with %d (%+.3f MiB), %.2f MiB after %d more were cut (%+.3f MiB)",
		mib(empty), mib(atCap), perSlice, mib(atCap-empty), mib(past), more*perSlice, mib(past-atCap))
	if past-atCap >= bound {
		t.Errorf("with max_endpoints 1000 the live heap grew by %.2f MiB for %d endpoints past the cap, want less than %.0f MiB",
			mib(past-atCap), more*perSlice, mib(bound))
	}
	if stored := more * (atCap - empty); stored < 8*bound {
		t.Errorf("storing the %d endpoints past the cap would take about %.2f MiB only: a bound of %.0f MiB shows nothing",
			more*perSlice, mib(stored), mib(bound))
	}

	// What is kept answers, and only that.
	if got := endpointsGauge(t, c); got != base+perSlice {
		t.Errorf("%s = %v with max_endpoints 1000, want %v", metricname.Endpoints, got, base+perSlice)
	}
	checkBig("past the cap")
	expect(t, c, defaultTTL, epName(0, perSlice-1), "A", want{Answer: []string{a(epName(0, perSlice-1), addr(0, perSlice-1))}})
	for _, i := range []int{1, more} {
		expect(t, c, defaultTTL, epName(i, 0), "A", nxdomain())
	}
	checkSkipped(t, c, before, map[skipKey]float64{cut: more})
}

// endpointsGauge reads coredns_multicluster_endpoints.
func endpointsGauge(t testing.TB, c *harness.CoreDNS) float64 {
	t.Helper()
	m, err := harness.Scrape(c.MetricsURL)
	if err != nil {
		t.Fatal(err)
	}
	return endpointsTotal(m)
}

// waitEndpoints waits until coredns_multicluster_endpoints is want.
func waitEndpoints(t testing.TB, c *harness.CoreDNS, want float64) {
	t.Helper()
	harness.Eventually(t, syncWithin, func() error {
		m, err := harness.Scrape(c.MetricsURL)
		if err != nil {
			return err
		}
		if v := endpointsTotal(m); v != want {
			return fmt.Errorf("%s = %v, want %v", metricname.Endpoints, v, want)
		}
		return nil
	})
}

// liveHeap is what CoreDNS's live Go objects take, in bytes: the heap
// profile with gc=1 runs a full garbage collection, and with debug=1 it
// reads runtime.MemStats right after it, before writing the profile (whose
// own garbage a scrape of go_memstats_alloc_bytes would count); the least
// HeapAlloc of three.
func liveHeap(t testing.TB, c *harness.CoreDNS) float64 {
	t.Helper()
	least := math.Inf(1)
	cl := &http.Client{Timeout: time.Minute}
	for range 3 {
		resp, err := cl.Get(c.PprofURL + "/heap?gc=1&debug=1")
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			t.Fatalf("%s/heap?gc=1&debug=1: %s %v", c.PprofURL, resp.Status, err)
		}
		m := heapAlloc.FindSubmatch(body)
		if m == nil {
			t.Fatalf("%s/heap?gc=1&debug=1 has no HeapAlloc:\n%s", c.PprofURL, harness.Abridge(string(body), 5, 40))
		}
		v, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			t.Fatal(err)
		}
		least = min(least, v)
	}
	return least
}

// heapAlloc is runtime.MemStats.HeapAlloc in a heap profile with debug=1.
var heapAlloc = regexp.MustCompile(`(?m)^# HeapAlloc = (\d+)$`)

func mib(b float64) float64 { return b / (1 << 20) }

// TestTrustNames: names an object makes too long or ambiguous. An
// endpoint's name holds its cluster ID (a label value of up to 63
// characters, dots allowed): with a namespace and a service of 63 each, the
// name passes DNS's 255 octets, and dig refuses the whole reply ("name too
// long"), the other endpoints' records with it. Such an endpoint is left
// out of every answer and the transfer, and counted once as name_too_long.
// A custom resource's name may hold dots: "good.west.<svc>" would read as
// an endpoint of the headless service <svc>, and "evil.dns" in kube-system
// as the service dns of the namespace "dns.kube-system", which is not
// protected. Such an import is not used, and counted as bad_service_name
// where its namespace is answered.
func TestTrustNames(t *testing.T) {
	ns := "trust-names-" + strings.Repeat("n", 51)
	svc := strings.Repeat("s", 63)
	c := startTrustDNS(t)
	before := skipCounts(t, c)
	ensureNamespace(t, ns)
	ensureNamespace(t, "kube-system")
	writeImport(t, harness.Import{Namespace: ns, Name: "good.west." + svc, Type: "ClusterSetIP", IPs: []string{"10.154.2.1"}, Ports: trustPorts})
	writeImport(t, harness.Import{Namespace: "kube-system", Name: "evil.dns", Type: "ClusterSetIP", IPs: []string{"10.154.3.1"}, Ports: trustPorts})
	writeImport(t, harness.Import{Namespace: ns, Name: svc, Type: "Headless", Ports: trustPorts})
	longCluster := strings.Repeat("c", 31) + "." + strings.Repeat("d", 31)
	applyMCSSlice(t, ns, "long", svc, longCluster, trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{{addr: "10.154.1.2", hostname: strings.Repeat("h", 63)}})
	applyMCSSlice(t, ns, "good", svc, "west", trustManagedBy, "IPv4", trustPorts, []mcsEndpoint{{addr: "10.154.1.1", hostname: "good"}})

	// The imports, then the slices, each in the order written, come
	// through one watch each: once good answers, the others were read.
	name, good := n(svc+"."+ns), n("good.west."+svc+"."+ns)
	eventually(t, c, name, "A", want{Answer: []string{a(name, "10.154.1.1")}})
	for _, owner := range []string{name, n("_http._tcp." + svc + "." + ns)} {
		expect(t, c, defaultTTL, owner, "SRV", want{Answer: []string{srv(owner, 100, 80, good)}, Additional: []string{a(good, "10.154.1.1")}})
	}
	expect(t, c, defaultTTL, good, "A", want{Answer: []string{a(good, "10.154.1.1")}})
	nxdomainAll(t, c, []string{n("evil.dns.kube-system"), n("dns.kube-system")}, "A", "SRV")
	checkTransfer(t, transferred(t, c), []string{a(name, "10.154.1.1"), a(good, "10.154.1.1")},
		[]string{"dns.kube-system.svc." + apex, longCluster + "." + svc + "." + ns + ".svc." + apex},
		[]string{"10.154.1.2", "10.154.2.1", "10.154.3.1"})
	checkSkipped(t, c, before, map[skipKey]float64{{kindSlice, cache.ReasonNameTooLong}: 1, {kindImportV1beta1, cache.ReasonBadServiceName}: 1})
}

// TestTrustEndpointCapAddresses: max_endpoints counts addresses, not
// endpoints: an endpoint may hold up to 100 (discovery/v1), each a record,
// so two endpoints of four addresses under a cap of 5 keep the first five
// addresses, counted once as too_many_endpoints.
func TestTrustEndpointCapAddresses(t *testing.T) {
	const ns = "trust-cap-addresses"
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Metrics: true,
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, "max_endpoints 5")})
	before := skipCounts(t, c)
	ensureNamespace(t, ns)
	writeImport(t, harness.Import{Namespace: ns, Name: "db", Type: "Headless", Ports: trustPorts})
	es := mcsSlice(ns, "db-west", "db", "west", trustManagedBy, "IPv4", trustPorts,
		[]mcsEndpoint{{addr: "10.156.0.1", hostname: "db-0"}, {addr: "10.156.1.1", hostname: "db-1"}})
	for i := range es.Endpoints {
		for j := 2; j <= 4; j++ {
			es.Endpoints[i].Addresses = append(es.Endpoints[i].Addresses, fmt.Sprintf("10.156.%d.%d", i, j))
		}
	}
	applyObjects(t, sliceObject(t, es))
	name, db1 := n("db."+ns), n("db-1.west.db."+ns)
	eventually(t, c, name, "A", want{Answer: []string{a(name, "10.156.0.1"), a(name, "10.156.0.2"), a(name, "10.156.0.3"),
		a(name, "10.156.0.4"), a(name, "10.156.1.1")}})
	expect(t, c, defaultTTL, db1, "A", want{Answer: []string{a(db1, "10.156.1.1")}})
	checkSkipped(t, c, before, map[skipKey]float64{{kindSlice, cache.ReasonTooManyEndpoints}: 1})
}
