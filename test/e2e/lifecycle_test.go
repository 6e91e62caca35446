package e2e

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// apply applies YAML objects as the admin, deleting them when the test ends.
func apply(t testing.TB, yaml string) []*unstructured.Unstructured {
	t.Helper()
	objs, err := contract.DecodeYAML([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	contract.SortForCreation(objs)
	applyObjects(t, objs...)
	return objs
}

// applyObjects applies objs in order and deletes them, but namespaces, when
// the test ends.
func applyObjects(t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	if err := env.ApplyAll(ctx, objs); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := harness.Context(30 * time.Second)
		defer cancel()
		for _, o := range objs {
			if o.GetKind() == "Namespace" {
				continue // deleting a namespace takes a controller envtest lacks
			}
			if err := env.Delete(ctx, o); err != nil {
				t.Error(err)
			}
		}
	})
}

func remove(t testing.TB, yaml string) {
	t.Helper()
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	objs, err := contract.DecodeYAML([]byte(yaml))
	if err != nil {
		t.Fatal(err)
	}
	for _, o := range slices.Backward(objs) {
		if err := env.Delete(ctx, o); err != nil {
			t.Error(err)
		}
	}
}

// TestServiceImportLifecycle creates, updates and deletes a ServiceImport
// and waits for each change in the answers.
func TestServiceImportLifecycle(t *testing.T) {
	c := startPluginDNS(t)
	svc, ns := n("api.silife"), n("silife")

	apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: silife}
`)
	// Nothing yet: the namespace holds no service, so it is no name either.
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, ns, "A", nxdomain())

	t.Log("create a ClusterSetIP ServiceImport")
	apply(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: api, namespace: silife}
spec:
  type: ClusterSetIP
  ips: [10.50.0.1]
  ports:
  - {name: http, protocol: TCP, port: 80}
`)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.0.1")}})
	eventually(t, c, ns, "A", nodata())
	eventually(t, c, n("_http._tcp.api.silife"), "SRV", want{
		Answer: []string{srv(n("_http._tcp.api.silife"), 100, 80, svc)},
	})

	t.Log("update: new IPv4, an IPv6 address, another port, http moves to 8080")
	apply(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: api, namespace: silife}
spec:
  type: ClusterSetIP
  ips: [10.50.0.2, "fd00:50::2"]
  ports:
  - {name: http, protocol: TCP, port: 8080}
  - {name: grpc, protocol: TCP, port: 9090}
`)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.0.2")}})
	eventually(t, c, svc, "AAAA", want{Answer: []string{aaaa(svc, "fd00:50::2")}})
	eventually(t, c, n("_http._tcp.api.silife"), "SRV", want{
		Answer:     []string{srv(n("_http._tcp.api.silife"), 100, 8080, svc)},
		Additional: []string{a(svc, "10.50.0.2"), aaaa(svc, "fd00:50::2")},
	})
	eventually(t, c, n("_grpc._tcp.api.silife"), "SRV", want{
		Answer: []string{srv(n("_grpc._tcp.api.silife"), 100, 9090, svc)},
	})

	t.Log("update: drop a port")
	apply(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: api, namespace: silife}
spec:
  type: ClusterSetIP
  ips: [10.50.0.2, "fd00:50::2"]
  ports:
  - {name: grpc, protocol: TCP, port: 9090}
`)
	eventually(t, c, n("_http._tcp.api.silife"), "SRV", nxdomain())
	eventually(t, c, svc, "SRV", want{Answer: []string{srv(svc, 100, 9090, svc)}})

	t.Log("update: ClusterSetIP becomes Headless, its endpoints come from a slice")
	apply(t, `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: api-c1-abcde
  namespace: silife
  labels:
    multicluster.kubernetes.io/service-name: api
    multicluster.kubernetes.io/source-cluster: c1
addressType: IPv4
ports:
- {name: grpc, protocol: TCP, port: 9090}
endpoints:
- addresses: [10.50.1.1]
  hostname: api-0
  conditions: {ready: true}
`)
	apply(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: api, namespace: silife}
spec:
  type: Headless
  ports:
  - {name: grpc, protocol: TCP, port: 9090}
`)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.1.1")}})
	eventually(t, c, svc, "AAAA", nodata())
	eventually(t, c, n("api-0.c1.api.silife"), "A", want{Answer: []string{a(n("api-0.c1.api.silife"), "10.50.1.1")}})

	t.Log("delete the ServiceImport; its EndpointSlice stays")
	remove(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: api, namespace: silife}
`)
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, n("api-0.c1.api.silife"), "A", nxdomain())
	eventually(t, c, ns, "A", nxdomain())

	t.Log("create it again")
	apply(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: api, namespace: silife}
spec:
  type: ClusterSetIP
  ips: [10.50.0.3]
  ports:
  - {name: http, protocol: TCP, port: 80}
`)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.0.3")}})
	eventually(t, c, n("api-0.c1.api.silife"), "A", nxdomain())

	t.Log("delete it again, a ClusterSetIP one this time")
	remove(t, `
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: api, namespace: silife}
`)
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, ns, "A", nxdomain())
}

// TestEndpointSliceLifecycle creates, updates and deletes the EndpointSlices
// of a headless ServiceImport and waits for each change in the answers.
func TestEndpointSliceLifecycle(t *testing.T) {
	c := startPluginDNS(t)
	svc := n("cache.epslife")
	srvName := n("_redis._tcp.cache.epslife")
	r0 := n("r-0.c1.eu.cache.epslife")
	ip2 := n("10-60-0-2.c1.eu.cache.epslife")

	apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: epslife}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: cache, namespace: epslife}
spec:
  type: Headless
  ports:
  - {name: redis, protocol: TCP, port: 6379}
`)
	// The service has no ready endpoint, so no name: neither it nor its
	// namespace exists (an NXDOMAIN name has nothing below it).
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, n("epslife"), "A", nxdomain())

	t.Log("create a slice in cluster c1.eu")
	const c1 = `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cache-c1-x1
  namespace: epslife
  labels:
    multicluster.kubernetes.io/service-name: cache
    multicluster.kubernetes.io/source-cluster: c1.eu
addressType: IPv4
ports:
- {name: redis, protocol: TCP, port: 6379}
endpoints:
- addresses: [10.60.0.1]
  hostname: r-0
  conditions: {ready: true}
`
	apply(t, c1)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.1")}})
	eventually(t, c, n("epslife"), "A", nodata())
	eventually(t, c, r0, "A", want{Answer: []string{a(r0, "10.60.0.1")}})
	eventually(t, c, srvName, "SRV", want{
		Answer:     []string{srv(srvName, 100, 6379, r0)},
		Additional: []string{a(r0, "10.60.0.1")},
	})

	t.Log("update it: r-0 stops being ready, an endpoint without hostname or conditions joins")
	apply(t, `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cache-c1-x1
  namespace: epslife
  labels:
    multicluster.kubernetes.io/service-name: cache
    multicluster.kubernetes.io/source-cluster: c1.eu
addressType: IPv4
ports:
- {name: redis, protocol: TCP, port: 6379}
endpoints:
- addresses: [10.60.0.1]
  hostname: r-0
  conditions: {ready: false}
- addresses: [10.60.0.2]
`)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.2")}})
	eventually(t, c, r0, "A", nxdomain())
	eventually(t, c, ip2, "A", want{Answer: []string{a(ip2, "10.60.0.2")}})
	eventually(t, c, srvName, "SRV", want{Answer: []string{srv(srvName, 100, 6379, ip2)}})

	t.Log("create a second slice, in cluster c2")
	r5 := n("r-5.c2.cache.epslife")
	apply(t, `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cache-c2-y1
  namespace: epslife
  labels:
    multicluster.kubernetes.io/service-name: cache
    multicluster.kubernetes.io/source-cluster: c2
addressType: IPv4
ports:
- {name: redis, protocol: TCP, port: 6379}
endpoints:
- addresses: [10.61.0.5]
  hostname: r-5
  conditions: {ready: true}
`)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.2"), a(svc, "10.61.0.5")}})
	eventually(t, c, srvName, "SRV", want{
		Answer:     []string{srv(srvName, 50, 6379, ip2), srv(srvName, 50, 6379, r5)},
		Additional: []string{a(ip2, "10.60.0.2"), a(r5, "10.61.0.5")},
	})
	eventually(t, c, n("c2.cache.epslife"), "A", nodata())

	t.Log("relabel the second slice: it now comes from cluster c3")
	r5c3 := n("r-5.c3.cache.epslife")
	apply(t, `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cache-c2-y1
  namespace: epslife
  labels:
    multicluster.kubernetes.io/service-name: cache
    multicluster.kubernetes.io/source-cluster: c3
addressType: IPv4
ports:
- {name: redis, protocol: TCP, port: 6379}
endpoints:
- addresses: [10.61.0.5]
  hostname: r-5
  conditions: {ready: true}
`)
	eventually(t, c, r5c3, "A", want{Answer: []string{a(r5c3, "10.61.0.5")}})
	eventually(t, c, r5, "A", nxdomain())

	t.Log("take the multicluster service-name label off it: it leaves the answers")
	apply(t, `
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: cache-c2-y1
  namespace: epslife
  labels:
    kubernetes.io/service-name: cache
    multicluster.kubernetes.io/source-cluster: c3
addressType: IPv4
ports:
- {name: redis, protocol: TCP, port: 6379}
endpoints:
- addresses: [10.61.0.5]
  hostname: r-5
  conditions: {ready: true}
`)
	eventually(t, c, r5c3, "A", nxdomain())
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.2")}})

	t.Log("delete the first slice: no ready endpoint is left")
	remove(t, c1)
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, ip2, "A", nxdomain())
	eventually(t, c, n("epslife"), "A", nxdomain())
}

// TestEndpointInTwoSlices: while an endpoint moves between the slices of one
// cluster it may sit in both; the answers must not repeat it.
func TestEndpointInTwoSlices(t *testing.T) {
	c := startPluginDNS(t)
	svc := n("kv.dup")
	kv0 := n("kv-0.c1.kv.dup")
	apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: dup}
---
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: kv, namespace: dup}
spec:
  type: Headless
  ports:
  - {name: client, protocol: TCP, port: 2379}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kv-c1-a
  namespace: dup
  labels:
    multicluster.kubernetes.io/service-name: kv
    multicluster.kubernetes.io/source-cluster: c1
addressType: IPv4
ports:
- {name: client, protocol: TCP, port: 2379}
endpoints:
- addresses: [10.70.0.1]
  hostname: kv-0
  conditions: {ready: true}
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: kv-c1-b
  namespace: dup
  labels:
    multicluster.kubernetes.io/service-name: kv
    multicluster.kubernetes.io/source-cluster: c1
addressType: IPv4
ports:
- {name: client, protocol: TCP, port: 2379}
endpoints:
- addresses: [10.70.0.1]
  hostname: kv-0
  conditions: {ready: true}
- addresses: [10.70.0.2]
  hostname: kv-1
  conditions: {ready: true}
`)
	kv1 := n("kv-1.c1.kv.dup")
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.70.0.1"), a(svc, "10.70.0.2")}})
	eventually(t, c, n("_client._tcp.kv.dup"), "SRV", want{
		Answer: []string{
			srv(n("_client._tcp.kv.dup"), 50, 2379, kv0),
			srv(n("_client._tcp.kv.dup"), 50, 2379, kv1),
		},
		Additional: []string{a(kv0, "10.70.0.1"), a(kv1, "10.70.0.2")},
	})
	eventually(t, c, kv0, "A", want{Answer: []string{a(kv0, "10.70.0.1")}})
}
