package multicluster

import (
	"context"
	"fmt"
	"testing"

	"github.com/coredns/coredns/plugin/pkg/dnstest"
	"github.com/coredns/coredns/plugin/test"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
)

// NewWithBackend over a snapshot of testdata/ answers the whole contract
// table, as hack/run.sh relies on before its API server is up, at the
// default TTL and at another one, with the zone given as a Corefile key.
func TestNewWithBackend(t *testing.T) {
	objs, err := contract.ReadObjects("testdata")
	if err != nil {
		t.Fatal(err)
	}
	for _, ttl := range []uint32{DefaultTTL, 30} {
		t.Run(fmt.Sprint("ttl ", ttl), func(t *testing.T) {
			st, err := cache.Config{Zones: []string{zone}, TTL: ttl}.Static(objects(objs)...)
			if err != nil {
				t.Fatal(err)
			}
			m := NewWithBackend([]string{"ClusterSet.Local"}, ttl, st)
			if !m.Ready() {
				t.Error("not ready over a synced backend")
			}
			for _, tc := range contract.Cases {
				req := new(dns.Msg)
				req.SetQuestion(tc.Name, dns.StringToType[tc.Type])
				rec := dnstest.NewRecorder(&test.ResponseWriter{})
				if _, err := m.ServeDNS(context.Background(), rec, req); err != nil {
					t.Fatalf("%s %s: %v", tc.Type, tc.Name, err)
				}
				if rec.Msg == nil {
					t.Fatalf("%s %s: no reply written", tc.Type, tc.Name)
				}
				if err := tc.Check(rec.Msg, ttl); err != nil {
					t.Errorf("%s %s: %v", tc.Type, tc.Name, err)
				}
			}
		})
	}
}
