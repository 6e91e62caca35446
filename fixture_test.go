package multicluster

import (
	"testing"

	"github.com/coredns/coredns/plugin/pkg/fall"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clustersetdns/multicluster/apis/v1alpha2"
	"github.com/clustersetdns/multicluster/cache"
)

const zone = "clusterset.local."

func clusterSetIP(ns, name string, ips []string, ports ...corev1.ServicePort) *v1alpha2.ServiceImport {
	return &v1alpha2.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type: v1alpha2.ClusterSetIP, IPs: ips, Ports: ports}
}

func headless(ns, name string, ports ...corev1.ServicePort) *v1alpha2.ServiceImport {
	return &v1alpha2.ServiceImport{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Type: v1alpha2.Headless, Ports: ports}
}

func port(name string, proto corev1.Protocol, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: proto, Port: n}
}

type ep struct {
	host  string
	ready *bool
	addrs []string
	zone  string // topology zone; none when empty
}

func slice(ns, name, svc, cluster string, family discoveryv1.AddressType, eps ...ep) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name,
		Labels: map[string]string{cache.LabelServiceName: svc, cache.LabelSourceCluster: cluster}}, AddressType: family}
	for _, e := range eps {
		x := discoveryv1.Endpoint{Addresses: e.addrs, Conditions: discoveryv1.EndpointConditions{Ready: e.ready}}
		if e.host != "" {
			x.Hostname = &e.host
		}
		if e.zone != "" {
			x.Zone = &e.zone
		}
		es.Endpoints = append(es.Endpoints, x)
	}
	return es
}

var yes, no = true, false

// fixture is one namespace with every kind of service the contract names.
func fixture() []runtime.Object {
	plain := slice("demo", "web-abcde", "web", "west", discoveryv1.AddressTypeIPv4, ep{addrs: []string{"10.9.9.9"}})
	plain.Labels = map[string]string{"kubernetes.io/service-name": "web"}
	return []runtime.Object{
		clusterSetIP("demo", "web", []string{"10.42.0.10"}, port("http", corev1.ProtocolTCP, 80), port("dns", corev1.ProtocolUDP, 53), port("", corev1.ProtocolTCP, 8080)),
		clusterSetIP("demo", "dual", []string{"10.42.0.11", "fd00::11"}, port("https", corev1.ProtocolTCP, 443)),
		clusterSetIP("demo", "six", []string{"fd00::12"}, port("grpc", "", 9090)),
		headless("demo", "db", port("mysql", corev1.ProtocolTCP, 3306), port("", corev1.ProtocolTCP, 9104)),
		slice("demo", "db-west", "db", "west", discoveryv1.AddressTypeIPv4,
			ep{host: "db-0", addrs: []string{"10.1.0.1"}, ready: &yes},
			ep{addrs: []string{"10.1.0.2"}},
			ep{host: "db-2", addrs: []string{"10.1.0.3"}, ready: &no}),
		slice("demo", "db-east", "db", "east.prod", discoveryv1.AddressTypeIPv4,
			ep{host: "db-0", addrs: []string{"10.2.0.1"}},
			ep{host: "db-1", addrs: []string{"10.2.0.2"}}),
		slice("demo", "db-east-v6", "db", "east.prod", discoveryv1.AddressTypeIPv6,
			ep{host: "db-0", addrs: []string{"fd00::2:1"}}),
		headless("demo", "idle", port("http", corev1.ProtocolTCP, 80)),
		slice("demo", "idle-west", "idle", "west", discoveryv1.AddressTypeIPv4, ep{host: "a", addrs: []string{"10.3.0.1"}, ready: &no}),
		plain,
	}
}

// objects turns what contract.ReadObjects read into what NewStatic takes.
func objects(us []*unstructured.Unstructured) []runtime.Object {
	out := make([]runtime.Object, len(us))
	for i, u := range us {
		out[i] = u
	}
	return out
}

func newTestPlugin(t testing.TB, objs ...runtime.Object) *Multicluster {
	t.Helper()
	st, err := cache.NewStatic([]string{zone}, defaultTTL, objs...)
	if err != nil {
		t.Fatal(err)
	}
	m := &Multicluster{TTL: defaultTTL, Fall: fall.Zero, backend: st}
	m.setZones([]string{zone})
	return m
}

// samePortNumbers is the mcs-api conformance suite's hello service, as a
// ClusterSetIP and as a headless service, with its ports tcp 42/TCP and
// udp 42/UDP, which share a number; and a service with two TCP ports of one
// number beside a third port.
func samePortNumbers() []runtime.Object {
	tcp42, udp42 := port("tcp", corev1.ProtocolTCP, 42), port("udp", corev1.ProtocolUDP, 42)
	return []runtime.Object{
		clusterSetIP("mcs", "hello", []string{"10.42.0.42", "fd00::42"}, tcp42, udp42),
		clusterSetIP("mcs", "mixed", []string{"10.42.0.43"},
			port("http", corev1.ProtocolTCP, 80), port("web", corev1.ProtocolTCP, 80), port("dns", corev1.ProtocolUDP, 53)),
		headless("mcs", "hello-headless", tcp42, udp42),
		slice("mcs", "hello-headless-west", "hello-headless", "west", discoveryv1.AddressTypeIPv4,
			ep{host: "hello-0", addrs: []string{"10.5.0.1"}}),
		slice("mcs", "hello-headless-east", "hello-headless", "east", discoveryv1.AddressTypeIPv4,
			ep{host: "hello-0", addrs: []string{"10.6.0.1"}}, ep{host: "hello-1", addrs: []string{"10.6.0.2"}}),
		slice("mcs", "hello-headless-east-v6", "hello-headless", "east", discoveryv1.AddressTypeIPv6,
			ep{host: "hello-0", addrs: []string{"fd00::6:1"}}),
	}
}
