package multicluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin/transfer"
)

func collect(t *testing.T, m *Multicluster, zone string, serial uint32) []string {
	t.Helper()
	ch, err := m.Transfer(zone, serial)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for rrs := range ch {
		for _, rr := range rrs {
			out = append(out, strings.ReplaceAll(rr.String(), "\t", " "))
		}
	}
	return out
}

func TestTransfer(t *testing.T) {
	m := reversePlugin(t)
	got := collect(t, m, zone, 0)
	if len(got) < 2 || !strings.Contains(got[0], " SOA ") || got[0] != got[len(got)-1] {
		t.Fatalf("a transfer starts and ends with the SOA: %v", got)
	}
	for _, want := range []string{
		"clusterset.local. 5 IN NS ns.dns.clusterset.local.",
		`dns-version.clusterset.local. 5 IN TXT "1.0.0"`,
		"web.demo.svc.clusterset.local. 5 IN A 10.42.0.10",
		"dual.demo.svc.clusterset.local. 5 IN AAAA fd00::11",
		"_http._tcp.web.demo.svc.clusterset.local. 5 IN SRV 0 100 80 web.demo.svc.clusterset.local.",
		"web.demo.svc.clusterset.local. 5 IN SRV 0 50 53 web.demo.svc.clusterset.local.",
		"db.demo.svc.clusterset.local. 5 IN A 10.2.0.1",
		"db-0.east.prod.db.demo.svc.clusterset.local. 5 IN AAAA fd00::2:1",
		"10-1-0-2.west.db.demo.svc.clusterset.local. 5 IN A 10.1.0.2",
		"_mysql._tcp.db.demo.svc.clusterset.local. 5 IN SRV 0 25 3306 db-0.west.db.demo.svc.clusterset.local.",
	} {
		if !slices.Contains(got, want) {
			t.Errorf("missing %q", want)
		}
	}
	for _, rr := range got {
		if strings.Contains(rr, "10.1.0.3") || strings.Contains(rr, "idle.") || strings.Contains(rr, "10.9.9.9") {
			t.Errorf("transferred a record that does not exist: %s", rr)
		}
	}
	if n := len(got); n != 34 { // SOA, NS, TXT; db 18; dual 4; six 3; web 5; SOA
		t.Errorf("%d records:\n%s", n, strings.Join(got, "\n"))
	}

	// IXFR from the current serial: the SOA alone.
	if got := collect(t, m, zone, 1); len(got) != 1 {
		t.Errorf("IXFR at the current serial: %v", got)
	}
	rev := collect(t, m, "42.10.in-addr.arpa.", 0)
	if !slices.Contains(rev, "10.0.42.10.in-addr.arpa. 5 IN PTR web.demo.svc.clusterset.local.") || len(rev) != 5 {
		t.Errorf("reverse zone transfer: %v", rev)
	}
	if _, err := m.Transfer("example.org.", 0); err != transfer.ErrNotAuthoritative {
		t.Errorf("other zone: %v", err)
	}
}

// A zone transfer holds no record twice: ports that share a number give one
// SRV record per target at the service's own name, and each port name keeps
// its own.
func TestTransferOneSRVPerTargetAndPort(t *testing.T) {
	m := newTestPlugin(t, samePortNumbers()...)
	got := collect(t, m, zone, 0)
	got = got[1 : len(got)-1] // the SOA opens and closes the transfer
	seen := map[string]bool{}
	srvs := map[string]int{}
	for _, rr := range got {
		if seen[rr] {
			t.Errorf("transferred twice: %s", rr)
		}
		seen[rr] = true
		if f := strings.Fields(rr); f[3] == "SRV" {
			srvs[f[0]]++
			if w := map[string]string{"mixed.mcs.svc.clusterset.local.": "50", "hello-headless.mcs.svc.clusterset.local.": "33",
				"_tcp._tcp.hello-headless.mcs.svc.clusterset.local.": "33", "_udp._udp.hello-headless.mcs.svc.clusterset.local.": "33",
			}[f[0]]; w != "" && f[5] != w {
				t.Errorf("weight %s, want %s: %s", f[5], w, rr)
			}
		}
	}
	for name, want := range map[string]int{
		"hello.mcs.svc.clusterset.local.":                    1,
		"_tcp._tcp.hello.mcs.svc.clusterset.local.":          1,
		"_udp._udp.hello.mcs.svc.clusterset.local.":          1,
		"mixed.mcs.svc.clusterset.local.":                    2,
		"_http._tcp.mixed.mcs.svc.clusterset.local.":         1,
		"_web._tcp.mixed.mcs.svc.clusterset.local.":          1,
		"_dns._udp.mixed.mcs.svc.clusterset.local.":          1,
		"hello-headless.mcs.svc.clusterset.local.":           3,
		"_tcp._tcp.hello-headless.mcs.svc.clusterset.local.": 3,
		"_udp._udp.hello-headless.mcs.svc.clusterset.local.": 3,
	} {
		if srvs[name] != want {
			t.Errorf("%d SRV records at %s, want %d", srvs[name], name, want)
		}
	}
	// NS, TXT; hello A, AAAA, 3 SRV; mixed A, 5 SRV; hello-headless 3 A, 1 AAAA,
	// 9 SRV, 4 endpoint addresses.
	if n := len(got); n != 30 {
		t.Errorf("%d records:\n%s", n, strings.Join(got, "\n"))
	}
}
