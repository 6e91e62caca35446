package e2e

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	rbacv1 "k8s.io/api/rbac/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// stockUser is the identity of stock CoreDNS's kubernetes plugin.
const stockUser = "coredns-stock"

// TestQuietWhenIdle counts, in kube-apiserver's audit log, the requests
// beyond its watches that one replica of ours (no options, deploy/rbac.yaml)
// makes while nothing changes, side by side with stock CoreDNS's kubernetes
// plugin and its multicluster option, on a control plane of their own with
// mcs-api v0.5.2's CRD: ours makes at most one a minute. Then a ServiceImport
// version that starts being served, and one that stops, are followed within
// 5 seconds, without a restart.
func TestQuietWhenIdle(t *testing.T) {
	t.Parallel()
	r := migStartWith(t, "quiet", "quiet", harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{migUpstreamCRD(t)}, Audit: true})
	r.Create(migImport("v1beta1", "quiet", "web", "ClusterSetIP", "10.72.0.1"))
	r.runCoreDNS()
	r.Answers("web.quiet.svc.clusterset.local.", "10.72.0.1")
	stock := r.stockCoreDNS()
	name := "web.quiet.svc.clusterset.local."
	eventually(t, stock, name, "A", want{Answer: []string{a(name, "10.72.0.1")}})

	checkQuietIdle(t, r)
	checkVersionServedAnswers(t, r)
	checkVersionUnservedUnwatched(t, r)
	r.Answers(name, "10.72.0.1")
	r.CheckLog()
}

// checkQuietIdle checks that, idle for harness.QuietWindow, ours makes at most one
// request a minute beyond its watches, and logs how many stock made. The
// audit log does hold both replicas' requests: their first lists.
func checkQuietIdle(t *testing.T, r *migRig) {
	t.Helper()
	for _, user := range []string{harness.PluginUser, stockUser} {
		if evs, err := r.Env.AuditEvents(user, time.Time{}); err != nil || len(harness.BeyondWatches(evs)) == 0 {
			t.Fatalf("no request of %s in the audit log (%v): the log or its filter is wrong", user, err)
		}
	}
	since := time.Now()
	time.Sleep(harness.QuietWindow)
	ours, err := r.Env.AuditEvents(harness.PluginUser, since)
	if err != nil {
		t.Fatal(err)
	}
	theirs, err := r.Env.AuditEvents(stockUser, since)
	if err != nil {
		t.Fatal(err)
	}
	ours, theirs = harness.BeyondWatches(ours), harness.BeyondWatches(theirs)
	perMinute := func(evs []auditv1.Event) float64 { return float64(len(evs)) / harness.QuietWindow.Minutes() }
	r.Logf("idle for %s: ours made %d requests beyond its watches (%.2f a minute: %s), stock %d (%.2f a minute: %s)",
		harness.QuietWindow, len(ours), perMinute(ours), harness.AuditSummary(ours), len(theirs), perMinute(theirs), harness.AuditSummary(theirs))
	if perMinute(ours) > 1 {
		t.Errorf("idle, ours made %.2f requests a minute beyond its watches, want at most 1: %s", perMinute(ours), harness.AuditSummary(ours))
	}
}

// checkVersionServedAnswers serves v1alpha2, as the storage version, and
// checks that an object written through it at once answers within 5s.
func checkVersionServedAnswers(t *testing.T, r *migRig) {
	t.Helper()
	r.InstallCRD(migV1alpha2StorageCRD(t))
	changed := time.Now()
	root := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1alpha2", "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": "quiet", "name": "api"},
		"spec":     map[string]any{},
		"type":     "ClusterSetIP", "ips": []any{"10.72.0.2"},
		"ports": []any{map[string]any{"name": "http", "protocol": "TCP", "port": int64(80)}},
	}}
	harness.Eventually(t, 5*time.Second, func() error {
		_, err := r.Env.Dynamic.Resource(cache.ServiceImports("v1alpha2")).Namespace("quiet").Create(r.Ctx, root, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
	apiName := "api.quiet.svc.clusterset.local."
	harness.Eventually(t, 5*time.Second-time.Since(changed), func() error {
		if got := dig(t, r.DNS, apiName, "A"); !strings.Contains(got.String(), "10.72.0.2") {
			return fmt.Errorf("%s: %s", apiName, got)
		}
		return nil
	})
	r.Logf("v1alpha2 served: an object written through it answered %.2fs after the CRD change", time.Since(changed).Seconds())
}

// checkVersionUnservedUnwatched stops serving v1alpha2, v1beta1 the storage
// version once more, and checks that the plugin stops watching it within 5s.
func checkVersionUnservedUnwatched(t *testing.T, r *migRig) {
	t.Helper()
	r.UpdateCRD(func(crd *apiextensionsv1.CustomResourceDefinition) {
		if err := harness.SetStorage(crd, "v1beta1"); err != nil {
			t.Fatal(err)
		}
		for i := range crd.Spec.Versions {
			if crd.Spec.Versions[i].Name == "v1alpha2" {
				crd.Spec.Versions[i].Served = false
			}
		}
	})
	changed := time.Now()
	harness.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(r.DNS.Output(), "ServiceImport v1alpha2 is no longer served") {
			return errors.New("the plugin still watches v1alpha2")
		}
		return nil
	})
	r.Logf("v1alpha2 no longer served: the plugin stopped watching it %.2fs after the CRD change", time.Since(changed).Seconds())
}

// chartUser is our CoreDNS run with the rules of the official coredns Helm
// chart (coredns/helm, chart 1.46: templates/clusterrole.yaml with
// rbac.multiclusterEnable), which grant no read of the CRD.
const chartUser = "coredns-chart"

// chartClusterRole is that chart's ClusterRole, rule for rule.
func chartClusterRole() *rbacv1.ClusterRole {
	return &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: chartUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{cache.ServiceImportResource.Group}, Resources: []string{"serviceexports", "serviceimports"}, Verbs: []string{"list", "watch"}},
		},
	}
}

// TestQuietWithChartRules: with exactly the official coredns chart's rules
// (no read of the CRD), ours answers, says once which rule is missing, and
// asks the API server at most 3 times a minute beyond its watches while
// idle (it asked 90 times before it learnt to).
func TestQuietWithChartRules(t *testing.T) {
	t.Parallel()
	r := migStartWith(t, "chart", "chart", harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{migUpstreamCRD(t)}, Audit: true})
	r.rules = chartRules
	r.Create(migImport("v1beta1", "chart", "web", "ClusterSetIP", "10.73.0.1"))
	r.runCoreDNS()
	r.Answers("web.chart.svc.clusterset.local.", "10.73.0.1")
	missing := "cannot watch the ServiceImport CRD"
	harness.Eventually(t, 10*time.Second, func() error {
		if !strings.Contains(r.DNS.Output(), missing) {
			return errors.New("the missing CRD rule is not logged yet")
		}
		return nil
	})
	since := time.Now()
	time.Sleep(harness.QuietWindow)
	evs, err := r.Env.AuditEvents(chartUser, since)
	if err != nil {
		t.Fatal(err)
	}
	evs = harness.BeyondWatches(evs)
	perMinute := float64(len(evs)) / harness.QuietWindow.Minutes()
	r.Logf("idle for %s with the coredns chart's rules: %d requests beyond its watches (%.2f a minute: %s)",
		harness.QuietWindow, len(evs), perMinute, harness.AuditSummary(evs))
	if perMinute > 3 {
		t.Errorf("idle with the chart's rules, ours made %.2f requests a minute beyond its watches, want at most 3: %s", perMinute, harness.AuditSummary(evs))
	}
	if n := strings.Count(r.DNS.Output(), missing); n != 1 {
		t.Errorf("the missing CRD rule logged %d times, want once:\n%s", n, r.DNS.Output())
	}
	r.Answers("web.chart.svc.clusterset.local.", "10.73.0.1")
	r.CheckLog()
}

// stockCoreDNS starts stock CoreDNS's kubernetes plugin with its
// multicluster option (it reads v1alpha1), as stockUser with the ClusterRole
// CoreDNS's own deployment grants it.
func (r *migRig) stockCoreDNS() *harness.CoreDNS {
	r.T.Helper()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: stockUser},
		Rules: []rbacv1.PolicyRule{
			{APIGroups: []string{""}, Resources: []string{"endpoints", "services", "pods", "namespaces"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{"discovery.k8s.io"}, Resources: []string{"endpointslices"}, Verbs: []string{"list", "watch"}},
			{APIGroups: []string{cache.ServiceImportResource.Group}, Resources: []string{cache.ServiceImportResource.Resource}, Verbs: []string{"list", "watch"}},
		},
	}
	id, err := r.Env.Identity(r.Ctx, stockUser, role)
	if err != nil {
		r.T.Fatal(err)
	}
	return harness.RunCoreDNS(r.T, coredns, harness.CoreDNSOptions{
		Zones:   []string{"cluster.local", "clusterset.local"},
		Plugins: "kubernetes cluster.local clusterset.local {\n\tkubeconfig " + id.Kubeconfig + "\n\tmulticluster clusterset.local\n}\n",
	})
}
