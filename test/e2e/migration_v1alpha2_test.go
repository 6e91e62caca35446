package e2e

import (
	"fmt"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestMigrationV1beta1ToV1alpha2 walks a ClusterSet from upstream's v1beta1
// to our root-shape v1alpha2, on a control plane of its own, under continuous
// queries, with no options: deploy/crds (v1beta1 the storage version,
// v1alpha2 served); deploy/crds-v1alpha2-storage (v1alpha2 the storage
// version); every object rewritten through v1alpha2 with its fields at the
// root; storedVersions down to v1alpha2; v1beta1 and v1alpha1 no longer
// served; then an object updated. Not one lookup may fail, with
// deploy/rbac.yaml's rules or the coredns chart's.
func TestMigrationV1beta1ToV1alpha2(t *testing.T) {
	t.Parallel()
	migEachRules(t, testMigrationV1beta1ToV1alpha2)
}

func testMigrationV1beta1ToV1alpha2(t *testing.T, rules migRules) {
	r := migStartRules(t, rules, "v1beta1 to v1alpha2", "tov1alpha2", migShippedCRD(t))
	r.begin("v1beta1", "v1beta1")

	r.Probe()
	r.Settle("deploy/crds, objects written through v1beta1")

	// v1alpha2 becomes the storage version; the objects stay as stored.
	r.InstallCRD(migV1alpha2StorageCRD(t))
	if s := harness.StorageVersion(r.CRD()); s != "v1alpha2" {
		t.Fatalf("storage version %s after installing deploy/crds-v1alpha2-storage, want v1alpha2", s)
	}
	r.Settle("v1alpha2 the storage version")
	r.answeredFrom("v1beta1")

	// Every object is rewritten through v1alpha2: read (pruned to an empty
	// spec), its fields set at the root, written back.
	r.Rewrite("v1alpha2", migNames(), migToRoot(t))
	r.Settle("every object rewritten through v1alpha2")
	r.answeredFrom("v1alpha2")

	// v1beta1 leaves storedVersions; v1beta1 and v1alpha1 leave the CRD.
	r.keepOnly("v1alpha2", "v1beta1", "v1alpha1")

	// Updates after the migration show, the second within 2 seconds.
	r.finish("v1alpha2", func(u *unstructured.Unstructured, ip string) { u.Object["ips"] = []any{ip} })
}

// migToRoot is a migration's rewrite into the root shape: each object of
// migNames, read through v1alpha2 (pruned to an empty spec), gets its fields
// at the root.
func migToRoot(t *testing.T) func(u *unstructured.Unstructured) {
	return func(u *unstructured.Unstructured) {
		if _, ok := u.Object["type"]; ok {
			t.Fatalf("%s read through v1alpha2 has root fields before the rewrite: %v", u.GetName(), u.Object)
		}
		root := migImport("v1alpha2", "", "", "Headless")
		if strings.HasPrefix(u.GetName(), "svc") {
			var i int
			if _, err := fmt.Sscanf(u.GetName(), "svc%d", &i); err != nil {
				t.Fatal(err)
			}
			root = migImport("v1alpha2", "", "", "ClusterSetIP", migIP(i, 0))
		}
		for _, k := range []string{"type", "ips", "ports"} {
			if v, ok := root.Object[k]; ok {
				u.Object[k] = v
			}
		}
	}
}
