package multicluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coredns/caddy"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func TestParse(t *testing.T) {
	for _, tc := range []struct {
		input string
		check func(*testing.T, *Multicluster)
	}{
		// The longest zone that the names of services fit in: 52 characters
		// with the final dot, as _<port>._sctp.<svc>.<ns>.svc. may be 202
		// (a port name of 62, labels of 63).
		{input: "multicluster " + strings.Repeat("z", 51) + " 10.in-addr.arpa", check: func(t *testing.T, m *Multicluster) {
			if len(m.forward) != 1 || len(m.forward[0]) != 52 {
				t.Errorf("zones %v", m.forward)
			}
		}},
		{input: `multicluster`, check: func(t *testing.T, m *Multicluster) {
			if len(m.Zones) != 1 || m.Zones[0] != "clusterset.local." || m.TTL != 5 || m.kubeconfig != "" || m.fallback || m.startupTimeout != 5*time.Second ||
				m.clusterID != "" || m.preferLocal {
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
		{input: `multicluster {
			endpoint https://10.0.0.1:6443
			tls cert.pem key.pem ca.pem
			apiserver_qps 20
			apiserver_burst 40
			labels env in (prod, staging), !legacy
		}`, check: func(t *testing.T, m *Multicluster) {
			if m.endpoint != "https://10.0.0.1:6443" || strings.Join(m.tlsFiles, ",") != "cert.pem,key.pem,ca.pem" ||
				m.qps != 20 || m.burst != 40 || m.labels != "env in (prod, staging), !legacy" {
				t.Errorf("options: %+v", m)
			}
			cfg, err := m.restConfig()
			if err != nil || cfg.Host != m.endpoint || cfg.QPS != 20 || cfg.Burst != 40 || cfg.CAFile != "ca.pem" {
				t.Errorf("rest config %+v, %v", cfg, err)
			}
		}},
		// A QPS alone: client-go refuses a QPS without a burst, so the
		// burst is client-go's default, or the QPS when it is more.
		{input: "multicluster {\n endpoint https://10.0.0.1:6443\n apiserver_qps 5\n}", check: func(t *testing.T, m *Multicluster) {
			cfg, err := m.restConfig()
			if err != nil || cfg.QPS != 5 || cfg.Burst != 10 {
				t.Errorf("rest config QPS %v burst %d, %v; want 5 and client-go's default burst, 10", cfg.QPS, cfg.Burst, err)
			}
		}},
		{input: "multicluster {\n endpoint https://10.0.0.1:6443\n apiserver_qps 50\n}", check: func(t *testing.T, m *Multicluster) {
			cfg, err := m.restConfig()
			if err != nil || cfg.Burst != 50 {
				t.Errorf("rest config burst %d, %v; want 50", cfg.Burst, err)
			}
		}},
		{input: "multicluster {\n local_zone EU-West-1A\n}", check: func(t *testing.T, m *Multicluster) {
			if m.localZone != "eu-west-1a" {
				t.Errorf("local_zone %q", m.localZone)
			}
		}},
		{input: "multicluster {\n cluster_selectors\n zonal\n}", check: func(t *testing.T, m *Multicluster) {
			if !m.clusterSel || !m.zonal {
				t.Errorf("cluster_selectors %v, zonal %v", m.clusterSel, m.zonal)
			}
		}},
		{input: "multicluster clusterset.local 10.0.0.0/8 {\n endpoint_ptr\n}", check: func(t *testing.T, m *Multicluster) {
			if !m.endpointPTR {
				t.Error("endpoint_ptr not set")
			}
		}},
		{input: "multicluster {\n cluster_id east.example.com\n prefer_local\n}", check: func(t *testing.T, m *Multicluster) {
			if m.clusterID != "east.example.com" || !m.preferLocal {
				t.Errorf("cluster_id %q, prefer_local %v", m.clusterID, m.preferLocal)
			}
		}},
		{input: "multicluster {\n deny_ranges 10.244.1.0/16 fd00:10::/64\n deny_ranges 192.0.2.7\n allow_namespaces kube-system openshift-*\n max_endpoints 500\n}",
			check: func(t *testing.T, m *Multicluster) {
				if fmt.Sprint(m.denyRanges) != "[10.244.0.0/16 fd00:10::/64 192.0.2.7/32]" ||
					fmt.Sprint(m.allowNS) != "[kube-system openshift-*]" || m.maxEndpoints != 500 {
					t.Errorf("deny %v, allow %v, max %d", m.denyRanges, m.allowNS, m.maxEndpoints)
				}
			}},
		{input: "multicluster {\n ns_address 10.96.0.10 fd00::a\n}", check: func(t *testing.T, m *Multicluster) {
			if fmt.Sprint(m.nsAddrs) != "[10.96.0.10 fd00::a]" || len(m.nsAddrs[0]) != 4 {
				t.Errorf("ns_address %v", m.nsAddrs)
			}
		}},
	} {
		m, err := parseInput(tc.input)
		if err != nil {
			t.Errorf("%q: %v", tc.input, err)
			continue
		}
		tc.check(t, m)
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		input, wantErr string
	}{
		{input: "multicluster {\n ns_address kube-dns\n}", wantErr: `Testfile:2 - Error during parsing: ns_address "kube-dns" is not an IP address`},
		{input: "multicluster {\n ns_address\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n cluster_id East\n}", wantErr: `Testfile:2 - Error during parsing: cluster_id "East" is not a cluster ID`},
		{input: "multicluster {\n cluster_id\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n cluster_id a b\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n prefer_local yes\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n endpoint_ptr yes\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n endpoint_ptr\n}", wantErr: "endpoint_ptr needs a reverse zone among ZONES"},
		{input: "multicluster a." + strings.Repeat("z", 51), wantErr: "Testfile:1 - Error during parsing: zone a." + strings.Repeat("z", 51) + ". is 54 characters long: at most 52"},
		{input: "multicluster .", wantErr: `Testfile:1 - Error during parsing: zone "." would make every name the plugin's`},
		{input: "multicluster clusterset.local . {\n}", wantErr: `zone "." would make every name the plugin's`},
		{input: "multicluster {\n cluster_selectors west\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n local_zone eu_west\n}", wantErr: `local_zone must be a zone name such as eu-west-1a (a DNS label), or node, not "eu_west"`},
		{input: "multicluster {\n local_zone node\n}", wantErr: "local_zone node reads the zone of the node named by NODE_NAME, which is not set"},
		{input: "multicluster {\n zonal pin\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n endpoint 10.0.0.1\n}", wantErr: `Testfile:2 - Error during parsing: endpoint must be a URL`},
		{input: "multicluster {\n tls a b\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n tls a b c\n}", wantErr: "tls needs endpoint"},
		{input: "multicluster {\n endpoint https://a:1\n kubeconfig k\n}", wantErr: "endpoint and kubeconfig cannot be used together"},
		{input: "multicluster {\n apiserver_qps 0\n}", wantErr: `apiserver_qps must be a positive whole number, not "0"`},
		{input: "multicluster {\n apiserver_burst many\n}", wantErr: `apiserver_burst must be a positive whole number`},
		{input: "multicluster {\n labels a=(\n}", wantErr: `labels: "a=(" is not a label selector`},
		{input: "multicluster {\n labels\n}", wantErr: "Wrong argument count"},
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
		{input: "multicluster {\n deny_ranges\n}", wantErr: "Testfile:2 - Error during parsing: Wrong argument count"},
		{input: "multicluster {\n deny_ranges 10.0.0.0/33\n}", wantErr: `Testfile:2 - Error during parsing: deny_ranges: "10.0.0.0/33" is neither a CIDR`},
		{input: "multicluster {\n deny_ranges pods\n}", wantErr: `deny_ranges: "pods" is neither a CIDR`},
		{input: "multicluster {\n allow_namespaces\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n allow_namespaces *\n}", wantErr: `Testfile:2 - Error during parsing: allow_namespaces: "*" is neither a namespace name nor a pattern`},
		{input: "multicluster {\n allow_namespaces Kube_System\n}", wantErr: `allow_namespaces: "Kube_System" is neither`},
		{input: "multicluster {\n max_endpoints 0\n}", wantErr: `Testfile:2 - Error during parsing: max_endpoints must be a positive whole number, not "0"`},
		{input: "multicluster {\n max_endpoints\n}", wantErr: "Wrong argument count"},
		{input: "multicluster {\n resyncperiod 5m\n}", wantErr: `Testfile:2 - Error during parsing: unknown option "resyncperiod"`},
		{input: "multicluster\nmulticluster", wantErr: "this plugin"},
	} {
		if _, err := parseInput(tc.input); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
			t.Errorf("%q: error %v, want %q", tc.input, err, tc.wantErr)
		}
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

// local_zone node reads the replica's Node once: its zone label, lower-case;
// none when the Node cannot be read or has no usable label.
func TestNodeZone(t *testing.T) {
	node := func(name, zone string) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{}}}
		if zone != "" {
			n.Labels[corev1.LabelTopologyZone] = zone
		}
		return n
	}
	kube := fake.NewClientset(node("n1", "EU-West-1a"), node("n2", ""), node("n3", "not a label"))
	for name, want := range map[string]string{"n1": "eu-west-1a", "n2": "", "n3": "", "gone": ""} {
		if got := nodeZone(kube, name); got != want {
			t.Errorf("node %s: zone %q, want %q", name, got, want)
		}
	}
	t.Setenv("NODE_NAME", "n1")
	m, err := parseInput("multicluster {\n local_zone node\n}")
	if err != nil || m.localZone != localZoneFromNode {
		t.Errorf("local_zone node with NODE_NAME set: %q, %v", m.localZone, err)
	}
}
