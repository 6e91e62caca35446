package multicluster

import (
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		input   string
		wantErr string // empty: no error
		check   func(*testing.T, *Multicluster)
	}{
		{input: `multicluster`, check: func(t *testing.T, m *Multicluster) {
			if len(m.Zones) != 1 || m.Zones[0] != "clusterset.local." || m.TTL != 5 || m.kubeconfig != "" || m.fallback || m.startupTimeout != 5*time.Second {
				t.Errorf("defaults: %+v", m)
			}
		}},
		{input: `multicluster example.org Other.ZONE {
			kubeconfig /etc/kube.conf ctx
			ttl 30
			fallthrough example.org
			fallback v1alpha1
			namespaces a b
			startup_timeout 2s
		}`, check: func(t *testing.T, m *Multicluster) {
			if strings.Join(m.Zones, ",") != "example.org.,other.zone." {
				t.Errorf("zones %v", m.Zones)
			}
			if m.kubeconfig != "/etc/kube.conf" || m.kubecontext != "ctx" || m.TTL != 30 || !m.fallback ||
				strings.Join(m.namespaces, ",") != "a,b" || m.startupTimeout != 2*time.Second || !m.Fall.Through("x.example.org.") {
				t.Errorf("options: %+v", m)
			}
		}},
		{input: "multicluster {\n kubeconfig\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n kubeconfig a b c\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n ttl\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n ttl 1 2\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n\n ttl five\n}", wantErr: `Testfile:3 - Error during parsing: ttl must be a whole number of seconds from 0 to 3600, not "five"`},
		{input: "multicluster {\n ttl -1\n}", wantErr: "ttl must be"},
		{input: "multicluster {\n ttl 3601\n}", wantErr: "ttl must be"},
		{input: "multicluster {\n fallback v1beta1\n}", wantErr: `Testfile:2 - Error during parsing: fallback takes "v1alpha1"`},
		{input: "multicluster {\n fallback\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n namespaces\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n namespaces Bad_NS\n}", wantErr: `namespace "Bad_NS" is not a valid namespace name`},
		{input: "multicluster {\n startup_timeout soon\n}", wantErr: `startup_timeout must be a duration`},
		{input: "multicluster {\n resyncperiod 5m\n}", wantErr: `Testfile:2 - Error during parsing: unknown option "resyncperiod"`},
		{input: "multicluster\nmulticluster", wantErr: "this plugin"},
	} {
		c := caddy.NewTestController("dns", tc.input)
		c.ServerBlockKeys = []string{"clusterset.local."}
		m, err := parse(c)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%q: error %v, want %q", tc.input, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%q: %v", tc.input, err)
			continue
		}
		tc.check(t, m)
	}
}

func TestSetupWrapsErrors(t *testing.T) {
	c := caddy.NewTestController("dns", "multicluster {\n ttl x\n}")
	err := setup(c)
	if err == nil || !strings.HasPrefix(err.Error(), "plugin/multicluster: ") {
		t.Fatalf("setup error %v", err)
	}
}

func parseInput(input string) (*Multicluster, error) {
	c := caddy.NewTestController("dns", input)
	c.ServerBlockKeys = []string{"clusterset.local."}
	return parse(c)
}
