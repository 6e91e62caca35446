package e2e

import (
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

var siV2 = cache.ServiceImports("v1alpha2")

// projectCRD is deploy/crds' ServiceImport CRD, with only the named versions
// served, the first of them the storage version.
func projectCRD(t testing.TB, versions ...string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := migReadCRD(t, "deploy/crds")
	if err := harness.KeepVersions(crd, versions...); err != nil {
		t.Fatal(err)
	}
	return crd
}

// TestMigrationFromV1alpha1 walks a ClusterSet through the whole migration on
// a control plane of its own, under continuous queries: only v1alpha1 served,
// v1alpha2 added as the storage version, every object rewritten through
// v1alpha2, an object written through v1alpha1 losing its fields, v1alpha1
// removed from storedVersions and from the CRD, then an object updated. Not
// one lookup may fail, with deploy/rbac.yaml's rules or the coredns chart's
// (no read of the CRD: v1alpha2 is learnt of when the objects move into it).
func TestMigrationFromV1alpha1(t *testing.T) {
	t.Parallel()
	migEachRules(t, testMigrationFromV1alpha1)
}

func testMigrationFromV1alpha1(t *testing.T, rules migRules) {
	r := migStartRules(t, rules, "v1alpha1 to v1alpha2", "fromv1alpha1", projectCRD(t, "v1alpha1"))
	r.begin("v1alpha1", "v1alpha1", "fallback v1alpha1")

	r.Probe()
	r.Settle("only v1alpha1 served, objects written through it")

	// v1alpha2 becomes served and the storage version; v1alpha1 stays served.
	both := projectCRD(t, "v1alpha2", "v1alpha1")
	r.UpdateCRD(func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions, crd.Spec.Conversion = both.Spec.Versions, both.Spec.Conversion
	})
	r.WaitServed("v1alpha2", true)
	r.Settle("v1alpha2 served as the storage version")
	r.answeredFrom("v1alpha1")

	r.Rewrite("v1alpha2", migNames(), migToRoot(t))
	r.Settle("every object rewritten through v1alpha2")
	r.answeredFrom("v1alpha2")

	// Written through v1alpha1 now that v1alpha2 is the storage version, an
	// object loses its fields at the API server: absent, logged and counted.
	r.Create(migImport("v1alpha1", r.NS, "lost", "ClusterSetIP", "10.99.0.1"))
	harness.Eventually(t, 10*time.Second, func() error {
		v, err := harness.ScrapeValue(r.DNS.MetricsURL, "coredns_multicluster_skipped_objects_total", "kind", "ServiceImport", "reason", "data_lost")
		if err == nil && v < 1 {
			err = fmt.Errorf("data loss not counted")
		}
		return err
	})
	expect(t, r.DNS, defaultTTL, "lost."+r.NS+".svc.clusterset.local.", "A", nxdomain())
	if !strings.Contains(r.DNS.Output(), "lost: data_lost") {
		t.Error("data loss not logged")
	}

	// v1alpha1 leaves storedVersions, then the CRD.
	r.keepOnly("v1alpha2", "v1alpha1")

	// Updates after the migration show, the second within 2 seconds.
	r.finish("v1alpha2", func(u *unstructured.Unstructured, ip string) { u.Object["ips"] = []any{ip} })
}
