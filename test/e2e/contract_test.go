package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestContract asks the plugin's CoreDNS, run as its least-privilege
// identity, every question of the contract table.
func TestContract(t *testing.T) {
	c := startPluginDNS(t)
	waitForTestdata(t, c)

	for _, tc := range contract.Cases {
		t.Run(caseName(tc), func(t *testing.T) {
			expect(t, c, defaultTTL, tc.Name, tc.Type, tc.Want)
		})
	}

	t.Run("clusterset.local._SOA", func(t *testing.T) { // on its own: the serial varies
		r := dig(t, c, apex, "SOA")
		if r.Rcode != "NOERROR" || !r.AA() || len(r.Answer) != 1 {
			t.Fatalf("want one SOA record, NOERROR, AA:\n%s", r)
		}
		s, ok := r.Answer[0].(*dns.SOA)
		if !ok {
			t.Fatalf("answer is no SOA:\n%s", r)
		}
		if err := contract.CheckSOA(s, defaultTTL); err != nil {
			t.Errorf("%v\n%s", err, r)
		}
		if s.Hdr.Ttl != defaultTTL {
			t.Errorf("SOA TTL %d, want %d\n%s", s.Hdr.Ttl, defaultTTL, r)
		}
	})

	// The same over TCP.
	t.Run("tcp", func(t *testing.T) {
		for _, tc := range []contract.Case{contract.Cases[0], findCase(t, n("db.demo"), "SRV"), findCase(t, n("nosuch.demo"), "A")} {
			expect(t, c, defaultTTL, tc.Name, tc.Type, tc.Want, "+tcp")
		}
	})

	t.Run("no forbidden calls", func(t *testing.T) {
		// The plugin needs no permission beyond deploy/rbac.yaml's.
		if out := strings.ToLower(c.Output()); strings.Contains(out, "forbidden") {
			t.Errorf("CoreDNS ran into RBAC denials:\n%s", c.Output())
		}
	})
}

func caseName(tc contract.Case) string {
	return strings.TrimSuffix(strings.TrimSuffix(tc.Name, "."+apex), ".svc") + "_" + tc.Type
}

func findCase(t testing.TB, name, qtype string) contract.Case {
	for _, tc := range contract.Cases {
		if tc.Name == name && tc.Type == qtype {
			return tc
		}
	}
	t.Fatalf("no case %s %s", name, qtype)
	return contract.Case{}
}

// waitForTestdata waits until c serves every object of testdata/, so the
// table runs against a synced plugin. It goes on when that never happens:
// the table then says what is wrong.
func waitForTestdata(t testing.TB, c *harness.CoreDNS) {
	t.Helper()
	sentinels := []contract.Case{
		findCase(t, n("web.demo"), "A"),
		findCase(t, n("dual.demo"), "AAAA"),
		findCase(t, n("cart.shop"), "AAAA"),
		findCase(t, n("db.demo"), "A"),
		findCase(t, n("db.demo"), "AAAA"),
	}
	err := harness.Poll(syncWithin, func() error {
		var errs []error
		for _, s := range sentinels {
			r, err := c.Dig(s.Name, s.Type)
			if err != nil {
				return err
			}
			if len(r.Answer) != len(s.Want.Answer) {
				errs = append(errs, fmt.Errorf("%s %s: %d records, want %d", s.Name, s.Type, len(r.Answer), len(s.Want.Answer)))
			}
		}
		return errors.Join(errs...)
	})
	if err != nil {
		t.Errorf("CoreDNS did not serve testdata/ within %v: %v", syncWithin, err)
	}
}
