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
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

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
// seconds: a cached answer counts down from it, never above it) and caches
// NXDOMAIN for at most the SOA's minimum. With prefetch, a name asked every
// second is fetched again before it expires: the log shows its TTLs.
func TestBehindCache(t *testing.T) {
	t.Parallel()
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: "cache 300 {\n\tprefetch 2 10s 40%\n}\n" + harness.MulticlusterBlock(plugin.Kubeconfig),
	})
	name := n("web.demo")
	eventually(t, c, name, "A", want{Answer: []string{a(name, "10.42.0.10")}})
	ttlOf := func(qname, qtype string, section func(*harness.DigResult) []dns.RR) uint32 {
		t.Helper()
		r := dig(t, c, qname, qtype)
		rrs := section(r)
		if len(rrs) == 0 {
			t.Fatalf("%s %s: no records:\n%s", qname, qtype, r)
		}
		return rrs[0].Header().Ttl
	}
	answer := func(r *harness.DigResult) []dns.RR { return r.Answer }
	authority := func(r *harness.DigResult) []dns.RR { return r.Authority }
	var seen []uint32
	for range 8 { // 8 seconds, asked every second: more than a TTL
		ttl := ttlOf(name, "A", answer)
		if ttl > defaultTTL {
			t.Errorf("cached answer with TTL %d, above the plugin's %d", ttl, defaultTTL)
		}
		seen = append(seen, ttl)
		time.Sleep(time.Second)
	}
	t.Logf("TTLs of %s A asked every second through cache: %v", name, seen)
	if neg := ttlOf(n("nope.demo"), "A", authority); neg > defaultTTL {
		t.Errorf("NXDOMAIN cached with TTL %d, above the SOA minimum %d", neg, defaultTTL)
	}
}
