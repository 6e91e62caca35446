package e2e

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

var (
	siV1 = cache.ServiceImports("v1alpha1")
	siV2 = cache.ServiceImports("v1alpha2")
)

// projectCRD is deploy/crds' ServiceImport CRD, with only the named versions
// served, the first of them the storage version.
func projectCRD(t testing.TB, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	repo, err := harness.RepoRoot()
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(repo, "deploy/crds/multicluster.x-k8s.io_serviceimports.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.Unmarshal(data, crd); err != nil {
		t.Fatal(err)
	}
	var keep []apiextensionsv1.CustomResourceDefinitionVersion
	for _, v := range crd.Spec.Versions {
		if i := slices.Index(versions, v.Name); i >= 0 {
			v.Served, v.Storage = true, i == 0
			keep = append(keep, v)
		}
	}
	crd.Spec.Versions = keep
	return crd
}

func importV1(ns, name, ip string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha1", "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": ns, "name": name},
		"spec": map[string]any{"type": "ClusterSetIP", "ips": []any{ip},
			"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}},
	}}
}

// TestMigrationFromV1alpha1 walks a ClusterSet through the whole migration on
// a control plane of its own, under continuous queries: only v1alpha1 served,
// v1alpha2 added as the storage version, every object rewritten through
// v1alpha2, v1alpha1 removed from storedVersions and from the CRD, then an
// object updated. Not one lookup may fail.
func TestMigrationFromV1alpha1(t *testing.T) {
	t.Parallel()
	menv, err := harness.Start(harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{projectCRD(t, "v1alpha1")}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = menv.Stop() })
	ctx, cancel := harness.Context(5 * time.Minute)
	defer cancel()
	id, err := menv.PluginIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ext := apiextensions.NewForConfigOrDie(menv.Config)

	const ns, count = "migrate", 12
	if _, err := menv.ApplyYAML(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"); err != nil {
		t.Fatal(err)
	}
	ip := func(i, gen int) string { return fmt.Sprintf("10.%d.0.%d", 60+gen, i+1) }
	for i := range count {
		if _, err := menv.Dynamic.Resource(siV1).Namespace(ns).Create(ctx, importV1(ns, fmt.Sprintf("svc%d", i), ip(i, 0)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	promPort, err := harness.FreeTCPPort()
	if err != nil {
		t.Fatal(err)
	}
	dnsSrv := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Plugins: fmt.Sprintf("prometheus 127.0.0.1:%d\n", promPort) + harness.MulticlusterBlock(id.Kubeconfig, "fallback v1alpha1"),
	})
	metric := func(name string) (float64, error) {
		return scrape(fmt.Sprintf("http://127.0.0.1:%d/metrics", promPort), name)
	}
	wantMetric := func(name string, value float64) {
		t.Helper()
		harness.Eventually(t, 10*time.Second, func() error {
			v, err := metric(name)
			if err != nil {
				return err
			}
			if v != value {
				return fmt.Errorf("%s = %v, want %v", name, v, value)
			}
			return nil
		})
	}
	p := &prober{addr: dnsSrv.Addr(), want: map[string][]string{}}
	for i := range count {
		name := fmt.Sprintf("svc%d.%s.svc.clusterset.local.", i, ns)
		eventually(t, dnsSrv, name, "A", want{Answer: []string{a(name, ip(i, 0))}})
		p.expect(name, ip(i, 0))
	}

	wantMetric(`coredns_multicluster_serviceimports{version="v1alpha1"}`, count)
	wantMetric(`coredns_multicluster_serviceimports{version="v1alpha2"}`, 0)

	pctx, stopProbe := context.WithCancel(ctx)
	probeDone := make(chan struct{})
	go func() { defer close(probeDone); p.run(pctx) }()
	report := func() {
		stopProbe()
		<-probeDone
		t.Logf("migration: %d lookups during the migration, %d failed", p.total.Load(), p.failed.Load())
		fmt.Printf("migration: %d lookups during the migration, %d failed\n", p.total.Load(), p.failed.Load())
		for _, s := range p.samples {
			t.Error(s)
		}
	}
	defer func() {
		if pctx.Err() == nil {
			report()
		}
	}()
	settle := func(what string) {
		t.Logf("migration: %s", what)
		time.Sleep(probeWindow)
	}

	// v1alpha2 becomes served and the storage version; v1alpha1 stays served.
	crd, err := ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, "serviceimports.multicluster.x-k8s.io", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	both := projectCRD(t, "v1alpha2", "v1alpha1")
	crd.Spec.Versions = both.Spec.Versions
	crd.Spec.Conversion = both.Spec.Conversion
	if crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func() error {
		_, err := menv.Dynamic.Resource(siV2).Namespace(ns).List(ctx, metav1.ListOptions{})
		return err
	})
	settle("v1alpha2 served as the storage version")

	// Every object is rewritten through v1alpha2: read (pruned to nothing),
	// fields set at the root, written back.
	for i := range count {
		u, err := menv.Dynamic.Resource(siV2).Namespace(ns).Get(ctx, fmt.Sprintf("svc%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := u.Object["type"]; ok {
			t.Fatalf("svc%d read through v1alpha2 has root fields before the rewrite: %v", i, u.Object)
		}
		u.Object["type"] = "ClusterSetIP"
		u.Object["ips"] = []any{ip(i, 0)}
		u.Object["ports"] = []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}}
		if _, err := menv.Dynamic.Resource(siV2).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond) // spread the writes over the probe
	}
	settle("every object rewritten through v1alpha2")
	wantMetric(`coredns_multicluster_serviceimports{version="v1alpha1"}`, 0)
	wantMetric(`coredns_multicluster_serviceimports{version="v1alpha2"}`, count)

	// Written through v1alpha1 now that v1alpha2 is the storage version, an
	// object loses its fields at the API server: absent, logged and counted.
	if _, err := menv.Dynamic.Resource(siV1).Namespace(ns).Create(ctx, importV1(ns, "lost", "10.99.0.1"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if u, err := menv.Dynamic.Resource(siV1).Namespace(ns).Get(ctx, "lost", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	} else if _, ok := u.Object["spec"].(map[string]any)["type"]; ok {
		t.Logf("the API server kept v1alpha1 fields of an object written after the storage flip: %v", u.Object["spec"])
	}
	harness.Eventually(t, 10*time.Second, func() error {
		v, err := metric(`coredns_multicluster_skipped_objects_total{kind="ServiceImport",reason="data_lost"}`)
		if err != nil {
			return err
		}
		if v < 1 {
			return fmt.Errorf("data loss not counted")
		}
		return nil
	})
	expect(t, dnsSrv, defaultTTL, "lost."+ns+".svc.clusterset.local.", "A", nxdomain())
	if !strings.Contains(dnsSrv.Output(), "lost: data_lost") {
		t.Error("data loss not logged")
	}

	// v1alpha1 leaves storedVersions, then the CRD.
	crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().Get(ctx, crd.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	crd.Status.StoredVersions = []string{"v1alpha2"}
	if crd, err = ext.ApiextensionsV1().CustomResourceDefinitions().UpdateStatus(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	crd.Spec.Versions = projectCRD(t, "v1alpha2").Spec.Versions
	if _, err = ext.ApiextensionsV1().CustomResourceDefinitions().Update(ctx, crd, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	harness.Eventually(t, 30*time.Second, func() error {
		if _, err := menv.Dynamic.Resource(siV1).Namespace(ns).List(ctx, metav1.ListOptions{}); err == nil {
			return fmt.Errorf("v1alpha1 still served")
		}
		return nil
	})
	settle("v1alpha1 dropped from storedVersions and from the CRD")

	// Updates after the migration show, the second within 2 seconds. The
	// first may wait for the plugin's watch to recover from the CRD change
	// (see migRig.updatesAfter).
	update := func(i int) time.Duration {
		u, err := menv.Dynamic.Resource(siV2).Namespace(ns).Get(ctx, fmt.Sprintf("svc%d", i), metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		u.Object["ips"] = []any{ip(i, 1)}
		name := fmt.Sprintf("svc%d.%s.svc.clusterset.local.", i, ns)
		p.forget(name) // while the write is in flight either answer is right
		written := time.Now()
		if _, err := menv.Dynamic.Resource(siV2).Namespace(ns).Update(ctx, u, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		var seen time.Duration
		harness.Eventually(t, 15*time.Second, func() error {
			r, err := dnsSrv.Dig(name, "A")
			if err != nil {
				return err
			}
			if err := (want{Answer: []string{a(name, ip(i, 1))}}).Check(r.Msg(), defaultTTL); err != nil {
				return err
			}
			seen = time.Since(written)
			return nil
		})
		p.expect(name, ip(i, 1))
		return seen
	}
	seen := update(1)
	t.Logf("migration: the first update after the migration answered in %.2fs", seen.Seconds())
	fmt.Printf("migration: the first update after the migration answered in %.2fs\n", seen.Seconds())
	time.Sleep(500 * time.Millisecond)
	seen = update(0)
	t.Logf("migration: the update after the migration answered in %.2fs", seen.Seconds())
	fmt.Printf("migration: the update after the migration answered in %.2fs\n", seen.Seconds())
	if seen > 2*time.Second {
		t.Errorf("update took %v to show, want at most 2s", seen)
	}
	time.Sleep(time.Second)
	report()
	if p.total.Load() < 100 {
		t.Errorf("only %d lookups: the probe did not run", p.total.Load())
	}

	// Every name answers through dig after the migration, from v1alpha2.
	for i := 2; i < count; i++ {
		name := fmt.Sprintf("svc%d.%s.svc.clusterset.local.", i, ns)
		expect(t, dnsSrv, defaultTTL, name, "A", want{Answer: []string{a(name, ip(i, 0))}})
	}
	for i := range 2 {
		name := fmt.Sprintf("svc%d.%s.svc.clusterset.local.", i, ns)
		expect(t, dnsSrv, defaultTTL, name, "A", want{Answer: []string{a(name, ip(i, 1))}})
	}
	if strings.Contains(dnsSrv.Output(), "panic") {
		t.Error("CoreDNS panicked")
	}
}

// scrape reads one sample of a Prometheus text exposition; name includes the
// labels as printed, e.g. `m{a="b"}`.
func scrape(url, name string) (float64, error) {
	resp, err := http.Get(url)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	for line := range strings.Lines(string(body)) {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), name+" "); ok {
			return strconv.ParseFloat(rest, 64)
		}
	}
	return 0, fmt.Errorf("%s not among the metrics", name)
}
