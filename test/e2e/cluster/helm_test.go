package cluster

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// release is the chart's release, as deploy/README.md installs it.
const release = "coredns-multicluster"

// helm runs the helm v4 that hack/generate.sh builds from the Go module
// proxy (.cache/tools/helm), as the cluster's admin.
func helm(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, filepath.Join(env.Repo, ".cache", "tools", "helm"), append(args, "--kubeconfig", kubeconfig)...)
	tmp := filepath.Join(clusterDir, "helm")
	cmd.Env = append(cmd.Environ(), "HELM_CACHE_HOME="+tmp+"/cache", "HELM_CONFIG_HOME="+tmp+"/config", "HELM_DATA_HOME="+tmp+"/data")
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// TestHelmChart installs deploy/chart/coredns-multicluster with helm on the
// cluster: its pods become Ready and the client pod resolves the zone
// through the chart's Service; a helm upgrade that changes a value rolls the
// pods without a failed lookup and never with fewer ready pods than the
// PodDisruptionBudget allows; helm uninstall leaves none of its objects.
func TestHelmChart(t *testing.T) {
	ctx, cancel := harness.Context(15 * time.Minute)
	defer cancel()
	chart := filepath.Join(env.Repo, "deploy", "chart", "coredns-multicluster")
	if out, err := helm(ctx, "install", release, chart, "--namespace", ns, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm install: %v\n%s", err, out)
	}
	svc, err := env.Clientset.CoreV1().Services(ns).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// helm's --wait ends when the pods are Ready; kube-proxy forwards the
	// Service to them a moment later (until then: connection refused).
	at := "@" + svc.Spec.ClusterIP
	harness.Eventually(t, 30*time.Second, func() error {
		r, err := dig("dns-version.clusterset.local.", "TXT", at)
		if err == nil && !strings.Contains(r.Output, `"1.0.0"`) {
			err = fmt.Errorf("dns-version through the chart's Service:\n%s", r)
		}
		return err
	})
	zoneAnswers(t, true, at)

	// The chart's Service asked in a loop while helm upgrade rolls the pods.
	chartDNS := watchTerminations(t, ns, release)
	if err := startPod(ctx, "chart-prober", prober(lookup("nslookup "+zoneName+" "+svc.Spec.ClusterIP, zoneName))); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = env.Clientset.CoreV1().Pods("default").Delete(ctx, "chart-prober", metav1.DeleteOptions{}) }()
	upgrade := time.Now()
	minReady := watchReady(ctx, t)
	if out, err := helm(ctx, "upgrade", release, chart, "--namespace", ns, "--reuse-values",
		"--set", "resources.requests.memory=80Mi", "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm upgrade: %v\n%s", err, out)
	}
	dep, err := env.Clientset.AppsV1().Deployments(ns).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The changed value rolled the pods: a second revision, all of it.
	if got, rev := dep.Spec.Template.Spec.Containers[0].Resources.Requests.Memory().String(), dep.Annotations["deployment.kubernetes.io/revision"]; got != "80Mi" || rev != "2" || dep.Status.UpdatedReplicas != *dep.Spec.Replicas {
		t.Errorf("after helm upgrade: memory request %s, revision %s, %d of %d replicas updated", got, rev, dep.Status.UpdatedReplicas, *dep.Spec.Replicas)
	}
	pdb, err := env.Clientset.PolicyV1().PodDisruptionBudgets(ns).Get(ctx, release, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	floor := *dep.Spec.Replicas - int32(pdb.Spec.MaxUnavailable.IntValue())
	t.Logf("helm upgrade: at least %d of %d pods ready throughout (the PodDisruptionBudget allows %d)", minReady.Load(), *dep.Spec.Replicas, floor)
	if minReady.Load() < floor {
		t.Errorf("the rollout went down to %d ready pods, below the %d the PodDisruptionBudget keeps", minReady.Load(), floor)
	}
	checkProber(ctx, t, "chart-prober", upgrade, chartDNS)

	if out, err := helm(ctx, "uninstall", release, "--namespace", ns, "--wait", "--timeout", "5m"); err != nil {
		t.Fatalf("helm uninstall: %v\n%s", err, out)
	}
	harness.Eventually(t, 2*time.Minute, func() error { return releaseObjects(ctx) })
}

// watchReady follows the release's Deployment until ctx ends and keeps the
// fewest ready replicas it saw.
func watchReady(ctx context.Context, t *testing.T) *atomic.Int32 {
	t.Helper()
	var least atomic.Int32
	least.Store(1 << 30)
	w, err := env.Clientset.AppsV1().Deployments(ns).Watch(ctx, metav1.ListOptions{FieldSelector: "metadata.name=" + release})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Stop)
	go func() {
		for ev := range w.ResultChan() {
			if dep, ok := ev.Object.(*appsv1.Deployment); ok && dep.Status.ReadyReplicas < least.Load() {
				least.Store(dep.Status.ReadyReplicas)
			}
		}
	}()
	return &least
}

// releaseObjects is nil once no object of the release is left: every kind
// the chart can render, found by the release's label.
func releaseObjects(ctx context.Context) error {
	sel := metav1.ListOptions{LabelSelector: "app.kubernetes.io/instance=" + release}
	var left []string
	for _, gvr := range []schema.GroupVersionResource{
		{Group: "apps", Version: "v1", Resource: "deployments"},
		{Version: "v1", Resource: "pods"},
		{Version: "v1", Resource: "services"},
		{Version: "v1", Resource: "configmaps"},
		{Version: "v1", Resource: "serviceaccounts"},
		{Group: "policy", Version: "v1", Resource: "poddisruptionbudgets"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterroles"},
		{Group: "rbac.authorization.k8s.io", Version: "v1", Resource: "clusterrolebindings"},
	} {
		list, err := env.Dynamic.Resource(gvr).List(ctx, sel)
		if err != nil {
			return err
		}
		for _, o := range list.Items {
			left = append(left, gvr.Resource+"/"+o.GetName())
		}
	}
	if _, err := env.Clientset.RbacV1().ClusterRoles().Get(ctx, release, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		left = append(left, "clusterrole/"+release)
	}
	if len(left) > 0 {
		return fmt.Errorf("left after helm uninstall: %s", strings.Join(left, ", "))
	}
	return nil
}
