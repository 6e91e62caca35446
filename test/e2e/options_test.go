package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestTTL: the configured ttl is on every record of every section. It also
// names the kubeconfig's context, envtest's, explicitly.
func TestTTL(t *testing.T) {
	const ttl = 30
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig+" envtest", "ttl 30"),
	})
	waitForTestdata(t, c)
	for _, q := range [][2]string{
		{n("web.demo"), "A"},
		{n("dual.demo"), "SRV"},
		{n("db.demo"), "SRV"},
		{n("db-0.east.prod.db.demo"), "A"},
		{n("web.demo"), "AAAA"},
		{n("nosuch.demo"), "A"},
		{"dns-version." + apex, "TXT"},
		{apex, "NS"},
		{apex, "SOA"},
	} {
		r := dig(t, c, q[0], q[1])
		if r.Rcode != "NOERROR" && r.Rcode != "NXDOMAIN" || !r.AA() {
			t.Errorf("%s %s: want NOERROR or NXDOMAIN with AA:\n%s", q[0], q[1], r)
		}
		records := slices.Concat(r.Answer, r.Authority, r.Additional)
		if len(records) == 0 {
			t.Errorf("%s %s: no records at all:\n%s", q[0], q[1], r)
		}
		for _, rr := range records {
			if rr.Header().Ttl != ttl {
				t.Errorf("%s %s: TTL %d, want %d: %s\n%s", q[0], q[1], rr.Header().Ttl, ttl, rr, r)
			}
		}
	}
}

// TestFallthrough: with fallthrough, names the plugin does not have
// (NXDOMAIN) go to the next plugin, here whoami; NODATA and answers stay.
func TestFallthrough(t *testing.T) {
	c, err := harness.TryRunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, "fallthrough") + "whoami\n",
	})
	if err != nil {
		if strings.Contains(err.Error(), "whoami") {
			missing(t, "this CoreDNS lacks whoami (./cmd/coredns has every stock plugin; E2E_COREDNS names another): %v", err)
		}
		t.Fatal(err)
	}
	waitForTestdata(t, c)

	// whoami answers NOERROR, not authoritative, with the client's address
	// in the additional section.
	r := dig(t, c, n("nosuch.demo"), "A")
	if r.Rcode != "NOERROR" || len(r.Additional) == 0 || !strings.Contains(r.Output, "127.0.0.1") {
		t.Errorf("NXDOMAIN did not fall through to whoami:\n%s", r)
	}
	expect(t, c, defaultTTL, n("web.demo"), "A", findCase(t, n("web.demo"), "A").Want)
	expect(t, c, defaultTTL, n("web.demo"), "AAAA", nodata())
	expect(t, c, defaultTTL, n("west.db.demo"), "A", nodata())
}

// TestRootZoneRefused: a stanza whose zone is the root (a bare
// `multicluster` in a `.:53` server block takes the block's zone) would make
// every name the plugin's, and its apex SOA does not pack, so every reply
// was lost; CoreDNS now stops at start and says why.
func TestRootZoneRefused(t *testing.T) {
	_, err := harness.TryRunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Corefile: func(port int) string {
			return fmt.Sprintf(".:%d {\n\tbind 127.0.0.1\n\tmulticluster {\n\t\tkubeconfig %s\n\t}\n}\n", port, plugin.Kubeconfig)
		},
		ReadyWithin: 30 * time.Second,
	})
	const want = `zone "." would make every name the plugin's`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("CoreDNS with the root zone: %v; want an exit saying %q", err, want)
	}
}

// TestQPSWithoutBurst: apiserver_qps alone starts and answers; client-go
// refuses a QPS without a burst, and the plugin used to stop at start with
// client-go's words and no Corefile line.
func TestQPSWithoutBurst(t *testing.T) {
	c := startPluginDNS(t, "apiserver_qps 50")
	eventually(t, c, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
}
