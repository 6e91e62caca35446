package main

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
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
	// churnHeadless is how many small headless imports -scale creates for
	// the EndpointSlice writes of the propagation runs: churn-<i>.headless,
	// each with one EndpointSlice of one endpoint. At 100 writes a second
	// each is rewritten every few seconds, long after its last write was
	// answered.
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
func churnFQDN(i int) string             { return fqdn(churnName(i), headlessNamespace) }
func endpointIP(c, e int) string         { return fmt.Sprintf("10.200.%d.%d", c+1, e+1) }
func clusterID(c int) string             { return fmt.Sprintf("cluster-%d", c+1) }

// importIP is the ClusterSetIP of import i: 10.100.0.0 onwards, distinct for
// every i below 2^20.
func importIP(i int) string { return fmt.Sprintf("10.%d.%d.%d", 100+(i>>16), (i>>8)&255, i&255) }

// version is the ServiceImport version a control plane is written in:
// v1alpha2 (fields at the root, read by ours) or v1alpha1 (fields under
// spec, read by stock CoreDNS).
type version string

const (
	v1alpha2 version = "v1alpha2"
	v1alpha1 version = "v1alpha1"
)

func (v version) gvr() schema.GroupVersionResource { return cache.ServiceImports(string(v)) }

// serviceImport is an import with the port http/TCP 80, in this version.
func (v version) serviceImport(ns, name, typ string, ips []string, clusters int) *unstructured.Unstructured {
	im := harness.Import{Namespace: ns, Name: name, Type: typ, IPs: ips, Ports: []corev1.ServicePort{harness.TCP(portName, portNumber)}}
	for c := range clusters {
		im.Clusters = append(im.Clusters, clusterID(c))
	}
	return im.Object(string(v))
}

// slice is an EndpointSlice of service from cluster c, with the port
// http/TCP 80 and ready endpoints at ips.
func slice(ns, name, service string, c int, ips ...string) *discoveryv1.EndpointSlice {
	es := harness.MCSSlice(ns, name, service, clusterID(c), "bench.multicluster.x-k8s.io", []corev1.ServicePort{harness.TCP(portName, portNumber)})
	for _, ip := range ips {
		es.Endpoints = append(es.Endpoints, harness.Endpoint(ip, "", true))
	}
	return es
}

// cluster is one control plane loaded with the fixture in one version, and
// unthrottled clients for it.
type cluster struct {
	name    string
	version version
	env     *harness.Env
	dyn     dynamic.Interface
	kube    kubernetes.Interface
	fx      fixture
	// loaded is how many ClusterSetIP imports exist (0..loaded-1);
	// propRuns, how many propagation runs wrote to it.
	loaded, propRuns int
}

func newCluster(name string, v version, env *harness.Env, fx fixture) (*cluster, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the fixture is written in parallel
	dyn, err := dynamic.NewForConfig(cfg)
	kube, kerr := kubernetes.NewForConfig(cfg)
	return &cluster{name: name, version: v, env: env, dyn: dyn, kube: kube, fx: fx}, errors.Join(err, kerr)
}

// createNamespaces creates the fixture's namespaces.
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

// create creates an import, or an EndpointSlice with es; one that exists
// already (an earlier attempt may have got through) is no error.
func (c *cluster) create(ctx context.Context, u *unstructured.Unstructured, es *discoveryv1.EndpointSlice) (err error) {
	if u != nil {
		_, err = c.dyn.Resource(c.version.gvr()).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	} else {
		_, err = c.kube.DiscoveryV1().EndpointSlices(es.Namespace).Create(ctx, es, metav1.CreateOptions{})
	}
	return cond(apierrors.IsAlreadyExists(err), nil, err)
}

// createImports creates ClusterSetIP imports c.loaded..n-1 from workers
// goroutines, retrying a create that failed on a timeout or an overloaded
// API server, and logs progress every 10,000 imports.
func (c *cluster) createImports(ctx context.Context, n, workers int) error {
	from, start := c.loaded, time.Now()
	var created atomic.Int64
	err := parallel(ctx, workers, max(0, n-from), func(ctx context.Context, k int) error {
		i := from + k
		u := c.version.serviceImport(c.fx.namespace(i), importName(i), "ClusterSetIP", []string{importIP(i)}, 1)
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

// createHeadless creates the headless import name with one EndpointSlice
// per cluster, of ready endpoints at ips(cluster).
func (c *cluster) createHeadless(ctx context.Context, name string, clusters int, ips func(cl int) []string) error {
	if err := c.create(ctx, c.version.serviceImport(headlessNamespace, name, "Headless", nil, clusters), nil); err != nil {
		return err
	}
	return parallel(ctx, clusters, clusters, func(ctx context.Context, cl int) error {
		return c.create(ctx, nil, slice(headlessNamespace, name+"-"+clusterID(cl), name, cl, ips(cl)...))
	})
}

// setIP changes import i's ClusterSetIP with one merge patch.
func (c *cluster) setIP(ctx context.Context, i int, ip string) error {
	patch := fmt.Sprintf(cond(c.version == v1alpha1, `{"spec":{"ips":[%q]}}`, `{"ips":[%q]}`), ip)
	_, err := c.dyn.Resource(c.version.gvr()).Namespace(c.fx.namespace(i)).Patch(ctx, importName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// setEndpoint replaces churn import i's one endpoint address with one merge
// patch of its EndpointSlice.
func (c *cluster) setEndpoint(ctx context.Context, i int, ip string) error {
	patch := fmt.Sprintf(`{"endpoints":[{"addresses":[%q],"conditions":{"ready":true}}]}`, ip)
	_, err := c.kube.DiscoveryV1().EndpointSlices(headlessNamespace).Patch(ctx, churnName(i)+"-"+clusterID(0), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}

// parallel calls f(ctx, 0..n-1) from at most workers goroutines and
// returns the first error, after which no more calls start.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// loadFixture creates the namespaces, n ClusterSetIP imports and the headless
// import in every cluster at once.
func loadFixture(ctx context.Context, clusters []*cluster, n int) error {
	start := time.Now()
	fx := clusters[0].fx
	err := parallel(ctx, len(clusters), len(clusters), func(ctx context.Context, k int) error {
		c := clusters[k]
		err := c.createNamespaces(ctx)
		if err == nil {
			err = c.createHeadless(ctx, "hl", fx.clusters, func(cl int) (ips []string) {
				for e := range fx.endpoints {
					ips = append(ips, endpointIP(cl, e))
				}
				return ips
			})
		}
		if err == nil {
			err = c.createImports(ctx, n, 32)
		}
		return err
	})
	logf("fixture: %d ClusterSetIP imports and 1 headless import (%d×%d endpoints) in each of %d control planes in %.1fs",
		n, fx.clusters, fx.endpoints, len(clusters), time.Since(start).Seconds())
	return err
}

// createChurnHeadless creates the churn imports and their EndpointSlices.
func (c *cluster) createChurnHeadless(ctx context.Context) error {
	return parallel(ctx, 16, churnHeadless, func(ctx context.Context, i int) error {
		return c.createHeadless(ctx, churnName(i), 1, func(int) []string { return []string{fmt.Sprintf("10.151.%d.%d", i>>8, i&255)} })
	})
}
