package main

import (
	"github.com/clustersetdns/multicluster/cache"

	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

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
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

const (
	zone              = "clusterset.local"
	headlessNamespace = "headless"
	headlessName      = "hl"
	portName          = "http"
	portNumber        = 80
)

// fixture names the objects: ClusterSetIP import i is svc-<i> in namespace
// ns-<i mod namespaces> with ClusterSetIP importIP(i) and the port http/TCP 80;
// the headless import hl.headless has `clusters` EndpointSlices of
// `endpoints` ready IPv4 endpoints each.
type fixture struct {
	namespaces int
	clusters   int
	endpoints  int
}

func (f fixture) namespace(i int) string { return fmt.Sprintf("ns-%02d", i%f.namespaces) }
func importName(i int) string            { return fmt.Sprintf("svc-%05d", i) }

// importIP is the ClusterSetIP of import i: 10.100.0.0 onwards, distinct for
// every i below 2^20.
func importIP(i int) string {
	return fmt.Sprintf("10.%d.%d.%d", 100+(i>>16), (i>>8)&255, i&255)
}

// name is import i's service name in the zone, fully qualified.
func (f fixture) name(i int) string {
	return importName(i) + "." + f.namespace(i) + ".svc." + zone + "."
}

func headlessFQDN() string { return headlessName + "." + headlessNamespace + ".svc." + zone + "." }

// endpointIP is the address of endpoint e of cluster c (both from 0).
func endpointIP(c, e int) string { return fmt.Sprintf("10.200.%d.%d", c+1, e+1) }

func clusterID(c int) string { return fmt.Sprintf("cluster-%d", c+1) }

// version is the ServiceImport version a control plane is written in:
// v1alpha2 (fields at the root, read by ours) or v1alpha1 (fields under spec,
// read by stock CoreDNS).
type version string

const (
	v1alpha2 version = "v1alpha2"
	v1alpha1 version = "v1alpha1"
)

func (v version) gvr() schema.GroupVersionResource {
	return cache.ServiceImports(string(v))
}

// serviceImport is an import with the port http/TCP 80, in this version.
func (v version) serviceImport(ns, name, typ string, ips []string, clusters int) *unstructured.Unstructured {
	im := harness.Import{Namespace: ns, Name: name, Type: typ, IPs: ips, Ports: []corev1.ServicePort{harness.TCP(portName, portNumber)}}
	for c := range clusters {
		im.Clusters = append(im.Clusters, clusterID(c))
	}
	return im.Object(string(v))
}

// ipsPatch is a merge patch that sets the import's ips in this version.
func (v version) ipsPatch(ip string) []byte {
	if v == v1alpha1 {
		return fmt.Appendf(nil, `{"spec":{"ips":[%q]}}`, ip)
	}
	return fmt.Appendf(nil, `{"ips":[%q]}`, ip)
}

// slice is an EndpointSlice of service from cluster c, with the port http/TCP
// 80 and ready endpoints at ips.
func slice(ns, name, service string, c int, ips ...string) *discoveryv1.EndpointSlice {
	es := harness.MCSSlice(ns, name, service, clusterID(c), "bench.multicluster.x-k8s.io",
		[]corev1.ServicePort{harness.TCP(portName, portNumber)})
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
	// loaded is how many ClusterSetIP imports exist (0..loaded-1).
	loaded int
}

func newCluster(name string, v version, env *harness.Env, fx fixture) (*cluster, error) {
	cfg := rest.CopyConfig(env.Config)
	cfg.QPS, cfg.Burst = -1, 0 // no client-side rate limit: the fixture is written in parallel
	dyn, err := dynamic.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	return &cluster{name: name, version: v, env: env, dyn: dyn, kube: kube, fx: fx}, nil
}

// createNamespaces creates the fixture's namespaces.
func (c *cluster) createNamespaces(ctx context.Context) error {
	names := []string{headlessNamespace}
	for i := range c.fx.namespaces {
		names = append(names, c.fx.namespace(i))
	}
	return parallel(ctx, 16, len(names), func(ctx context.Context, i int) error {
		_, err := c.kube.CoreV1().Namespaces().Create(ctx,
			&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: names[i]}}, metav1.CreateOptions{})
		return ignoreExists(err)
	})
}

// createImport creates an import, createSlice an EndpointSlice; one that
// exists already (an earlier attempt may have got through) is no error.
func (c *cluster) createImport(ctx context.Context, u *unstructured.Unstructured) error {
	_, err := c.dyn.Resource(c.version.gvr()).Namespace(u.GetNamespace()).Create(ctx, u, metav1.CreateOptions{})
	return ignoreExists(err)
}

func (c *cluster) createSlice(ctx context.Context, es *discoveryv1.EndpointSlice) error {
	_, err := c.kube.DiscoveryV1().EndpointSlices(es.Namespace).Create(ctx, es, metav1.CreateOptions{})
	return ignoreExists(err)
}

func ignoreExists(err error) error {
	if apierrors.IsAlreadyExists(err) {
		return nil
	}
	return err
}

// createImports creates ClusterSetIP imports c.loaded..n-1, retrying a
// create that failed on a timeout or an overloaded API server, and logs
// progress every progressEvery imports.
func (c *cluster) createImports(ctx context.Context, n, workers int) error {
	from := c.loaded
	if n <= from {
		return nil
	}
	start := time.Now()
	var created atomic.Int64
	err := parallel(ctx, workers, n-from, func(ctx context.Context, k int) error {
		i := from + k
		u := c.version.serviceImport(c.fx.namespace(i), importName(i), "ClusterSetIP", []string{importIP(i)}, 1)
		err := retryTransient(ctx, func(ctx context.Context) error { return c.createImport(ctx, u) })
		if err != nil {
			return fmt.Errorf("ServiceImport %s/%s: %w", c.fx.namespace(i), importName(i), err)
		}
		if total := from + int(created.Add(1)); total%progressEvery == 0 && total < n {
			logf("%s: %d of %d imports (%.0f/s)", c.name, total, n, float64(total-from)/time.Since(start).Seconds())
		}
		return nil
	})
	if err == nil {
		c.loaded = n
	}
	return err
}

// progressEvery is how often createImports logs how far it got.
const progressEvery = 10000

// retryTransient calls f, each time bounded by 30 seconds, up to 5 times
// (1, 2, 4, 8 s apart) while it fails on a timeout, a lost connection or an
// overloaded API server.
func retryTransient(ctx context.Context, f func(context.Context) error) error {
	backoff := wait.Backoff{Steps: 5, Duration: time.Second, Factor: 2}
	return retry.OnError(backoff, func(err error) bool { return ctx.Err() == nil && transient(err) }, func() error {
		actx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return f(actx)
	})
}

func transient(err error) bool {
	return apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) ||
		errors.Is(err, context.DeadlineExceeded) ||
		utilnet.IsConnectionReset(err) || utilnet.IsConnectionRefused(err) || utilnet.IsProbableEOF(err)
}

// createHeadless creates the headless import and one EndpointSlice per
// cluster, every endpoint ready.
func (c *cluster) createHeadless(ctx context.Context) error {
	if err := c.createImport(ctx, c.version.serviceImport(headlessNamespace, headlessName, "Headless", nil, c.fx.clusters)); err != nil {
		return err
	}
	return parallel(ctx, c.fx.clusters, c.fx.clusters, func(ctx context.Context, cl int) error {
		var ips []string
		for e := range c.fx.endpoints {
			ips = append(ips, endpointIP(cl, e))
		}
		return c.createSlice(ctx, slice(headlessNamespace, headlessName+"-"+clusterID(cl), headlessName, cl, ips...))
	})
}

// verifyReadBack reads import 0 and the headless import back through the
// version they were written in and checks that their fields survived: with
// conversion strategy None the API server prunes an object against the
// schema of the storage version, so a version that is not the storage
// version is silently emptied.
func (c *cluster) verifyReadBack(ctx context.Context) error {
	for _, k := range []struct{ ns, name, typ string }{
		{c.fx.namespace(0), importName(0), "ClusterSetIP"},
		{headlessNamespace, headlessName, "Headless"},
	} {
		u, err := c.dyn.Resource(c.version.gvr()).Namespace(k.ns).Get(ctx, k.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		im, err := cache.ReadImport(u)
		if err != nil {
			return err
		}
		if !im.HasData || im.Headless != (k.typ == "Headless") {
			return fmt.Errorf("%s: ServiceImport %s/%s read back through %s is not a %s import: the API server dropped its fields (is %s the CRD's storage version?)",
				c.name, k.ns, k.name, c.version, k.typ, c.version)
		}
	}
	return nil
}

// setIP changes import i's ClusterSetIP with one merge patch.
func (c *cluster) setIP(ctx context.Context, i int, ip string) error {
	_, err := c.dyn.Resource(c.version.gvr()).Namespace(c.fx.namespace(i)).
		Patch(ctx, importName(i), types.MergePatchType, c.version.ipsPatch(ip), metav1.PatchOptions{})
	return err
}

// parallel calls f(ctx, 0..n-1) from at most workers goroutines and
// returns the first error, after which no more calls start.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := range n {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

// loadFixture creates the namespaces, n ClusterSetIP imports and the headless
// import in every cluster at once, and says how long it took.
func loadFixture(ctx context.Context, clusters []*cluster, n int) error {
	start := time.Now()
	err := parallel(ctx, len(clusters), len(clusters), func(ctx context.Context, k int) error {
		c := clusters[k]
		if err := c.createNamespaces(ctx); err != nil {
			return fmt.Errorf("%s: namespaces: %w", c.name, err)
		}
		if err := c.createHeadless(ctx); err != nil {
			return fmt.Errorf("%s: headless import: %w", c.name, err)
		}
		if err := c.createImports(ctx, n, 32); err != nil {
			return fmt.Errorf("%s: imports: %w", c.name, err)
		}
		return c.verifyReadBack(ctx)
	})
	if err != nil {
		return err
	}
	logf("fixture: %d ClusterSetIP imports and 1 headless import (%d×%d endpoints) in each of %d control planes in %.1fs",
		n, clusters[0].fx.clusters, clusters[0].fx.endpoints, len(clusters), time.Since(start).Seconds())
	return nil
}

// churnHeadless is how many small headless imports -scale creates for the
// EndpointSlice writes of the churn measurement: churn-<i>.headless, each
// with one EndpointSlice of one endpoint. At 100 writes a second each is
// rewritten every few seconds, long after its last write was answered.
const churnHeadless = 500

func churnName(i int) string { return fmt.Sprintf("churn-%03d", i) }

func churnFQDN(i int) string { return churnName(i) + "." + headlessNamespace + ".svc." + zone + "." }

// createChurnHeadless creates the churn imports and their EndpointSlices.
func (c *cluster) createChurnHeadless(ctx context.Context) error {
	return parallel(ctx, 16, churnHeadless, func(ctx context.Context, i int) error {
		if err := c.createImport(ctx, c.version.serviceImport(headlessNamespace, churnName(i), "Headless", nil, 1)); err != nil {
			return err
		}
		return c.createSlice(ctx, slice(headlessNamespace, churnName(i), churnName(i), 0, fmt.Sprintf("10.151.%d.%d", i>>8, i&255)))
	})
}

// setEndpoint replaces churn import i's one endpoint address with one merge
// patch of its EndpointSlice.
func (c *cluster) setEndpoint(ctx context.Context, i int, ip string) error {
	patch := fmt.Sprintf(`{"endpoints":[{"addresses":[%q],"conditions":{"ready":true}}]}`, ip)
	_, err := c.kube.DiscoveryV1().EndpointSlices(headlessNamespace).Patch(ctx, churnName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
	return err
}
