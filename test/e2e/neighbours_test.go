package e2e

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/metricname"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// The CoreDNS plugins operators put beside ours, each on the real CoreDNS
// over the testdata the shared control plane holds.

// TestWithDNSSEC: the dnssec plugin signs the plugin's answers, and delv,
// trusting the test's key, validates them: a positive answer, NXDOMAIN and
// NODATA (CoreDNS's NSEC "black lies").
func TestWithDNSSEC(t *testing.T) {
	t.Parallel()
	keygen := needTool(t, "dnssec-keygen", "bind9-utils")
	delv := needTool(t, "delv", "bind9-dnsutils")
	dir := t.TempDir()
	key := strings.TrimSpace(runTool(t, keygen, "-q", "-K", dir, "-a", "ECDSAP256SHA256", "-f", "KSK", strings.TrimSuffix(apex, ".")))
	pub, err := os.ReadFile(filepath.Join(dir, key+".key"))
	if err != nil {
		t.Fatal(err)
	}
	// The key as delv's trust anchor: "<zone> static-key <flags> <proto> <alg> "<key>";".
	var dnskey *dns.DNSKEY
	for line := range strings.Lines(string(pub)) {
		if rr, err := dns.NewRR(line); err == nil && rr != nil {
			dnskey, _ = rr.(*dns.DNSKEY)
		}
	}
	if dnskey == nil {
		t.Fatalf("no DNSKEY in %s", pub)
	}
	anchors := filepath.Join(dir, "anchors.conf")
	if err := os.WriteFile(anchors, []byte(fmt.Sprintf("trust-anchors {\n\t%s static-key %d %d %d %q;\n};\n",
		apex, dnskey.Flags, dnskey.Protocol, dnskey.Algorithm, dnskey.PublicKey)), 0o644); err != nil {
		t.Fatal(err)
	}
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: fmt.Sprintf("dnssec %s {\n\tkey file %s\n}\n", apex, filepath.Join(dir, key)) + harness.MulticlusterBlock(plugin.Kubeconfig),
	})
	eventually(t, c, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	for _, q := range []struct{ name, qtype, want string }{
		{n("web.demo"), "A", "; fully validated"},
		{n("db-0.east.prod.db.demo"), "A", "; fully validated"},
		{n("_http._tcp.web.demo"), "SRV", "; fully validated"},
		{n("nope.demo"), "A", "; negative response, fully validated"},
		{n("web.demo"), "TXT", "; negative response, fully validated"},
	} {
		out := runTool(t, delv, "@127.0.0.1", "-p", strconv.Itoa(c.Port), "-a", anchors, "+root="+apex, q.name, q.qtype)
		if !strings.Contains(out, q.want) {
			t.Errorf("delv %s %s: want %q:\n%s", q.name, q.qtype, q.want, out)
		}
	}
}

// selfSigned writes a certificate for 127.0.0.1 and its key into dir.
func selfSigned(t *testing.T, dir string) (cert, key string) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "ns.dns.clusterset.local"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1)}, DNSNames: []string{"ns.dns.clusterset.local"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(cert, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(key, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	return cert, key
}

// TestOverTLS: a tls:// server block answers the zone over DNS over TLS
// (RFC 7858), asked with kdig +tls, verifying the server's certificate.
func TestOverTLS(t *testing.T) {
	t.Parallel()
	kdig := needTool(t, "kdig", "knot-dnsutils")
	cert, key := selfSigned(t, t.TempDir())
	tlsPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	block := harness.MulticlusterBlock(plugin.Kubeconfig)
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Corefile: func(port int) string {
			return fmt.Sprintf("%[1]s:%[2]d {\n\tbind 127.0.0.1\n\t%[3]s}\ntls://%[1]s:%[4]d {\n\tbind 127.0.0.1\n\ttls %[5]s %[6]s\n\terrors\n\t%[3]s}\n",
				strings.TrimSuffix(apex, "."), port, block, tlsPort, cert, key)
		},
	})
	eventually(t, c, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	for _, q := range []struct{ name, qtype, want string }{
		{n("web.demo"), "A", "10.42.0.10"},
		{n("_http._tcp.web.demo"), "SRV", "0 100 80 " + n("web.demo")},
		{n("nope.demo"), "A", "status: NXDOMAIN"},
	} {
		out := runTool(t, kdig, "@127.0.0.1", "-p", strconv.Itoa(tlsPort), "+tls-ca="+cert, "+tls-hostname=ns.dns.clusterset.local", q.name, q.qtype)
		if !strings.Contains(out, q.want) || !strings.Contains(out, "TLS session") {
			t.Errorf("kdig +tls %s %s: want %q:\n%s", q.name, q.qtype, q.want, out)
		}
	}
}

// TestBehindCache: the cache plugin in front keeps the plugin's TTLs (5
// seconds: a cached answer never has more) and caches NXDOMAIN for at most
// the SOA's minimum. With prefetch, a name asked every second is fetched
// again before it expires: once the name was asked twice ("prefetch 2 10s")
// and its TTL is down to 40% (2 of its 5 seconds), the answer that shows that
// TTL sets off a prefetch; the plugin answers it, no query misses the cache
// (the entry never expired), and the next answer is the refreshed entry, its
// TTL up again. The cache's own counters (requests, hits, prefetches) and the
// plugin's (answers) say which query went where.
func TestBehindCache(t *testing.T) {
	t.Parallel()
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Metrics: true,
		Plugins: "cache 300 {\n\tprefetch 2 10s 40%\n}\n" + harness.MulticlusterBlock(plugin.Kubeconfig),
	})
	eventually(t, c, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})

	// A name not asked yet, so that its first query is a miss and the
	// entry's age is known from there.
	name := n("dual.demo")
	const threshold = 2 // ceil(40% of defaultTTL): a hit at or below it prefetches
	type counts struct{ requests, hits, prefetches, answered float64 }
	count := func() counts {
		t.Helper()
		m, err := harness.Scrape(c.MetricsURL)
		if err != nil {
			t.Fatal(err)
		}
		sum := func(family string) float64 {
			var v float64
			for _, s := range m[family].GetMetric() {
				v += harness.SeriesValue(s)
			}
			return v
		}
		return counts{sum("coredns_cache_requests_total"), sum("coredns_cache_hits_total"),
			sum("coredns_cache_prefetch_total"), sum(metricname.Responses)}
	}
	ask := func() uint32 {
		t.Helper()
		r := dig(t, c, name, "A")
		if len(r.Answer) == 0 {
			t.Fatalf("%s A: no answer:\n%s", name, r)
		}
		ttl := r.Answer[0].Header().Ttl
		if err := (want{Answer: []string{a(name, "10.42.0.20")}}).Check(r.Msg(), ttl); err != nil {
			t.Fatalf("%s A:\n%v\n%s", name, err, r)
		}
		if ttl > defaultTTL {
			t.Errorf("cached answer with TTL %d, above the plugin's %d", ttl, defaultTTL)
		}
		return ttl
	}
	base := count()
	var seen []uint32
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	deadline := time.Now().Add(4 * defaultTTL * time.Second)
	for {
		seen = append(seen, ask())
		if count().prefetches > base.prefetches {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no prefetch of %s A asked every second for %v; TTLs seen %v", name, 4*defaultTTL*time.Second, seen)
		}
		<-tick.C
	}
	// The plugin answers the prefetch in the background; then the next
	// query gets the refreshed entry.
	harness.Eventually(t, 10*time.Second, func() error {
		if got := count(); got.answered < base.answered+1+(got.prefetches-base.prefetches) {
			return fmt.Errorf("the plugin answered %v queries since the first, want the first and each of %v prefetches",
				got.answered-base.answered, got.prefetches-base.prefetches)
		}
		return nil
	})
	refreshed := ask()
	end := count()
	t.Logf("TTLs of %s A asked every second through cache: %v, then %d", name, seen, refreshed)
	if misses := (end.requests - base.requests) - (end.hits - base.hits); misses != 1 {
		t.Errorf("%v of %v queries missed the cache, want only the first: the entry expired before it was fetched again",
			misses, end.requests-base.requests)
	}
	if got, want := end.answered-base.answered, 1+end.prefetches-base.prefetches; got != want || got < 2 {
		t.Errorf("the plugin answered %v queries, want %v: the first and one a prefetch", got, want)
	}
	if low := slices.Min(seen); low > threshold || refreshed <= low {
		t.Errorf("TTLs %v, then %d: want one at or below %d (the prefetch), then one above it (the refreshed entry)", seen, refreshed, threshold)
	}
	r := dig(t, c, n("nope.demo"), "A")
	if len(r.Authority) == 0 {
		t.Fatalf("NXDOMAIN without SOA:\n%s", r)
	}
	if neg := r.Authority[0].Header().Ttl; neg > defaultTTL {
		t.Errorf("NXDOMAIN cached with TTL %d, above the SOA minimum %d", neg, defaultTTL)
	}
}
