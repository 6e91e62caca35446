package main

import (
	"math"
	"reflect"
	"slices"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestExpectedA: a ClusterSetIP import answers its IPv4 address; a headless
// one the ready (or nil ready) addresses of its namespace's slices labelled
// with its name and a cluster, once each, sorted, of the clusters it lists
// if it lists any (the README's "listed clusters"); one without any, and a
// slice's service without an import, nothing (NXDOMAIN). The imports are
// v1alpha2 objects as the soak's writers make them (harness.Import).
func TestExpectedA(t *testing.T) {
	im := func(ns, name string, headless bool, ips ...string) unstructured.Unstructured {
		typ := cond(headless, "Headless", "ClusterSetIP")
		return *harness.Import{Namespace: ns, Name: name, Type: typ, IPs: ips, Ports: []corev1.ServicePort{harness.TCP("http", 80)}}.Object(cache.V1alpha2)
	}
	listing := func(u unstructured.Unstructured, clusters ...string) unstructured.Unstructured {
		u.Object["clusters"] = harness.Import{Clusters: clusters}.Object(cache.V1alpha2).Object["clusters"]
		return u
	}
	es := func(ns, svc, cluster string, typ discoveryv1.AddressType, eps ...discoveryv1.Endpoint) discoveryv1.EndpointSlice {
		labels := map[string]string{mcsv1beta1.LabelServiceName: svc}
		if cluster != "" {
			labels[mcsv1beta1.LabelSourceCluster] = cluster
		}
		return discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Labels: labels}, AddressType: typ, Endpoints: eps}
	}
	ep := func(ip string, ready *bool) discoveryv1.Endpoint {
		return discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ready}}
	}
	v4, v6 := discoveryv1.AddressTypeIPv4, discoveryv1.AddressTypeIPv6
	got, err := expectedA([]unstructured.Unstructured{
		im("a", "ip", false, "10.0.0.1", "fd00::1"),
		im("a", "hl", true),
		im("b", "hl", true),
		im("a", "none", true),
		im("a", "v6", false, "fd00::2"),
		listing(im("c", "hl", true), "c1", "c3"),
		listing(im("c", "ip", false, "10.0.0.3"), "c9"), // a ClusterSetIP import's clusters do not matter
	}, []discoveryv1.EndpointSlice{
		es("a", "hl", "c1", v4, ep("10.1.0.2", ptr.To(true)), ep("10.1.0.1", nil), ep("10.1.0.9", ptr.To(false))),
		es("a", "hl", "c2", v4, ep("10.1.0.1", ptr.To(true)), ep("10.1.0.3", nil)),
		es("a", "hl", "", v4, ep("10.1.0.4", nil)),   // no cluster
		es("a", "hl", "c3", v6, ep("fd00::3", nil)),  // not IPv4
		es("a", "ip", "c1", v4, ep("10.1.0.5", nil)), // a ClusterSetIP import's
		es("a", "none", "c1", v4, ep("10.1.0.6", ptr.To(false))),
		es("a", "gone", "c1", v4, ep("10.1.0.7", nil)), // no import
		es("b", "hl", "c1", v4, ep("10.2.0.1", nil)),
		es("c", "hl", "c1", v4, ep("10.3.0.1", nil)),
		es("c", "hl", "c2", v4, ep("10.3.0.2", nil)), // c2 is not listed
		es("c", "hl", "c3", v4, ep("10.3.0.3", nil)),
	})
	want := map[string][]string{
		"ip.a.svc.clusterset.local.": {"10.0.0.1"},
		"hl.a.svc.clusterset.local.": {"10.1.0.1", "10.1.0.2", "10.1.0.3"},
		"hl.b.svc.clusterset.local.": {"10.2.0.1"},
		"hl.c.svc.clusterset.local.": {"10.3.0.1", "10.3.0.3"},
		"ip.c.svc.clusterset.local.": {"10.0.0.3"},
	}
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Errorf("expectedA = %v, %v, want %v", got, err, want)
	}
	bad := im("a", "bad", false)
	bad.Object["ips"] = "10.0.0.1" // not a list
	if _, err := expectedA([]unstructured.Unstructured{bad}, nil); err == nil {
		t.Error("expectedA of an import whose ips is not a list: no error")
	}
}

// TestAnswerMismatch: the addresses match as a set in any order; NXDOMAIN
// is wanted exactly when no address is; anything else is told.
func TestAnswerMismatch(t *testing.T) {
	msg := func(rcode int, ips ...string) *dns.Msg {
		m := &dns.Msg{MsgHdr: dns.MsgHdr{Rcode: rcode}}
		for _, ip := range ips {
			rr, err := dns.NewRR("x.clusterset.local. 5 IN A " + ip)
			if err != nil {
				t.Fatal(err)
			}
			m.Answer = append(m.Answer, rr)
		}
		return m
	}
	for _, c := range []struct {
		r    *dns.Msg
		want []string
		ok   bool
	}{
		{msg(dns.RcodeSuccess, "10.0.0.2", "10.0.0.1"), []string{"10.0.0.1", "10.0.0.2"}, true},
		{msg(dns.RcodeNameError), nil, true},
		{msg(dns.RcodeSuccess, "10.0.0.1"), []string{"10.0.0.1", "10.0.0.2"}, false},
		{msg(dns.RcodeSuccess, "10.0.0.1"), nil, false},
		{msg(dns.RcodeSuccess), nil, false}, // NODATA is not NXDOMAIN
		{msg(dns.RcodeNameError), []string{"10.0.0.1"}, false},
		{msg(dns.RcodeServerFailure, "10.0.0.1"), []string{"10.0.0.1"}, false},
	} {
		if d := answerMismatch(c.r, "x.clusterset.local.", c.want); (d == "") != c.ok {
			t.Errorf("answerMismatch(%v, %v) = %q, want ok %v", c.r.Answer, c.want, d, c.ok)
		}
	}
}

// TestSoakVerdicts: each figure's change is relative to the first sample.
func TestSoakVerdicts(t *testing.T) {
	first := soakSample{Values: [6]float64{100, 50, 20, 10, 40, 12}}
	last := soakSample{Values: [6]float64{104, 53, 20, 9, 40, 13}}
	got := soakVerdicts(first, last)
	want := []float64{0.04, 0.06, 0, -0.1, 0, 1.0 / 12}
	for k := range want {
		if math.Abs(got[k]-want[k]) > 1e-9 {
			t.Errorf("%s: change %v, want %v", soakFigures[k], got[k], want[k])
		}
	}
}

// TestAddresses: what the propagation's watch reads from an event: a
// ServiceImport's ips in either shape, an EndpointSlice's addresses.
func TestAddresses(t *testing.T) {
	im := harness.Import{Namespace: "a", Name: "x", Type: "ClusterSetIP", IPs: []string{"10.0.0.1", "10.0.0.2"}}
	es, err := runtime.DefaultUnstructuredConverter.ToUnstructured(&discoveryv1.EndpointSlice{Endpoints: []discoveryv1.Endpoint{
		{Addresses: []string{"10.1.0.1"}}, {Addresses: []string{"10.1.0.2", "10.1.0.3"}}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		u    *unstructured.Unstructured
		want []string
	}{
		{im.Object(cache.V1alpha2), []string{"10.0.0.1", "10.0.0.2"}},
		{im.Object(cache.V1alpha1), []string{"10.0.0.1", "10.0.0.2"}},
		{&unstructured.Unstructured{Object: es}, []string{"10.1.0.1", "10.1.0.2", "10.1.0.3"}},
	} {
		if got := addresses(tc.u); !slices.Equal(got, tc.want) {
			t.Errorf("addresses(%s) = %v, want %v", tc.u.GetAPIVersion(), got, tc.want)
		}
	}
}
