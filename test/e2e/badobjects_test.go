package e2e

import (
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// Unusable EndpointSlices on the real API server: FQDN slices, no
// source-cluster label, a cluster ID that is no DNS name, a slice for an
// import that does not exist. None may crash the plugin, make a malformed
// answer, or disturb the names that are fine.
func TestBadEndpointSlices(t *testing.T) {
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bad\n")
	apply(t, `apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: hl, namespace: bad}
spec:
  type: Headless
  ports: [{name: http, protocol: TCP, port: 80}]
`)
	slice := func(name, svc, labels, addrType, addr string) string {
		return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `
  namespace: bad
  labels: {multicluster.kubernetes.io/service-name: ` + svc + labels + `}
addressType: ` + addrType + `
endpoints:
- addresses: ["` + addr + `"]
  hostname: h-` + name + `
`
	}
	apply(t, slice("good", "hl", ", multicluster.kubernetes.io/source-cluster: west", "IPv4", "10.90.0.1"))
	c := startPluginDNS(t)
	eventually(t, c, n("hl.bad"), "A", want{Answer: []string{a(n("hl.bad"), "10.90.0.1")}})

	apply(t, slice("fqdn", "hl", ", multicluster.kubernetes.io/source-cluster: west", "FQDN", "example.org"))
	apply(t, slice("nocluster", "hl", "", "IPv4", "10.90.0.2"))
	apply(t, slice("oddcluster", "hl", ", multicluster.kubernetes.io/source-cluster: West_1", "IPv4", "10.90.0.3"))
	apply(t, slice("orphan", "nosuch", ", multicluster.kubernetes.io/source-cluster: west", "IPv4", "10.90.0.4"))
	apply(t, slice("late", "hl", ", multicluster.kubernetes.io/source-cluster: east", "IPv4", "10.90.0.5"))
	// The last good slice shows, so every slice before it has been seen.
	eventually(t, c, n("hl.bad"), "A", want{Answer: []string{a(n("hl.bad"), "10.90.0.1"), a(n("hl.bad"), "10.90.0.5")}})
	expect(t, c, defaultTTL, n("h-good.west.hl.bad"), "A", want{Answer: []string{a(n("h-good.west.hl.bad"), "10.90.0.1")}})
	expect(t, c, defaultTTL, n("h-oddcluster.west_1.hl.bad"), "A", nxdomain())
	expect(t, c, defaultTTL, n("nosuch.bad"), "A", nxdomain())
	expect(t, c, defaultTTL, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	r := dig(t, c, n("hl.bad"), "SRV")
	for _, rr := range r.Answer {
		if strings.Contains(rr.String(), "fqdn") || strings.Contains(rr.String(), "nocluster") || strings.Contains(rr.String(), "oddcluster") {
			t.Errorf("an unusable slice reached the answers: %s", rr)
		}
	}
	if len(r.Answer) != 2 {
		t.Errorf("hl.bad SRV: %d records, want 2 (h-good.west, h-late.east):\n%s", len(r.Answer), r)
	}
	if strings.Contains(c.Output(), "panic") {
		t.Errorf("panic:\n%s", c.Output())
	}
}

// Unusable ServiceImports on the real API server. The v1alpha2 schema rejects
// them (TestDeployServiceImportSchema), but the spec/status shape's schema
// (mcs-api's v1alpha1 and v1beta1) stores them: a control plane of its own
// (they would disturb the shared one's answers) with deploy/crds' versions,
// v1beta1 the storage version, the objects written through v1beta1 as
// today's controllers write them and read with no options. Each gets the
// behaviour the README's table gives, and the good name beside them keeps
// answering.
func TestBadServiceImports(t *testing.T) {
	kubeconfig, create := badImports(t, projectCRD(t, "v1beta1", "v1alpha1", "v1alpha2"))
	port := func(name string, p int64) map[string]any {
		return map[string]any{"name": name, "protocol": "TCP", "port": p}
	}
	create("notip", map[string]any{"type": "ClusterSetIP", "ips": []any{"ten", "10.91.0.1"}, "ports": []any{port("http", 80)}})
	create("twofour", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.91.0.2", "10.91.0.3"}, "ports": []any{port("http", 80)}})
	create("noips", map[string]any{"type": "ClusterSetIP", "ports": []any{port("http", 80)}})
	create("hlips", map[string]any{"type": "Headless", "ips": []any{"10.91.0.4"}, "ports": []any{port("http", 80)}})
	create("ports", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.91.0.5"}, "ports": []any{
		port("Bad_Name", 81), port("zero", 0), port("big", 70000), port("http", 80), port("http", 8080), map[string]any{"port": int64(82)}}})
	create("noports", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.91.0.6"}, "ports": []any{}})
	create("good", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.91.0.9"}, "ports": []any{port("http", 80)}})

	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Plugins: harness.MulticlusterBlock(kubeconfig)})
	eventually(t, c, n("good.bad"), "A", want{Answer: []string{a(n("good.bad"), "10.91.0.9")}})
	for _, tc := range []struct {
		name, qtype string
		want        want
	}{
		{n("notip.bad"), "A", want{Answer: []string{a(n("notip.bad"), "10.91.0.1")}}},     // the non-IP is left out
		{n("twofour.bad"), "A", want{Answer: []string{a(n("twofour.bad"), "10.91.0.2")}}}, // the first of a family
		{n("noips.bad"), "A", nxdomain()},                                                 // nothing to answer with
		{n("hlips.bad"), "A", nxdomain()},                                                 // headless: ips ignored, no endpoints
		{n("ports.bad"), "SRV", want{Answer: []string{srv(n("ports.bad"), 100, 80, n("ports.bad"))}}},
		{n("_zero._tcp.ports.bad"), "SRV", nxdomain()},
		{n("noports.bad"), "A", want{Answer: []string{a(n("noports.bad"), "10.91.0.6")}}},
		{n("noports.bad"), "SRV", nodata()},
		{n("good.bad"), "SRV", want{Answer: []string{srv(n("good.bad"), 100, 80, n("good.bad"))}}},
	} {
		expect(t, c, defaultTTL, tc.name, tc.qtype, tc.want)
	}
	for _, reason := range []string{"bad_ip", "extra_ip", "no_ips", "headless_with_ips", "bad_port_name", "bad_port", "duplicate_port"} {
		if !strings.Contains(c.Output(), ": "+reason+": ") {
			t.Errorf("no log line for %s", reason)
		}
	}
	// Two ports out of range in one write: one line (README: logged once
	// per object write).
	if got := strings.Count(c.Output(), "/ports: bad_port: "); got != 1 {
		t.Errorf("%d log lines for ports' bad_port, want 1:\n%s", got, c.Output())
	}
	if strings.Contains(c.Output(), "panic") {
		t.Errorf("panic:\n%s", c.Output())
	}
}

// ServiceImports that do not fit their version's Go type, which only a CRD
// of another schema lets the API server hold: here v1beta1 keeps any spec.
// The plugin decodes each object on its own (cache/typed.go), so the ones
// that do not decode are left out, logged as decode_error, and every other
// object is answered: listed at start, and watched after a bad one.
func TestUndecodableServiceImports(t *testing.T) {
	crd := projectCRD(t, "v1beta1")
	crd.Spec.Versions[0].Schema.OpenAPIV3Schema.Properties["spec"] = apiextensionsv1.JSONSchemaProps{
		Type: "object", XPreserveUnknownFields: ptr.To(true)}
	kubeconfig, create := badImports(t, crd)
	good := func(ip string) map[string]any {
		return map[string]any{"type": "ClusterSetIP", "ips": []any{ip},
			"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}}
	}
	create("before", good("10.92.0.1"))
	create("ipstring", map[string]any{"type": "ClusterSetIP", "ips": "10.92.0.2"})
	create("portword", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.92.0.3"},
		"ports": []any{map[string]any{"name": "http", "port": "eighty"}}})

	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Plugins: harness.MulticlusterBlock(kubeconfig)})
	eventually(t, c, n("before.bad"), "A", want{Answer: []string{a(n("before.bad"), "10.92.0.1")}})
	create("typenumber", map[string]any{"type": int64(1), "ips": []any{"10.92.0.4"}})
	create("after", good("10.92.0.5"))
	eventually(t, c, n("after.bad"), "A", want{Answer: []string{a(n("after.bad"), "10.92.0.5")}})
	for _, name := range []string{"ipstring", "portword", "typenumber"} {
		expect(t, c, defaultTTL, n(name+".bad"), "A", nxdomain())
	}
	expect(t, c, defaultTTL, n("before.bad"), "A", want{Answer: []string{a(n("before.bad"), "10.92.0.1")}})
	for _, name := range []string{"ipstring", "portword", "typenumber"} {
		if got := strings.Count(c.Output(), "bad/"+name+": decode_error"); got != 1 {
			t.Errorf("%s: %d decode_error log lines, want 1:\n%s", name, got, c.Output())
		}
	}
	if strings.Contains(c.Output(), "panic") {
		t.Errorf("panic:\n%s", c.Output())
	}
}

// badImports starts a control plane of its own with crd, namespace "bad" and
// the plugin's identity, whose kubeconfig it returns with a function that
// writes the v1beta1 ServiceImport "bad/<name>" with spec, as controllers
// write them.
func badImports(t *testing.T, crd *apiextensionsv1.CustomResourceDefinition) (string, func(name string, spec map[string]any)) {
	menv, err := harness.Start(harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = menv.Stop() })
	ctx, cancel := harness.Context(3 * time.Minute)
	t.Cleanup(cancel)
	id, err := menv.PluginIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := menv.ApplyYAML(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bad\n"); err != nil {
		t.Fatal(err)
	}
	create := func(name string, spec map[string]any) {
		t.Helper()
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": cache.ServiceImports(cache.V1beta1).GroupVersion().String(), "kind": "ServiceImport",
			"metadata": map[string]any{"namespace": "bad", "name": name}, "spec": spec,
		}}
		if _, err := menv.Dynamic.Resource(cache.ServiceImports(cache.V1beta1)).Namespace("bad").Create(ctx, u, metav1.CreateOptions{}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	return id.Kubeconfig, create
}
