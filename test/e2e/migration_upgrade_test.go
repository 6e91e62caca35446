package e2e

import (
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestUpgradeOverUpstreamCRD installs deploy/crds over mcs-api v0.5.2's CRD
// as a cluster running an MCS controller has it, on a control plane of its
// own, under continuous queries, with no options: objects stored through
// v1beta1 are answered; `kubectl apply -f deploy/crds/` succeeds; every
// object reads back whole through v1beta1, which stays the storage version;
// v1alpha2 is served; not one lookup fails and every name keeps answering,
// with deploy/rbac.yaml's rules or the coredns chart's.
func TestUpgradeOverUpstreamCRD(t *testing.T) {
	t.Parallel()
	migEachRules(t, testUpgradeOverUpstreamCRD)
}

func testUpgradeOverUpstreamCRD(t *testing.T, rules migRules) {
	r := migStartRules(t, rules, "deploy/crds over mcs-api v0.5.2's CRD", "upgrade", migUpstreamCRD(t))
	r.begin("v1beta1", "v1beta1")
	before, err := r.Env.Dynamic.Resource(cache.ServiceImports("v1beta1")).Namespace(r.NS).List(r.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(before.Items) != migCount+1 {
		t.Fatalf("%d ServiceImports stored, want %d", len(before.Items), migCount+1)
	}

	r.Probe()
	r.Settle("mcs-api v0.5.2's CRD, objects written through v1beta1")

	kubeconfig := filepath.Join(r.Env.TempDir(), "admin.kubeconfig")
	if err := r.Env.WriteAdminKubeconfig(kubeconfig); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(r.Ctx, r.Env.KubectlPath(), "--kubeconfig", kubeconfig,
		"apply", "-f", filepath.Join(r.Env.Repo, "deploy", "crds")+string(filepath.Separator)).CombinedOutput()
	r.CRDChanged = time.Now()
	r.Logf("kubectl apply -f deploy/crds/: %s", strings.TrimSpace(string(out)))
	if err != nil {
		t.Fatalf("kubectl apply -f deploy/crds/: %v\n%s", err, out)
	}
	r.WaitServed("v1alpha2", true)
	r.Settle("deploy/crds applied")

	// Nothing stored is lost: every object reads back through v1beta1 as it
	// was, metadata and all, and v1beta1 stays the storage version.
	after, err := r.Env.Dynamic.Resource(cache.ServiceImports("v1beta1")).Namespace(r.NS).List(r.Ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(after.Items) != len(before.Items) {
		t.Errorf("%d ServiceImports after the apply, %d before", len(after.Items), len(before.Items))
	}
	for _, b := range before.Items {
		i := slices.IndexFunc(after.Items, func(u unstructured.Unstructured) bool { return u.GetName() == b.GetName() })
		if i < 0 {
			t.Errorf("%s lost", b.GetName())
			continue
		}
		a := after.Items[i]
		if !apiequality.Semantic.DeepEqual(a.Object, b.Object) {
			t.Errorf("%s changed by the apply:\nbefore %v\nafter  %v", b.GetName(), b.Object, a.Object)
		}
	}
	crd := r.CRD()
	if s := harness.StorageVersion(crd); s != "v1beta1" {
		t.Errorf("storage version %s after the apply, want v1beta1", s)
	}
	if got := crd.Status.StoredVersions; !slices.Equal(got, []string{"v1beta1"}) {
		t.Errorf("storedVersions %v after the apply, want [v1beta1]", got)
	}
	if v := harness.CRDVersion(crd, "v1alpha2"); v == nil || !v.Served {
		t.Error("v1alpha2 not served after the apply")
	}
	r.answeredFrom("v1beta1")

	// Writes through v1beta1 keep showing.
	r.finish("v1beta1", func(u *unstructured.Unstructured, ip string) {
		u.Object["spec"].(map[string]any)["ips"] = []any{ip}
	})
}
