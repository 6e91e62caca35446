package e2e

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// The DNS expectations of the mcs-api conformance suite (sigs.k8s.io/mcs-api,
// tag conformance/v0.5.0: the DNS-labelled specs of clusterip_service_dns.go
// and headless_service_dns.go), asked with dig of the plugin with no options.
//
// The suite deploys its "hello" Service (ports tcp 42/TCP and udp 42/UDP,
// ClientIP session affinity, PreferDualStack) in a namespace of its own on
// one cluster, exports it, and lets the MCS implementation write the
// ServiceImport and the MCS EndpointSlices, which it then reads through
// multicluster.x-k8s.io/v1beta1. Here the test writes those objects as such a
// controller does: the ServiceImport through v1beta1 (spec, then
// status.clusters through the status subresource), one EndpointSlice per
// address family labelled with the service name, the source cluster and a
// managing controller that is not Kubernetes' own.

const (
	confService   = "hello"
	confClusterID = "cluster-a" // the exporting cluster, clients[0] in the suite
	confManagedBy = "mcs-controller.example.com"
)

var confImportGVR = cache.ServiceImports("v1beta1")

// confPortsYAML are hello's ports, indented for a list under a key.
const confPortsYAML = `
  - {name: tcp, protocol: TCP, port: 42}
  - {name: udp, protocol: UDP, port: 42}`

// confEndpoint is one endpoint of hello's EndpointSlices.
type confEndpoint = mcsEndpoint

// confPorts are hello's ports, as confPortsYAML.
var confPorts = []corev1.ServicePort{
	{Name: "tcp", Protocol: corev1.ProtocolTCP, Port: 42},
	{Name: "udp", Protocol: corev1.ProtocolUDP, Port: 42},
}

// confImport writes hello's ServiceImport in ns through v1beta1, as an MCS
// controller does.
func confImport(t *testing.T, ns, typ string, ips []string) {
	t.Helper()
	writeImport(t, harness.Import{Namespace: ns, Name: confService, Type: typ, IPs: ips, IPFamilies: []string{"IPv4", "IPv6"},
		Ports: confPorts, Clusters: []string{confClusterID}, More: map[string]any{
			"sessionAffinity":       "ClientIP",
			"sessionAffinityConfig": map[string]any{"clientIP": map[string]any{"timeoutSeconds": int64(10)}},
		}})
}

// confSlice writes one MCS EndpointSlice of hello in ns, from confClusterID.
func confSlice(t *testing.T, ns, name, addressType string, eps []confEndpoint) {
	t.Helper()
	applyMCSSlice(t, ns, name, confService, confClusterID, confManagedBy, addressType, confPorts, eps)
}

// confNamespace creates a namespace of the spec's own, as the suite's
// mcs-conformance-<n> ones.
func confNamespace(t *testing.T, ns string) {
	t.Helper()
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
}

// confEndpointName is the label the suite derives for an endpoint: its
// hostname, else its address with dots or colons as dashes.
func confEndpointName(ep confEndpoint) string { return ep.label() }

// confRecord is the A or AAAA record of ep's address at name.
func confRecord(name string, ep confEndpoint) string {
	if strings.Contains(ep.addr, ":") {
		return aaaa(name, ep.addr)
	}
	return a(name, ep.addr)
}

// TestConformance runs the suite's DNS specs against one CoreDNS that, like
// a cluster's, serves cluster.local with the kubernetes plugin and
// clusterset.local with ours (no options), each the other's neighbour in one
// server block. It runs beside the other tests: its objects are in
// namespaces of its own.
func TestConformance(t *testing.T) {
	t.Parallel()
	admin := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := env.WriteAdminKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Zones: []string{"clusterset.local", "cluster.local"},
		Plugins: strings.Replace(harness.MulticlusterBlock(plugin.Kubeconfig), "multicluster {", "multicluster clusterset.local {", 1) +
			"kubernetes cluster.local {\n\tkubeconfig " + admin + "\n}\n",
	})
	if !strings.Contains(c.Corefile, "multicluster clusterset.local {") {
		t.Fatalf("the Corefile does not give the plugin its zone:\n%s", c.Corefile)
	}

	t.Run("ClusterSetIP", func(t *testing.T) { confClusterSetIP(t, c) })
	t.Run("Headless", func(t *testing.T) { confHeadless(t, c) })
	t.Run("HeadlessStatefulSet", func(t *testing.T) { confStatefulSet(t, c) })
}

// confClusterSetIP: clusterip_service_dns.go. The import's ClusterSetIPs
// answer A and AAAA; the service name has exactly one SRV record (ports
// tcp/42 and udp/42 are one (target, port)); and the cluster.local name of
// the local hello Service is the kubernetes plugin's, its cluster IP, not
// the ClusterSetIP.
func confClusterSetIP(t *testing.T, c *harness.CoreDNS) {
	const ns = "conf-clusterip"
	ips := []string{"10.43.0.42", "fd00:43::42"}
	svc := n(confService + "." + ns)
	confNamespace(t, ns)
	local := apply(t, fmt.Sprintf(`apiVersion: v1
kind: Service
metadata: {name: %[1]s, namespace: %[2]s}
spec:
  selector: {app: %[1]s}
  ports:%[3]s
  sessionAffinity: ClientIP
  sessionAffinityConfig: {clientIP: {timeoutSeconds: 10}}
  ipFamilyPolicy: PreferDualStack
`, confService, ns, confPortsYAML))
	confImport(t, ns, "ClusterSetIP", ips)
	// Implementations write MCS EndpointSlices for ClusterSetIP services too
	// (the suite's EndpointSlice spec expects them); they change no answer.
	confSlice(t, ns, confService+"-"+confClusterID+"-ipv4", "IPv4", []confEndpoint{{addr: "10.43.1.1", ready: "true"}})
	confSlice(t, ns, confService+"-"+confClusterID+"-ipv6", "IPv6", []confEndpoint{{addr: "fd00:43:1::1", ready: "true"}})
	glue := []string{a(svc, ips[0]), aaaa(svc, ips[1])}

	// A and AAAA: each ClusterSetIP, by its family.
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, ips[0])}})
	expect(t, c, defaultTTL, svc, "AAAA", want{Answer: []string{aaaa(svc, ips[1])}})

	// SRV at the service name: exactly one record, port 42, the service
	// name as target; the per-port names one each.
	expect(t, c, defaultTTL, svc, "SRV", want{Answer: []string{srv(svc, 100, 42, svc)}, Additional: glue})
	for _, p := range []string{"_tcp._tcp", "_udp._udp"} {
		name := n(p + "." + confService + "." + ns)
		expect(t, c, defaultTTL, name, "SRV", want{Answer: []string{srv(name, 100, 42, svc)}, Additional: glue})
	}

	// cluster.local beside us: the local Service's cluster IPs, answered
	// by the kubernetes plugin.
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	stored, err := env.Clientset.CoreV1().Services(ns).Get(ctx, local[0].GetName(), metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	clusterIPs := stored.Spec.ClusterIPs
	if len(clusterIPs) == 0 {
		t.Fatalf("the local Service %s/%s has no cluster IP: %+v", ns, confService, stored.Spec)
	}
	localName := confService + "." + ns + ".svc.cluster.local."
	for _, ip := range clusterIPs {
		if slices.Contains(ips, ip) {
			t.Fatalf("the local Service's cluster IP %s is a ClusterSetIP too; the check would prove nothing", ip)
		}
		qtype, rr := "A", a(localName, ip)
		if strings.Contains(ip, ":") {
			qtype, rr = "AAAA", aaaa(localName, ip)
		}
		harness.Eventually(t, syncWithin, func() error {
			r, err := c.Dig(localName, qtype)
			if err != nil {
				return err
			}
			if got := contract.Briefs(r.Answer); r.Rcode != "NOERROR" || !r.AA() || !slices.Equal(got, []string{rr}) {
				return fmt.Errorf("%s %s: want the local cluster IP, %q, from the kubernetes plugin:\n%s", localName, qtype, rr, r)
			}
			return nil
		})
	}
	// The cluster.local zone is the kubernetes plugin's: its SOA, not ours.
	r := dig(t, c, "cluster.local.", "SOA")
	if len(r.Answer) != 1 || !strings.HasPrefix(contract.Brief(r.Answer[0]), "cluster.local. soa ") {
		t.Errorf("cluster.local. SOA is not the kubernetes plugin's:\n%s", r)
	}
	// And ours still answers its own zone from the same server.
	expect(t, c, defaultTTL, svc, "A", want{Answer: []string{a(svc, ips[0])}})
}

// confClusterLocalNXDOMAIN checks that name, in cluster.local, is NXDOMAIN
// with cluster.local's SOA: the kubernetes plugin's answer.
func confClusterLocalNXDOMAIN(t *testing.T, c *harness.CoreDNS, name string) {
	t.Helper()
	r := dig(t, c, name, "A")
	if r.Rcode != "NXDOMAIN" || len(r.Authority) != 1 || !strings.HasPrefix(contract.Brief(r.Authority[0]), "cluster.local. soa ") {
		t.Errorf("%s A: want NXDOMAIN with the cluster.local SOA:\n%s", name, r)
	}
}

// confHeadless: headless_service_dns.go with the suite's Deployment (two
// replicas, no hostnames), dual-stack, plus an endpoint that is not ready.
// A and AAAA are exactly the ready addresses (a ready condition that is
// unset counts as ready); the service name has exactly one SRV record per
// ready endpoint, port 42, each targeting that endpoint's name.
func confHeadless(t *testing.T, c *harness.CoreDNS) {
	const ns = "conf-headless"
	svc := n(confService + "." + ns)
	v4 := []confEndpoint{{addr: "10.44.0.1", ready: "true"}, {addr: "10.44.0.2"}, {addr: "10.44.0.3", ready: "false"}}
	v6 := []confEndpoint{{addr: "fd00:44::1", ready: "true"}, {addr: "fd00:44::2"}, {addr: "fd00:44::3", ready: "false"}}
	confNamespace(t, ns)
	confImport(t, ns, "Headless", nil)
	confSlice(t, ns, confService+"-"+confClusterID+"-ipv4", "IPv4", v4)
	confSlice(t, ns, confService+"-"+confClusterID+"-ipv6", "IPv6", v6)

	ready := []confEndpoint{v4[0], v4[1], v6[0], v6[1]}
	var glue []string
	for _, ep := range ready {
		glue = append(glue, confRecord(n(confEndpointName(ep)+"."+confClusterID+"."+confService+"."+ns), ep))
	}
	srvAt := func(owner string) []string {
		var out []string
		for _, ep := range ready {
			out = append(out, srv(owner, 100/len(ready), 42, n(confEndpointName(ep)+"."+confClusterID+"."+confService+"."+ns)))
		}
		return out
	}

	eventually(t, c, svc, "A", want{Answer: []string{a(svc, v4[0].addr), a(svc, v4[1].addr)}})
	expect(t, c, defaultTTL, svc, "AAAA", want{Answer: []string{aaaa(svc, v6[0].addr), aaaa(svc, v6[1].addr)}})
	for _, ep := range []confEndpoint{v4[2], v6[2]} {
		expect(t, c, defaultTTL, n(confEndpointName(ep)+"."+confClusterID+"."+confService+"."+ns), "A", nxdomain())
	}

	expect(t, c, defaultTTL, svc, "SRV", want{Answer: srvAt(svc), Additional: glue})
	for _, p := range []string{"_tcp._tcp", "_udp._udp"} {
		name := n(p + "." + confService + "." + ns)
		expect(t, c, defaultTTL, name, "SRV", want{Answer: srvAt(name), Additional: glue})
	}
	// Imported only, with no local Service: no cluster.local name, and the
	// NXDOMAIN is the kubernetes plugin's.
	confClusterLocalNXDOMAIN(t, c, confService+"."+ns+".svc.cluster.local.")
}

// confStatefulSet: headless_service_dns.go with the suite's StatefulSet
// hello-ss (two replicas, hostnames hello-ss-0 and hello-ss-1), dual-stack.
// <hostname>.<clusterid>.<service> answers each endpoint's own address, A
// and AAAA by family. The suite stops there; the service name's SRV
// records, one per (target, port), are one per hostname.
func confStatefulSet(t *testing.T, c *harness.CoreDNS) {
	const ns = "conf-statefulset"
	svc := n(confService + "." + ns)
	v4 := []confEndpoint{{addr: "10.45.0.1", hostname: "hello-ss-0", ready: "true"}, {addr: "10.45.0.2", hostname: "hello-ss-1", ready: "true"}}
	v6 := []confEndpoint{{addr: "fd00:45::1", hostname: "hello-ss-0", ready: "true"}, {addr: "fd00:45::2", hostname: "hello-ss-1", ready: "true"}}
	confNamespace(t, ns)
	confImport(t, ns, "Headless", nil)
	confSlice(t, ns, confService+"-"+confClusterID+"-ipv4", "IPv4", v4)
	confSlice(t, ns, confService+"-"+confClusterID+"-ipv6", "IPv6", v6)

	eventually(t, c, svc, "A", want{Answer: []string{a(svc, v4[0].addr), a(svc, v4[1].addr)}})
	var glue, targets []string
	for _, eps := range [][]confEndpoint{v4, v6} {
		for _, ep := range eps {
			name := n(ep.hostname + "." + confClusterID + "." + confService + "." + ns)
			qtype := "A"
			if strings.Contains(ep.addr, ":") {
				qtype = "AAAA"
			}
			expect(t, c, defaultTTL, name, qtype, want{Answer: []string{confRecord(name, ep)}})
			glue = append(glue, confRecord(name, ep))
			if !slices.Contains(targets, name) {
				targets = append(targets, name)
			}
		}
	}
	var records []string
	for _, target := range targets {
		records = append(records, srv(svc, 100/len(targets), 42, target))
	}
	expect(t, c, defaultTTL, svc, "SRV", want{Answer: records, Additional: glue})
}
