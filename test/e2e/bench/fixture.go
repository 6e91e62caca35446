package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/retry"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

const (
	zone              = "clusterset.local"
	headlessNamespace = "headless"
	portName          = "http"
	portNumber        = 80
	// churnHeadless small headless imports, churn-<i>.headless with one
	// EndpointSlice of one endpoint, take the propagation runs'
	// EndpointSlice writes: at 100 writes a second each is rewritten every
	// few seconds, long after its last write was answered.
	churnHeadless = 500
)

// fixture names the objects: ClusterSetIP import i is svc-<i> in namespace
// ns-<i mod namespaces> with ClusterSetIP importIP(i) and the port http/TCP
// 80; the headless import hl.headless has `clusters` EndpointSlices of
// `endpoints` ready IPv4 endpoints each, endpointIP(cluster, endpoint).
type fixture struct{ namespaces, clusters, endpoints int }

func (f fixture) namespace(i int) string { return fmt.Sprintf("ns-%02d", i%f.namespaces) }
func (f fixture) name(i int) string      { return fqdn(importName(i), f.namespace(i)) }
func importName(i int) string            { return fmt.Sprintf("svc-%05d", i) }
func fqdn(name, ns string) string        { return name + "." + ns + ".svc." + zone + "." }
func headlessFQDN() string               { return fqdn("hl", headlessNamespace) }
func churnName(i int) string             { return fmt.Sprintf("churn-%03d", i) }
func endpointIP(c, e int) string         { return fmt.Sprintf("10.200.%d.%d", c+1, e+1) }
func clusterID(c int) string             { return fmt.Sprintf("cluster-%d", c+1) }

// importIP is distinct for every i below 2^20.
func importIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", 100+(i>>16), (i>>8)&255, i&255) }

// serviceImport is an import with the port http/TCP 80 in version v:
// v1alpha2 (ours) or v1alpha1 (stock).
func serviceImport(v, ns, name, typ string, ips []string, clusters int) *unstructured.Unstructured {
	im := harness.Import{Namespace: ns, Name: name, Type: typ, IPs: ips, Ports: []corev1.ServicePort{harness.TCP(portName, portNumber)}}
	for c := range clusters {
		im.Clusters = append(im.Clusters, clusterID(c))
	}
	return im.Object(v)
}

func slice(ns, name, service string, c int, ips ...string) *discoveryv1.EndpointSlice {
	es := harness.MCSSlice(ns, name, service, clusterID(c), "bench.multicluster.x-k8s.io", []corev1.ServicePort{harness.TCP(portName, portNumber)})
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, harness.Endpoint(ip, "", true))
	}
	return es
}

// cluster is one control plane, its ServiceImports in one version, and
// clients without a rate limit: the objects are written in parallel.
type cluster struct {
	name, version string
	env           *harness.Env
	dyn           dynamic.Interface
	imports       dynamic.NamespaceableResourceInterface
	kube          kubernetes.Interface
	fx            fixture
	// loaded ClusterSetIP imports exist (0..loaded-1); propRuns
	// propagation runs wrote to it.
	loaded, propRuns int
}

// newCluster is env's cluster, to stop after an error too.
func newCluster(name, version string, env *harness.Env, fx fixture) (*cluster, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0
	c := &cluster{name: name, version: version, env: env, fx: fx}
	dyn, err := dynamic.NewForConfig(cfg)
	if err == nil {
		c.dyn, c.imports = dyn, dyn.Resource(cache.ServiceImports(version))
		c.kube, err = kubernetes.NewForConfig(cfg)
	}
	return c, err
}

// create creates an import, or else es; one that exists already (an
// earlier attempt got through) is no error.
func (c *cluster) create(ctx context.Context, u *unstructured.Unstructured, es *discoveryv1.EndpointSlice) (err error) {
	if u != nil {
		_, err = c.imports.Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	} else {
		_, err = c.kube.DiscoveryV1().EndpointSlices(es.Namespace).Create(ctx, es, metav1.CreateOptions{})
	}
	return cond(apierrors.IsAlreadyExists(err), nil, err)
}

func (c *cluster) createNamespaces(ctx context.Context) error {
	names := []string{headlessNamespace}
	for i := range c.fx.namespaces {
		names = append(names, c.fx.namespace(i))
	}
	return parallel(ctx, 16, len(names), func(ctx context.Context, i int) error {
		_, err := c.kube.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
		return cond(apierrors.IsAlreadyExists(err), nil, err)
	})
}

func (c *cluster) load(ctx context.Context, n int) error {
	err := c.createNamespaces(ctx)
	if err == nil {
		err = c.createHeadless(ctx, "hl", c.fx.clusters, func(cl int) (ips []string) {
			for e := range c.fx.endpoints {
				ips = append(ips, endpointIP(cl, e))
			}
			return ips
		})
	}
	if err == nil {
		err = c.createImports(ctx, n)
	}
	return err
}

func (c *cluster) createImports(ctx context.Context, n int) error {
	from, start := c.loaded, time.Now()
	var created atomic.Int64
	err := parallel(ctx, 32, max(0, n-from), func(ctx context.Context, k int) error {
		i := from + k
		u := serviceImport(c.version, c.fx.namespace(i), importName(i), "ClusterSetIP", []string{importIP(i)}, 1)
		if err := retryTransient(ctx, func(ctx context.Context) error { return c.create(ctx, u, nil) }); err != nil {
			return fmt.Errorf("%s: ServiceImport %s/%s: %w", c.name, c.fx.namespace(i), importName(i), err)
		}
		if total := from + int(created.Add(1)); total%10000 == 0 && total < n {
			logf("%s: %d of %d imports (%.0f/s)", c.name, total, n, float64(total-from)/time.Since(start).Seconds())
		}
		return nil
	})
	if err == nil {
		c.loaded = max(n, from)
	}
	return err
}

// retryTransient calls f, each time bounded by 30 seconds, up to 5 times
// (1, 2, 4, 8 s apart) while it fails on a timeout, a lost connection or an
// overloaded API server.
func retryTransient(ctx context.Context, f func(context.Context) error) error {
	transient := func(err error) bool {
		return ctx.Err() == nil && (apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
			apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || errors.Is(err, context.DeadlineExceeded) ||
			utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err))
	}
	return retry.OnError(wait.Backoff{Steps: 5, Duration: time.Second, Factor: 2}, transient, func() error {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return f(actx)
	})
}

func (c *cluster) createHeadless(ctx context.Context, name string, clusters int, ips func(cl int) []string) error {
	if err := c.create(ctx, serviceImport(c.version, headlessNamespace, name, "Headless", nil, clusters), nil); err != nil {
		return err
	}
	return parallel(ctx, clusters, clusters, func(ctx context.Context, cl int) error {
		return c.create(ctx, nil, slice(headlessNamespace, name+"-"+clusterID(cl), name, cl, ips(cl)...))
	})
}
