package cache

import (
	"encoding/json"
	"fmt"
	"runtime"
	"slices"
	"testing"
	"unique"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"

	"github.com/clustersetdns/multicluster/apis/v1alpha2"

	"github.com/miekg/dns"
)

func withFields(u *unstructured.Unstructured, fields map[string]any) *unstructured.Unstructured {
	for k, v := range fields {
		u.Object[k] = v
	}
	return u
}

func ports(ps ...map[string]any) []any {
	out := []any{}
	for _, p := range ps {
		out = append(out, p)
	}
	return out
}

func TestImportProblems(t *testing.T) {
	http := map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}
	for _, tc := range []struct {
		name     string
		fields   map[string]any
		hasData  bool
		ips      string
		ports    string
		problems []string
	}{
		{"good", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.0.0.1", "fd00::1"}, "ports": ports(http)},
			true, "[10.0.0.1 fd00::1]", "[{http tcp 80}]", nil},
		{"pruned view", map[string]any{}, false, "[]", "[]", nil},
		{"unknown type", map[string]any{"type": "ExternalName"}, false, "[]", "[]", []string{ReasonBadType}},
		{"not an IP", map[string]any{"type": "ClusterSetIP", "ips": []any{"ten", "10.0.0.1"}},
			true, "[10.0.0.1]", "[]", []string{ReasonBadIP}},
		{"zoned IP", map[string]any{"type": "ClusterSetIP", "ips": []any{"fe80::1%eth0"}},
			true, "[]", "[]", []string{ReasonBadIP, ReasonNoIPs}},
		{"two of a family", map[string]any{"type": "ClusterSetIP", "ips": []any{"10.0.0.1", "10.0.0.2"}},
			true, "[10.0.0.1]", "[]", []string{ReasonExtraIP}},
		{"no IPs", map[string]any{"type": "ClusterSetIP"}, true, "[]", "[]", []string{ReasonNoIPs}},
		{"headless with IPs", map[string]any{"type": "Headless", "ips": []any{"10.0.0.1"}},
			true, "[]", "[]", []string{ReasonHeadlessIPs}},
		{"port names", map[string]any{"type": "Headless", "ports": ports(
			map[string]any{"port": int64(81)}, // unnamed: kept out of SRV quietly
			map[string]any{"name": "Bad_Name", "port": int64(82)},
			map[string]any{"name": "udp", "protocol": "UDP", "port": int64(53)},
			map[string]any{"name": "x", "protocol": "ICMP", "port": int64(1)},
			map[string]any{"name": "zero", "port": int64(0)},
			map[string]any{"name": "big", "port": int64(70000)},
			http, map[string]any{"name": "http", "protocol": "TCP", "port": int64(8080)},
		)}, true, "[]", "[{udp udp 53} {http tcp 80}]",
			[]string{ReasonBadPortName, ReasonBadPort, ReasonDuplicatePort}}, // each reason once
		{"wrong shapes", map[string]any{"type": "ClusterSetIP", "ips": "10.0.0.1"}, false, "[]", "[]", []string{ReasonDecode}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			im := importFromV1alpha2(withFields(v2("ns", "svc", "1", ""), tc.fields))
			if im.HasData != tc.hasData || fmt.Sprint(im.IPs) != tc.ips || fmt.Sprint(im.Ports) != tc.ports || !slices.Equal(im.Problems(), tc.problems) {
				t.Errorf("got data=%v ips=%v ports=%v problems=%v", im.HasData, im.IPs, im.Ports, im.Problems())
			}
		})
	}
}

func TestV1alpha1Import(t *testing.T) {
	im := importFromV1alpha1(v1("ns", "svc", "1", "ClusterSetIP", "10.0.0.1"))
	if !im.HasData || im.Version() != V1alpha1 || fmt.Sprint(im.IPs) != "[10.0.0.1]" || fmt.Sprint(im.Ports) != "[{http tcp 80}]" {
		t.Errorf("got %+v", im)
	}
	if im := importFromV1alpha1(v2("ns", "svc", "1", "ClusterSetIP", "10.0.0.1")); im.HasData {
		t.Error("a v1alpha2-shaped object read as v1alpha1 has data")
	}
}

func TestSliceProblems(t *testing.T) {
	ready := false
	bad := "Not_A_Label"
	for _, tc := range []struct {
		name     string
		mutate   func(*discoveryv1.EndpointSlice)
		cluster  string
		eps      string
		problems []string
	}{
		{"good", func(*discoveryv1.EndpointSlice) {}, "west", "[{10-0-0-1  [10.0.0.1]}]", nil},
		{"no cluster label", func(es *discoveryv1.EndpointSlice) { delete(es.Labels, LabelSourceCluster) }, "", "[]", []string{ReasonNoCluster}},
		{"cluster not a DNS name", func(es *discoveryv1.EndpointSlice) { es.Labels[LabelSourceCluster] = "West_1" }, "", "[]", []string{ReasonBadCluster}},
		{"cluster with dots", func(es *discoveryv1.EndpointSlice) { es.Labels[LabelSourceCluster] = "a.b.c" }, "a.b.c", "[{10-0-0-1  [10.0.0.1]}]", nil},
		{"bad service name", func(es *discoveryv1.EndpointSlice) { es.Labels[LabelServiceName] = "a.b" }, "", "[]", []string{ReasonBadServiceName}},
		{"FQDN", func(es *discoveryv1.EndpointSlice) { es.AddressType = discoveryv1.AddressTypeFQDN }, "", "[]", []string{ReasonAddressType}},
		{"wrong family", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Addresses = []string{"fd00::1"} }, "west", "[]", []string{ReasonBadAddress}},
		{"garbage address", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Addresses = []string{"x"} }, "west", "[]", []string{ReasonBadAddress}},
		{"not ready", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Conditions.Ready = &ready }, "west", "[]", nil},
		{"bad hostname falls back to IP", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Hostname = &bad }, "west", "[{10-0-0-1  [10.0.0.1]}]", nil},
		{"zone, lower-cased", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Zone = ptr("EU-West-1a") }, "west", "[{10-0-0-1 eu-west-1a [10.0.0.1]}]", nil},
		{"zone not a DNS label: none", func(es *discoveryv1.EndpointSlice) { es.Endpoints[0].Zone = ptr("eu_west") }, "west", "[{10-0-0-1  [10.0.0.1]}]", nil},
		// An endpoint named by its address names each address apart (the
		// contract: "else its IP"); one with a hostname keeps them under it
		// (KEP-1645 specification §2.4.1: one record for each IP).
		{"two addresses, no hostname", func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Addresses = []string{"10.0.0.1", "10.0.0.2"}
			es.Endpoints[0].Zone = ptr("z")
		}, "west", "[{10-0-0-1 z [10.0.0.1]} {10-0-0-2 z [10.0.0.2]}]", nil},
		{"two addresses, a hostname", func(es *discoveryv1.EndpointSlice) {
			es.Endpoints[0].Addresses = []string{"10.0.0.1", "10.0.0.2"}
			es.Endpoints[0].Hostname = ptr("db-0")
		}, "west", "[{db-0  [10.0.0.1 10.0.0.2]}]", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			es := mcSlice("ns", "s", "svc", "west", "10.0.0.1")
			tc.mutate(es)
			s := sliceFrom(es, nil)
			if s.Cluster != tc.cluster || fmt.Sprint(s.Endpoints) != tc.eps || !slices.Equal(s.Problems, tc.problems) {
				t.Errorf("got cluster=%q eps=%v problems=%v", s.Cluster, s.Endpoints, s.Problems)
			}
		})
	}
	v6 := mcSlice("ns", "s", "svc", "west", "fd00::1:2")
	v6.AddressType = discoveryv1.AddressTypeIPv6
	if got := fmt.Sprint(sliceFrom(v6, nil).Endpoints); got != "[{fd00--1-2  [fd00::1:2]}]" {
		t.Errorf("IPv6 endpoint name: %s", got)
	}
}

func TestSRVWeightAtLeastOne(t *testing.T) {
	rs := make([]dns.RR, 120)
	for i := range rs {
		rs[i] = srvRecord("x.", 5, 80, "t.")
	}
	setWeights(rs)
	if w := rs[0].(*dns.SRV).Weight; w != 1 {
		t.Fatalf("weight %d over 120 records, want 1", w)
	}
}

// The import reader reads the decoded JSON directly; the API types are the
// reference. Objects made from the typed structs of both versions, through
// JSON as the API server sends them, read the same as the structs say.
func TestImportReaderMatchesAPITypes(t *testing.T) {
	ports := []corev1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, AppProtocol: ptr("http")},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromString("dns")},
		{Port: 9000}, // unnamed, no protocol
	}
	v1Ports := []mcsv1alpha1.ServicePort{
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, AppProtocol: ptr("http")},
		{Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53},
		{Port: 9000},
	}
	want := "true [10.0.0.1 fd00::1] [{http tcp 80} {dns udp 53}] []"
	for _, tc := range []struct {
		name string
		obj  any
		read func(*unstructured.Unstructured) *Import
		want string
	}{
		{"v1alpha2", &v1alpha2.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", ResourceVersion: "7"},
			Type: v1alpha2.ClusterSetIP, IPs: []string{"10.0.0.1", "fd00::1"}, Ports: ports,
			SessionAffinity: corev1.ServiceAffinityClientIP, Clusters: []v1alpha2.ClusterStatus{{Cluster: "east.prod"}}},
			importFromV1alpha2, want},
		{"v1alpha1", &mcsv1alpha1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "svc", Namespace: "ns", ResourceVersion: "7"},
			Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.ClusterSetIP, IPs: []string{"10.0.0.1", "fd00::1"}, Ports: v1Ports,
				SessionAffinity: corev1.ServiceAffinityClientIP},
			Status: mcsv1alpha1.ServiceImportStatus{Clusters: []mcsv1alpha1.ClusterStatus{{Cluster: "east"}}}},
			importFromV1alpha1, want},
		{"v1alpha2 headless", &v1alpha2.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "hl"}, Type: v1alpha2.Headless, Ports: ports[:1]},
			importFromV1alpha2, "true [] [{http tcp 80}] []"},
		{"v1alpha1 headless", &mcsv1alpha1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "hl"}, Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.Headless}},
			importFromV1alpha1, "true [] [] []"},
		// A custom resource's name may hold dots; a Service's may not.
		{"v1alpha2 dotted name", &v1alpha2.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}, Type: v1alpha2.Headless},
			importFromV1alpha2, "false [] [] [bad_service_name]"},
		{"v1alpha1 dotted name", &mcsv1alpha1.ServiceImport{ObjectMeta: metav1.ObjectMeta{Name: "a.b"}, Spec: mcsv1alpha1.ServiceImportSpec{Type: mcsv1alpha1.ClusterSetIP, IPs: []string{"10.0.0.1"}}},
			importFromV1alpha1, "false [] [] [bad_service_name]"},
		{"v1alpha2 empty", &v1alpha2.ServiceImport{}, importFromV1alpha2, "false [] [] []"},
		{"v1alpha1 empty", &mcsv1alpha1.ServiceImport{}, importFromV1alpha1, "false [] [] []"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			data, err := json.Marshal(tc.obj)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any // as sent: with apiVersion and kind
			if err := json.Unmarshal(data, &m); err != nil {
				t.Fatal(err)
			}
			m["apiVersion"], m["kind"] = "multicluster.x-k8s.io/v1", "ServiceImport"
			if data, err = json.Marshal(m); err != nil {
				t.Fatal(err)
			}
			obj, _, err := unstructured.UnstructuredJSONScheme.Decode(data, nil, &unstructured.Unstructured{})
			if err != nil {
				t.Fatal(err)
			}
			im := tc.read(obj.(*unstructured.Unstructured))
			if got := fmt.Sprint(im.HasData, im.IPs, im.Ports, im.Problems()); got != tc.want {
				t.Errorf("got %s, want %s", got, tc.want)
			}
		})
	}
}

func TestImportReaderWrongShapes(t *testing.T) {
	for _, fields := range []map[string]any{
		{"type": int64(1)},
		{"type": "ClusterSetIP", "ips": []any{"10.0.0.1", int64(2)}},
		{"type": "ClusterSetIP", "ports": map[string]any{"name": "http"}},
		{"type": "ClusterSetIP", "ports": []any{"http"}},
		{"type": "ClusterSetIP", "ports": []any{map[string]any{"name": "http", "port": "80"}}},
		{"type": "ClusterSetIP", "ports": []any{map[string]any{"name": "http", "port": 80.5}}},
		{"type": "ClusterSetIP", "ports": []any{map[string]any{"name": true, "port": int64(80)}}},
	} {
		if im := importFromV1alpha2(withFields(v2("ns", "svc", "1", ""), fields)); im.HasData || !slices.Equal(im.Problems(), []string{ReasonDecode}) {
			t.Errorf("%v: data=%v problems=%v, want a decode problem", fields, im.HasData, im.Problems())
		}
	}
	u := v1("ns", "svc", "1", "")
	u.Object["spec"] = "ClusterSetIP"
	if im := importFromV1alpha1(u); im.HasData || !slices.Equal(im.Problems(), []string{ReasonDecode}) {
		t.Errorf("spec a string: data=%v problems=%v", im.HasData, im.Problems())
	}
	// A whole float is a port: JSON has one number type.
	im := importFromV1alpha2(withFields(v2("ns", "svc", "1", ""), map[string]any{"type": "Headless",
		"ports": []any{map[string]any{"name": "http", "port": float64(80)}}}))
	if fmt.Sprint(im.Ports) != "[{http tcp 80}]" {
		t.Errorf("float port: %v", im.Ports)
	}
}

func ptr[T any](v T) *T { return &v }

// Slim copies of different objects share what is alike in them: the namespace,
// the list of ports, the cluster name. They are never modified, so sharing
// is safe, and a hundred thousand imports do not each hold a copy.
func TestSlimCopiesShareWhatIsAlike(t *testing.T) {
	// intern's copies last while a Handle does (see intern): a GC between
	// a and b would otherwise give b a copy of its own.
	keep := []unique.Handle[string]{unique.Make("ns-1"), unique.Make("west")}
	defer runtime.KeepAlive(keep)
	http := func() []any { return ports(map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}) }
	obj := func(name string) *unstructured.Unstructured {
		ns := string([]byte("ns-1")) // a copy of its own, as each decoded object has
		return withFields(v2(ns, name, "1", "ClusterSetIP", "10.0.0.1"), map[string]any{"ports": http()})
	}
	a := readUnstructured(obj("a"), V1alpha2)
	runtime.GC() // the worst moment for a collection
	b := readUnstructured(obj("b"), V1alpha2)
	if unsafe.StringData(a.Namespace) != unsafe.StringData(b.Namespace) {
		t.Error("each import has its own copy of the namespace")
	}
	if len(a.Ports) != 1 || &a.Ports[0] != &b.Ports[0] || cap(a.Ports) != len(a.Ports) {
		t.Errorf("ports %v and %v are not one clipped slice", a.Ports, b.Ports)
	}
	other := withFields(v2("ns-1", "c", "1", "ClusterSetIP", "10.0.0.1"), map[string]any{"ports": ports(
		map[string]any{"name": "http", "protocol": "UDP", "port": int64(80)})})
	if c := readUnstructured(other, V1alpha2); c.Ports[0].Proto != "udp" || &c.Ports[0] == &a.Ports[0] {
		t.Errorf("a different list is shared: %v", c.Ports)
	}
	s1 := sliceFrom(mcSlice("ns-1", "s1", "svc", string([]byte("west")), "10.0.0.1"), nil)
	s2 := sliceFrom(mcSlice("ns-1", "s2", "svc", string([]byte("west")), "10.0.0.2"), nil)
	if unsafe.StringData(s1.Cluster) != unsafe.StringData(s2.Cluster) {
		t.Error("each slice has its own copy of the cluster name")
	}
}

// The clusters an import lists: lower-cased, each once, sorted.
func TestReadClusters(t *testing.T) {
	im := &Import{}
	readClusters(im, []string{"West", "east", "EAST", "west", "b.c", "east"})
	if got := fmt.Sprint(im.Clusters()); got != "[b.c east west]" {
		t.Errorf("clusters %s", got)
	}
}

// An import may list any number of clusters (neither CRD version bounds
// them): 40,000 names deduplicated by search took 4 s, and every answer
// waited for them.
func BenchmarkReadClusters40k(b *testing.B) {
	names := make([]string, 40000)
	for i := range names {
		names[i] = fmt.Sprintf("cluster-%05d", i)
	}
	for b.Loop() {
		readClusters(&Import{}, names)
	}
}
