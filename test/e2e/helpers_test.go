package e2e

import (
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

const (
	apex       = contract.Apex
	defaultTTL = contract.TTL
	// syncWithin bounds how long a change in the API server may take to
	// show in answers.
	syncWithin = 30 * time.Second
)

// want is what an answer must be; the contract package checks it.
type want = contract.Want

// Short names for the contract's helpers, which the tests use everywhere.
var (
	n        = contract.N
	a        = contract.A
	aaaa     = contract.AAAA
	srv      = contract.SRV
	nxdomain = contract.NXDOMAIN
	nodata   = contract.NODATA
)

// dig asks c, failing the test when dig itself fails.
func dig(t testing.TB, c *harness.CoreDNS, name, qtype string, extra ...string) *harness.DigResult {
	t.Helper()
	r, err := c.Dig(name, qtype, extra...)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// expect checks one answer now; the table test runs once the stack is synced.
func expect(t testing.TB, c *harness.CoreDNS, ttl uint32, name, qtype string, w want, extra ...string) {
	t.Helper()
	r := dig(t, c, name, qtype, extra...)
	if err := w.Check(r.Msg(), ttl); err != nil {
		t.Errorf("%s %s:\n%v\n%s", name, qtype, err, r)
	}
}

// eventually waits until c's answer to name/qtype is w; changes in the API
// server reach answers through watches, so tests of changes poll.
func eventually(t testing.TB, c *harness.CoreDNS, name, qtype string, w want) {
	t.Helper()
	c.WaitAnswer(t, syncWithin, name, qtype, w)
}

// startPluginDNS runs CoreDNS with the multicluster plugin reading the API
// server as the plugin's least-privilege identity.
func startPluginDNS(t testing.TB, options ...string) *harness.CoreDNS {
	t.Helper()
	return harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig, options...),
	})
}

// mcsEndpoint is one endpoint of an MCS EndpointSlice a test writes: ready
// is "true", "false" or "" (the condition unset, which counts as ready).
type mcsEndpoint struct {
	addr, hostname, ready string
}

// label is the endpoint's DNS label under its cluster: its hostname, else
// its address with dots or colons as dashes.
func (ep mcsEndpoint) label() string {
	if ep.hostname != "" {
		return ep.hostname
	}
	return strings.NewReplacer(".", "-", ":", "-").Replace(ep.addr)
}

// endpoint is ep as an EndpointSlice holds it.
func (ep mcsEndpoint) endpoint() discoveryv1.Endpoint {
	e := harness.Endpoint(ep.addr, ep.hostname, ep.ready == "true")
	if ep.ready == "" {
		e.Conditions.Ready = nil
	}
	return e
}

// applyMCSSlice writes an MCS EndpointSlice: name in ns, for service, from
// cluster, managed by managedBy, of addressType, with ports and the
// endpoints eps.
func applyMCSSlice(t *testing.T, ns, name, service, cluster, managedBy, addressType string, ports []corev1.ServicePort, eps []mcsEndpoint) {
	t.Helper()
	applyObjects(t, sliceObject(t, mcsSlice(ns, name, service, cluster, managedBy, addressType, ports, eps)))
}

// mcsSlice is the MCS EndpointSlice applyMCSSlice writes.
func mcsSlice(ns, name, service, cluster, managedBy, addressType string, ports []corev1.ServicePort, eps []mcsEndpoint) *discoveryv1.EndpointSlice {
	es := harness.MCSSlice(ns, name, service, cluster, managedBy, ports)
	es.AddressType = discoveryv1.AddressType(addressType)
	for _, ep := range eps {
		es.Endpoints = append(es.Endpoints, ep.endpoint())
	}
	return es
}

// sliceObject is es as an object to apply.
func sliceObject(t testing.TB, es *discoveryv1.EndpointSlice) *unstructured.Unstructured {
	t.Helper()
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(es)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetAPIVersion("discovery.k8s.io/v1")
	u.SetKind("EndpointSlice")
	return u
}

// writeImport writes im through v1beta1 as an MCS controller does: the
// object, then its clusters through the status subresource (a create drops
// status). It deletes it when the test ends.
func writeImport(t *testing.T, im harness.Import) {
	t.Helper()
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	ri := env.Dynamic.Resource(confImportGVR).Namespace(im.Namespace)
	t.Cleanup(func() { deleteQuietly(ri, im.Name) })
	stored, err := env.Apply(ctx, im.Object("v1beta1"))
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Clusters) == 0 {
		return
	}
	stored.Object["status"] = im.Object("v1beta1").Object["status"]
	if _, err := ri.UpdateStatus(ctx, stored, metav1.UpdateOptions{}); err != nil {
		t.Fatalf("writing the status of ServiceImport %s/%s: %v", im.Namespace, im.Name, err)
	}
}

// noSkipEnv names the variable under which no test may be skipped:
// hack/test.sh sets it to 1 (and CI runs hack/test.sh), so that a tool,
// privilege or binary the machine lacks fails the test rather than hiding
// it. Every test that would skip for want of one asks noSkip, through
// missing or directly.
const noSkipEnv = "MULTICLUSTER_NO_SKIP"

// noSkip reports whether noSkipEnv is set to anything but the empty string.
func noSkip() bool { return os.Getenv(noSkipEnv) != "" }

// missing ends the test for want of what the machine lacks; the message
// says what, and how to get it (apt-get install ..., run as root). Under
// noSkip the test fails with it; elsewhere it is skipped with it.
func missing(t testing.TB, format string, args ...any) {
	t.Helper()
	if noSkip() {
		t.Fatalf(format+" ("+noSkipEnv+" is set: nothing may be skipped)", args...)
	}
	t.Skipf(format, args...)
}

// sliceController is the manager kube-controller-manager's EndpointSlice
// controller writes on the slices of a Service.
const sliceController = "endpointslice-controller.k8s.io"

// serviceSlice is an EndpointSlice of the local Service ns/service, written
// by managedBy (sliceController, as kube-controller-manager writes them, or
// another), with one ready endpoint per address: what proves, or fails to
// prove, that an endpoint claiming the local cluster is its.
func serviceSlice(ns, name, service, managedBy string, ports []corev1.ServicePort, addrs ...string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			discoveryv1.LabelServiceName: service,
			discoveryv1.LabelManagedBy:   managedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       harness.SlicePorts(ports),
	}
	for _, addr := range addrs {
		es.Endpoints = append(es.Endpoints, harness.Endpoint(addr, "", true))
	}
	return es
}
