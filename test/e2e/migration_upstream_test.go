package e2e

import (
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// TestMigrationUpstream walks a ClusterSet along upstream's own migration
// (mcs-api v0.4 to v0.5), on a control plane of its own, under continuous
// queries, with `fallback v1alpha1`: a v1alpha1-only CRD; mcs-api v0.5.2's CRD
// as released (v1beta1 the storage version); every object rewritten through
// v1beta1; storedVersions down to v1beta1; v1alpha1 no longer served; then an
// object updated. Not one lookup may fail, with deploy/rbac.yaml's rules or
// the coredns chart's.
func TestMigrationUpstream(t *testing.T) {
	t.Parallel()
	migEachRules(t, testMigrationUpstream)
}

func testMigrationUpstream(t *testing.T, rules migRules) {
	r := migStartRules(t, rules, "upstream v1alpha1 to v1beta1", "upstream", migUpstreamV1alpha1Only(t))
	r.begin("v1alpha1", "v1alpha1", "fallback v1alpha1")

	r.Probe()
	r.Settle("v1alpha1 only, objects written through v1alpha1")

	// mcs-api v0.5.2's CRD, exactly as released: v1beta1 served and the
	// storage version, v1alpha1 still served. The plugin moves its watch of
	// the spec/status shape to v1beta1.
	upstream := migUpstreamCRD(t)
	r.InstallCRD(upstream)
	r.WaitServed("v1beta1", true)
	r.Settle("mcs-api v0.5.2's CRD installed")
	r.answeredFrom("v1beta1")

	// Every object is rewritten through v1beta1, as a storage version
	// migration does: read and written back unchanged.
	r.Rewrite("v1beta1", migNames(), func(*unstructured.Unstructured) {})
	r.Settle("every object rewritten through v1beta1")
	r.answeredFrom("v1beta1")

	// v1alpha1 leaves storedVersions, then the CRD.
	r.keepOnly("v1beta1", "v1alpha1")
	if got := r.CRD().Status.StoredVersions; len(got) != 1 || got[0] != "v1beta1" {
		t.Errorf("storedVersions %v, want [v1beta1]", got)
	}

	// Updates after the migration show, the second within 2 seconds.
	r.finish("v1beta1", func(u *unstructured.Unstructured, ip string) {
		u.Object["spec"].(map[string]any)["ips"] = []any{ip}
	})
}
