package e2e

import (
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

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

// removeObjects deletes objs, in reverse order.
func removeObjects(t testing.TB, objs ...*unstructured.Unstructured) {
	t.Helper()
	ctx, cancel := harness.Context(30 * time.Second)
	defer cancel()
	for _, o := range slices.Backward(objs) {
		if err := env.Delete(ctx, o); err != nil {
			t.Error(err)
		}
	}
}

// plainMCSSlice is an IPv4 MCS EndpointSlice name in ns, of service from
// cluster, with ports and the endpoints eps, and no managed-by label.
func plainMCSSlice(t testing.TB, ns, name, service, cluster string, ports []corev1.ServicePort, eps ...mcsEndpoint) *unstructured.Unstructured {
	t.Helper()
	es := mcsSlice(ns, name, service, cluster, "", "IPv4", ports, eps)
	delete(es.Labels, discoveryv1.LabelManagedBy)
	return sliceObject(t, es)
}

// TestServiceImportLifecycle creates, updates and deletes a ServiceImport
// and waits for each change in the answers.
func TestServiceImportLifecycle(t *testing.T) {
	c := startPluginDNS(t)
	svc, ns := n("api.silife"), n("silife")
	http, grpc := n("_http._tcp.api.silife"), n("_grpc._tcp.api.silife")
	api0 := n("api-0.c1.api.silife")
	api := func(typ string, ips []string, ports ...corev1.ServicePort) *unstructured.Unstructured {
		t.Helper()
		return harness.Import{Namespace: "silife", Name: "api", Type: typ, IPs: ips, Ports: ports}.Object("v1beta1")
	}

	apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: silife}
`)
	// Nothing yet: the namespace holds no service, so it is no name either.
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, ns, "A", nxdomain())

	t.Log("create a ClusterSetIP ServiceImport")
	applyObjects(t, api("ClusterSetIP", []string{"10.50.0.1"}, harness.TCP("http", 80)))
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.0.1")}})
	eventually(t, c, ns, "A", nodata())
	eventually(t, c, http, "SRV", want{Answer: []string{srv(http, 100, 80, svc)}})

	t.Log("update: new IPv4, an IPv6 address, another port, http moves to 8080")
	applyObjects(t, api("ClusterSetIP", []string{"10.50.0.2", "fd00:50::2"}, harness.TCP("http", 8080), harness.TCP("grpc", 9090)))
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.0.2")}})
	eventually(t, c, svc, "AAAA", want{Answer: []string{aaaa(svc, "fd00:50::2")}})
	eventually(t, c, http, "SRV", want{
		Answer:     []string{srv(http, 100, 8080, svc)},
		Additional: []string{a(svc, "10.50.0.2"), aaaa(svc, "fd00:50::2")},
	})
	eventually(t, c, grpc, "SRV", want{Answer: []string{srv(grpc, 100, 9090, svc)}})

	t.Log("update: drop a port")
	applyObjects(t, api("ClusterSetIP", []string{"10.50.0.2", "fd00:50::2"}, harness.TCP("grpc", 9090)))
	eventually(t, c, http, "SRV", nxdomain())
	eventually(t, c, svc, "SRV", want{Answer: []string{srv(svc, 100, 9090, svc)}})

	t.Log("update: ClusterSetIP becomes Headless, its endpoints come from a slice")
	applyObjects(t, plainMCSSlice(t, "silife", "api-c1-abcde", "api", "c1", []corev1.ServicePort{harness.TCP("grpc", 9090)},
		mcsEndpoint{"10.50.1.1", "api-0", "true"}))
	applyObjects(t, api("Headless", nil, harness.TCP("grpc", 9090)))
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.1.1")}})
	eventually(t, c, svc, "AAAA", nodata())
	eventually(t, c, api0, "A", want{Answer: []string{a(api0, "10.50.1.1")}})

	t.Log("delete the ServiceImport; its EndpointSlice stays")
	removeObjects(t, api("Headless", nil))
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, api0, "A", nxdomain())
	eventually(t, c, ns, "A", nxdomain())

	t.Log("create it again")
	applyObjects(t, api("ClusterSetIP", []string{"10.50.0.3"}, harness.TCP("http", 80)))
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.50.0.3")}})
	eventually(t, c, api0, "A", nxdomain())

	t.Log("delete it again, a ClusterSetIP one this time")
	removeObjects(t, api("ClusterSetIP", nil))
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
	redis := []corev1.ServicePort{harness.TCP("redis", 6379)}
	slice := func(name, cluster string, eps ...mcsEndpoint) *unstructured.Unstructured {
		t.Helper()
		return plainMCSSlice(t, "epslife", name, "cache", cluster, redis, eps...)
	}

	apply(t, `
apiVersion: v1
kind: Namespace
metadata: {name: epslife}
`)
	applyObjects(t, harness.Import{Namespace: "epslife", Name: "cache", Type: "Headless", Ports: redis}.Object("v1beta1"))
	// The service has no ready endpoint, so no name: neither it nor its
	// namespace exists (an NXDOMAIN name has nothing below it).
	eventually(t, c, svc, "A", nxdomain())
	eventually(t, c, n("epslife"), "A", nxdomain())

	t.Log("create a slice in cluster c1.eu")
	applyObjects(t, slice("cache-c1-x1", "c1.eu", mcsEndpoint{"10.60.0.1", "r-0", "true"}))
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.1")}})
	eventually(t, c, n("epslife"), "A", nodata())
	eventually(t, c, r0, "A", want{Answer: []string{a(r0, "10.60.0.1")}})
	eventually(t, c, srvName, "SRV", want{
		Answer:     []string{srv(srvName, 100, 6379, r0)},
		Additional: []string{a(r0, "10.60.0.1")},
	})

	t.Log("update it: r-0 stops being ready, an endpoint without hostname or conditions joins")
	c1 := slice("cache-c1-x1", "c1.eu", mcsEndpoint{"10.60.0.1", "r-0", "false"}, mcsEndpoint{addr: "10.60.0.2"})
	applyObjects(t, c1)
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.2")}})
	eventually(t, c, r0, "A", nxdomain())
	eventually(t, c, ip2, "A", want{Answer: []string{a(ip2, "10.60.0.2")}})
	eventually(t, c, srvName, "SRV", want{Answer: []string{srv(srvName, 100, 6379, ip2)}})

	t.Log("create a second slice, in cluster c2")
	r5 := n("r-5.c2.cache.epslife")
	r5ep := mcsEndpoint{"10.61.0.5", "r-5", "true"}
	applyObjects(t, slice("cache-c2-y1", "c2", r5ep))
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.2"), a(svc, "10.61.0.5")}})
	eventually(t, c, srvName, "SRV", want{
		Answer:     []string{srv(srvName, 50, 6379, ip2), srv(srvName, 50, 6379, r5)},
		Additional: []string{a(ip2, "10.60.0.2"), a(r5, "10.61.0.5")},
	})
	eventually(t, c, n("c2.cache.epslife"), "A", nodata())

	t.Log("relabel the second slice: it now comes from cluster c3")
	r5c3 := n("r-5.c3.cache.epslife")
	c3 := slice("cache-c2-y1", "c3", r5ep)
	applyObjects(t, c3)
	eventually(t, c, r5c3, "A", want{Answer: []string{a(r5c3, "10.61.0.5")}})
	eventually(t, c, r5, "A", nxdomain())

	t.Log("take the multicluster service-name label off it: it leaves the answers")
	labels := c3.GetLabels()
	delete(labels, mcsv1beta1.LabelServiceName)
	labels["kubernetes.io/service-name"] = "cache"
	c3.SetLabels(labels)
	applyObjects(t, c3)
	eventually(t, c, r5c3, "A", nxdomain())
	eventually(t, c, svc, "A", want{Answer: []string{a(svc, "10.60.0.2")}})

	t.Log("delete the first slice: no ready endpoint is left")
	removeObjects(t, c1)
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
