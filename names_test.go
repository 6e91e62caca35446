package multicluster

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
)

// Names that objects make too long or ambiguous. An endpoint's name holds
// its cluster ID, a label value of up to 63 characters with dots: a name
// over 255 octets
// packs, but a resolver refuses the whole reply ("name too long"), so such
// an endpoint is left out and the others still answer. A custom resource's
// name may hold dots, which would make it read as another service of
// another namespace (kube-system's among them): such an import is not used.
func TestHostileNames(t *testing.T) {
	ns, svc := strings.Repeat("n", 63), strings.Repeat("s", 63)
	longCluster := strings.Repeat("c", 31) + "." + strings.Repeat("d", 31)
	name := svc + "." + ns + ".svc." + zone
	m := newTestPlugin(t,
		headless(ns, svc, port("http", corev1.ProtocolTCP, 80), port(strings.Repeat("p", 63), corev1.ProtocolTCP, 81)),
		slice(ns, "good", svc, "west", discoveryv1.AddressTypeIPv4, ep{host: "good", addrs: []string{"10.90.7.1"}}),
		slice(ns, "long", svc, longCluster, discoveryv1.AddressTypeIPv4, ep{host: strings.Repeat("h", 63), addrs: []string{"10.90.7.2"}}),
		clusterSetIP(ns, "good.west."+svc, []string{"10.42.7.3"}, port("http", corev1.ProtocolTCP, 80)),
		clusterSetIP("kube-system", "evil.dns", []string{"10.42.8.2"}),
		clusterSetIP("demo", "web", []string{"10.42.0.10"}),
	)
	// Every reply and every transferred record must be readable: packed and
	// unpacked as a resolver would.
	readable := func(what string, msg *dns.Msg) {
		t.Helper()
		wire, err := msg.Pack()
		if err == nil {
			err = new(dns.Msg).Unpack(wire)
		}
		if err != nil {
			t.Errorf("%s: a resolver cannot read the reply: %v", what, err)
		}
	}
	good := "good.west." + name
	for _, q := range []question{{name, dns.TypeSRV}, {"_http._tcp." + name, dns.TypeSRV}, {name, dns.TypeA}} {
		r := ask(m, q)
		readable(q.String(), r)
		if got := records(r); !strings.Contains(got, good) && !strings.Contains(got, "10.90.7.1") || strings.Contains(got, "10.90.7.2") {
			t.Errorf("%s: %s; want the endpoint good alone", q, got)
		}
	}
	if r := ask(m, question{good, dns.TypeA}); len(r.Answer) != 1 || r.Answer[0].(*dns.A).A.String() != "10.90.7.1" {
		t.Errorf("%s: %s; want 10.90.7.1 alone", good, records(r))
	}
	for _, q := range []question{{"evil.dns.kube-system.svc." + zone, dns.TypeA}, {"dns.kube-system.svc." + zone, dns.TypeA}} {
		if r := ask(m, q); r.Rcode != dns.RcodeNameError {
			t.Errorf("%s: %s %s, want NXDOMAIN", q, dns.RcodeToString[r.Rcode], records(r))
		}
	}
	got := collect(t, m, zone, 0)
	for _, rr := range got {
		if strings.Contains(rr, "10.42.7.3") || strings.Contains(rr, "10.42.8.2") || strings.Contains(rr, "10.90.7.2") {
			t.Errorf("transferred a record of an unusable object: %s", rr)
		}
		parsed, err := dns.NewRR(rr)
		if err != nil {
			t.Fatal(err)
		}
		msg := new(dns.Msg)
		msg.Answer = []dns.RR{parsed}
		readable("transfer", msg)
	}
	if !slices.Contains(got, "web.demo.svc.clusterset.local. 5 IN A 10.42.0.10") {
		t.Errorf("the transfer lost a usable service: %v", got)
	}
}
