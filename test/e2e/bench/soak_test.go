package main

import (
	"math"
	"net/netip"
	"reflect"
	"testing"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/cache"
)

// TestExpectedA: a ClusterSetIP import answers its IPv4 address; a headless
// one the ready (or nil ready) addresses of its namespace's slices labelled
// with its name and a cluster, once each, sorted; one without any, and a
// slice's service without an import, nothing (NXDOMAIN).
func TestExpectedA(t *testing.T) {
	im := func(ns, name string, headless bool, ips ...string) *cache.Import {
		i := &cache.Import{Meta: cache.Meta{Namespace: ns, Name: name}, Headless: headless}
		for _, ip := range ips {
			i.IPs = append(i.IPs, netip.MustParseAddr(ip))
		}
		return i
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
	got := expectedA([]*cache.Import{
		im("a", "ip", false, "10.0.0.1", "fd00::1"),
		im("a", "hl", true),
		im("b", "hl", true),
		im("a", "none", true),
		im("a", "v6", false, "fd00::2"),
	}, []discoveryv1.EndpointSlice{
		es("a", "hl", "c1", v4, ep("10.1.0.2", ptr.To(true)), ep("10.1.0.1", nil), ep("10.1.0.9", ptr.To(false))),
		es("a", "hl", "c2", v4, ep("10.1.0.1", ptr.To(true)), ep("10.1.0.3", nil)),
		es("a", "hl", "", v4, ep("10.1.0.4", nil)),   // no cluster
		es("a", "hl", "c3", v6, ep("fd00::3", nil)),  // not IPv4
		es("a", "ip", "c1", v4, ep("10.1.0.5", nil)), // a ClusterSetIP import's
		es("a", "none", "c1", v4, ep("10.1.0.6", ptr.To(false))),
		es("a", "gone", "c1", v4, ep("10.1.0.7", nil)), // no import
		es("b", "hl", "c1", v4, ep("10.2.0.1", nil)),
	})
	want := map[string][]string{
		"ip.a.svc.clusterset.local.": {"10.0.0.1"},
		"hl.a.svc.clusterset.local.": {"10.1.0.1", "10.1.0.2", "10.1.0.3"},
		"hl.b.svc.clusterset.local.": {"10.2.0.1"},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("expectedA = %v, want %v", got, want)
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
