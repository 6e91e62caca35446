package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// digAXFR runs dig's zone transfer and returns the records, in order.
func digAXFR(t *testing.T, port int, zone string) []dns.RR {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "dig", "@127.0.0.1", "-p", strconv.Itoa(port), "AXFR", zone, "+nocmd", "+nostats", "+nocomments").CombinedOutput()
	if err != nil {
		t.Fatalf("dig AXFR %s: %v\n%s", zone, err, out)
	}
	var rrs []dns.RR
	for line := range strings.Lines(string(out)) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, ";") {
			continue
		}
		rr, err := dns.NewRR(line)
		if err != nil {
			t.Fatalf("dig AXFR %s printed %q: %v\n%s", zone, line, err, out)
		}
		rrs = append(rrs, rr)
	}
	return rrs
}

// The options the kubernetes plugin offers for the clusterset zone, on the
// real API server: zone transfer (dig AXFR), reverse zones, namespaces,
// metadata for log, and labels.
func TestKubernetesPluginOptions(t *testing.T) {
	block := strings.ReplaceAll(harness.MulticlusterBlock(plugin.Kubeconfig, "namespaces demo", "startup_timeout 10s"),
		"multicluster {", "multicluster clusterset.local 10.42.0.0/16 fd00:42::/32 {")
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Corefile: func(port int) string {
			return fmt.Sprintf("clusterset.local:%[1]d 42.10.in-addr.arpa:%[1]d 2.4.0.0.0.0.d.f.ip6.arpa:%[1]d {\n"+
				"bind 127.0.0.1\nerrors\nmetadata\n"+
				`log . "META {name} {/multicluster/namespace}/{/multicluster/service}/{/multicluster/cluster}"`+"\n"+
				"transfer clusterset.local 42.10.in-addr.arpa {\n\tto *\n}\n%[2]s}\n", port, block)
		},
	})
	eventually(t, c, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})

	// namespaces: shop is not served.
	expect(t, c, defaultTTL, n("cart.shop"), "AAAA", nxdomain())

	// AXFR: SOA first and last, the records of the served namespace only.
	rrs := digAXFR(t, c.Port, apex)
	if len(rrs) < 3 || rrs[0].Header().Rrtype != dns.TypeSOA || rrs[len(rrs)-1].Header().Rrtype != dns.TypeSOA {
		t.Fatalf("AXFR does not start and end with the SOA: %v", rrs)
	}
	have := map[string]bool{}
	for _, rr := range rrs {
		have[contract.Brief(rr)] = true
		if strings.Contains(rr.Header().Name, ".shop.") {
			t.Errorf("AXFR holds a record of a namespace not served: %s", rr)
		}
	}
	for _, w := range []string{
		apex + " ns ns.dns." + apex,
		"dns-version." + apex + ` txt "1.0.0"`,
		a(n("web.demo"), "10.42.0.10"),
		aaaa(n("dual.demo"), "fd00:42::20"),
		srv(n("_http._tcp.web.demo"), 100, 80, n("web.demo")),
		a(n("db-0.west.db.demo"), "10.1.0.11"),
	} {
		if !have[w] {
			t.Errorf("AXFR lacks %q; it has %v", w, rrs)
		}
	}

	// Reverse zones: PTR for ClusterSetIPs, IPv4 and IPv6.
	expect(t, c, defaultTTL, "10.0.42.10.in-addr.arpa.", "PTR", want{Answer: []string{"10.0.42.10.in-addr.arpa. ptr " + n("web.demo")}})
	rev6, _ := dns.ReverseAddr("fd00:42::20")
	expect(t, c, defaultTTL, rev6, "PTR", want{Answer: []string{rev6 + " ptr " + n("dual.demo")}})
	if r := dig(t, c, "99.0.42.10.in-addr.arpa.", "PTR"); r.Rcode != "NXDOMAIN" || !r.AA() || len(r.Authority) != 1 ||
		r.Authority[0].Header().Name != "42.10.in-addr.arpa." || r.Authority[0].Header().Rrtype != dns.TypeSOA {
		t.Errorf("an unknown reverse name is NXDOMAIN with the reverse zone's SOA:\n%s", r)
	}
	rev := digAXFR(t, c.Port, "42.10.in-addr.arpa.")
	if len(rev) < 3 || contract.Brief(rev[len(rev)-2]) == "" {
		t.Errorf("reverse AXFR: %v", rev)
	}

	// metadata: log prints who asked for what.
	dig(t, c, n("db-0.east.prod.db.demo"), "A")
	harness.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(c.Output(), "META db-0.east.prod.db.demo.svc.clusterset.local. demo/db/east.prod") {
			return fmt.Errorf("no metadata in the log:\n%s", harness.Abridge(c.Output(), 5, 10))
		}
		return nil
	})
}

// labels: only ServiceImports matching the selector are answered.
func TestLabelsOption(t *testing.T) {
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: labelled\n")
	for _, o := range []struct{ name, env, ip string }{{"prod", "prod", "10.80.0.1"}, {"dev", "dev", "10.80.0.2"}} {
		apply(t, fmt.Sprintf(`apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: %s, namespace: labelled, labels: {env: %s}}
spec:
  type: ClusterSetIP
  ips: [%s]
  ports: [{name: http, protocol: TCP, port: 80}]
`, o.name, o.env, o.ip))
	}
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, "labels env in (prod, staging)"),
	})
	eventually(t, c, n("prod.labelled"), "A", want{Answer: []string{a(n("prod.labelled"), "10.80.0.1")}})
	expect(t, c, defaultTTL, n("dev.labelled"), "A", nxdomain())
	expect(t, c, defaultTTL, n("web.demo"), "A", nxdomain())
}
