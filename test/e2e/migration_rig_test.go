package e2e

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// What the migration tests between the shapes share: the CRDs, the rig's
// set-up (a control plane and a CoreDNS of each test's own, so that the
// tests run side by side; the rig is the harness's, harness.Rig), and the
// steps of a migration.

// migUpstreamCRD is sigs.k8s.io/mcs-api v0.5.2's ServiceImport CRD exactly as
// released: v1alpha1 served, v1beta1 served and the storage version.
func migUpstreamCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(mcscrd.ServiceImportCRD, crd); err != nil {
		t.Fatalf("mcs-api's ServiceImport CRD: %v", err)
	}
	if got := harness.ServedVersions(crd); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) || harness.StorageVersion(crd) != "v1beta1" {
		t.Fatalf("mcs-api's ServiceImport CRD serves %v with storage %s, want [v1alpha1 v1beta1] with storage v1beta1", got, harness.StorageVersion(crd))
	}
	return crd
}

// migUpstreamV1alpha1Only is upstream's CRD reduced to its v1alpha1 version,
// served and stored: what mcs-api releases before v0.5 installed.
func migUpstreamV1alpha1Only(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := migUpstreamCRD(t)
	if err := harness.KeepVersions(crd, "v1alpha1"); err != nil {
		t.Fatal(err)
	}
	return crd
}

// migReadCRD reads the ServiceImport CRD of <repo>/<dir>.
func migReadCRD(t testing.TB, dir string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := harness.ServiceImportCRD(env.Repo, dir)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// migShippedCRD is deploy/crds' ServiceImport CRD: upstream's (v1alpha1,
// v1beta1 as storage) plus v1alpha2, served and not storage.
func migShippedCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := migReadCRD(t, "deploy/crds")
	migCheckVersions(t, "deploy/crds", crd, "v1beta1")
	return crd
}

// migV1alpha2StorageCRD is deploy/crds-v1alpha2-storage's ServiceImport CRD:
// the same versions as deploy/crds, v1alpha2 the storage version.
func migV1alpha2StorageCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := migReadCRD(t, "deploy/crds-v1alpha2-storage")
	migCheckVersions(t, "deploy/crds-v1alpha2-storage", crd, "v1alpha2")
	return crd
}

// migCheckVersions fails the test unless crd serves upstream's versions, with
// upstream's schemas, and v1alpha2, and stores storage.
func migCheckVersions(t testing.TB, what string, crd *apiextensionsv1.CustomResourceDefinition, storage string) {
	t.Helper()
	if served := harness.ServedVersions(crd); !slices.Equal(served, []string{"v1alpha1", "v1alpha2", "v1beta1"}) || harness.StorageVersion(crd) != storage {
		t.Fatalf("%s serves %v with storage %s, want [v1alpha1 v1alpha2 v1beta1] with storage %s", what, served, harness.StorageVersion(crd), storage)
	}
	for _, up := range migUpstreamCRD(t).Spec.Versions {
		ours := harness.CRDVersion(crd, up.Name)
		if ours == nil || !apiequality.Semantic.DeepEqual(ours.Schema, up.Schema) {
			t.Fatalf("%s: version %s's schema differs from mcs-api v0.5.2's", what, up.Name)
		}
	}
}

// migPorts are the ports of every ServiceImport and EndpointSlice of these
// tests.
func migPorts(typ string) []corev1.ServicePort {
	if typ == "Headless" {
		return []corev1.ServicePort{harness.TCP("pg", 5432)}
	}
	return []corev1.ServicePort{harness.TCP("http", 80)}
}

// migImport is a ServiceImport in version's shape.
func migImport(version, ns, name, typ string, ips ...string) *unstructured.Unstructured {
	return harness.Import{Namespace: ns, Name: name, Type: typ, IPs: ips, Ports: migPorts(typ)}.Object(version)
}

// migSlice is a multi-cluster EndpointSlice of headless service name, from
// cluster.
func migSlice(ns, name, cluster string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return harness.MCSSlice(ns, name+"-"+cluster, name, cluster, "mcs-controller.example.com", migPorts("Headless"), eps...)
}

// migRules are the RBAC rules a migration test's CoreDNS runs with. Every
// migration test runs with each (migEachRules): with deploy/rbac.yaml's the
// plugin watches the CRD and follows a version served at once; with the
// official coredns chart's it may not read the CRD, and learns of a version
// from discovery, asked every 30 s and at once when an object's data leaves
// the shape it reads. Not one lookup may fail either way.
type migRules int

const (
	rbacRules  migRules = iota // deploy/rbac.yaml's (harness.PluginIdentity)
	chartRules                 // exactly the official coredns chart's (chartClusterRole): no read of the CRD
)

func (m migRules) String() string {
	if m == chartRules {
		return "chart_rules"
	}
	return "rbac_yaml_rules"
}

// migEachRules runs test once with each set of rules, as parallel subtests.
func migEachRules(t *testing.T, test func(t *testing.T, rules migRules)) {
	for _, rules := range []migRules{rbacRules, chartRules} {
		t.Run(rules.String(), func(t *testing.T) {
			t.Parallel()
			test(t, rules)
		})
	}
}

// migStartRules is migStart for a CoreDNS that runs with rules.
func migStartRules(t *testing.T, rules migRules, label, ns string, crd *apiextensionsv1.CustomResourceDefinition) *migRig {
	t.Helper()
	if rules == chartRules {
		label += " (the coredns chart's rules)"
	}
	r := migStart(t, label, ns, crd)
	r.rules = rules
	return r
}

// migRig is one migration test's rig (the harness's: control plane,
// CoreDNS, prober) and the rules its CoreDNS runs with.
type migRig struct {
	*harness.Rig
	rules migRules // what runCoreDNS runs CoreDNS with
}

// migStart starts a control plane of the test's own with crd installed and
// creates namespace ns in it.
func migStart(t *testing.T, label, ns string, crd *apiextensionsv1.CustomResourceDefinition) *migRig {
	t.Helper()
	return migStartWith(t, "migration: "+label, ns, harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
}

// migStartWith is migStart with the control plane's options, for a test
// other than a migration (label starts its lines as it is).
func migStartWith(t *testing.T, label, ns string, opts harness.Options) *migRig {
	t.Helper()
	return &migRig{Rig: harness.StartRig(t, label, ns, opts)}
}

// runCoreDNS starts CoreDNS with the multicluster plugin (as the plugin's
// least-privilege identity, or with the coredns chart's rules when the rig
// says so) and the prometheus plugin.
func (r *migRig) runCoreDNS(options ...string) {
	r.T.Helper()
	var id *harness.Identity
	var err error
	if r.rules == chartRules {
		id, err = r.Env.Identity(r.Ctx, chartUser, chartClusterRole())
	} else {
		id, err = r.Env.PluginIdentity(r.Ctx)
	}
	if err != nil {
		r.T.Fatal(err)
	}
	r.RunCoreDNS(coredns, harness.CoreDNSOptions{Plugins: harness.MulticlusterBlock(id.Kubeconfig, options...)})
}

// answeredFrom waits until coredns_multicluster_serviceimports says that
// every service is answered from version and none from the other versions,
// and logs the counts. In every set-up of these tests each version served is
// read, or its shape is read through another, so
// coredns_multicluster_unread_versions must stay 0 for each.
func (r *migRig) answeredFrom(version string) {
	r.T.Helper()
	versions := []string{"v1alpha1", "v1alpha2", "v1beta1"}
	counts := map[string]float64{version: migCount + 1}
	patience := 20 * time.Second
	if r.rules == chartRules {
		// Without the CRD's watch a version served, or no longer served,
		// is learnt from discovery, asked every 30 s.
		patience += 30 * time.Second
	}
	harness.Eventually(r.T, patience, func() error {
		var errs []error
		for _, v := range versions {
			got, err := harness.ScrapeGauge(r.DNS.MetricsURL, "coredns_multicluster_serviceimports", "version", v)
			if err != nil {
				return err
			}
			if got != counts[v] {
				errs = append(errs, fmt.Errorf("serviceimports{version=%q} = %v, want %v", v, got, counts[v]))
			}
			if got, err := harness.ScrapeGauge(r.DNS.MetricsURL, "coredns_multicluster_unread_versions", "version", v); err != nil || got != 0 {
				errs = append(errs, fmt.Errorf("unread_versions{version=%q} = %v (%v), want 0", v, got, err))
			}
		}
		return errors.Join(errs...)
	})
	var parts []string
	for _, v := range versions {
		parts = append(parts, fmt.Sprintf("%s=%v", v, counts[v]))
	}
	r.Logf("coredns_multicluster_serviceimports %s", strings.Join(parts, " "))
}

// begin writes the objects through version, starts CoreDNS with options,
// and waits until every name answers and every service is answered from
// answered.
func (r *migRig) begin(version, answered string, options ...string) {
	r.T.Helper()
	r.populate(version)
	r.runCoreDNS(options...)
	r.expectAll()
	r.answeredFrom(answered)
}

// updatesAfter changes svc1, then svc0, through version with setIP, once
// the migration is over. The first change after the CRD's last change may
// wait for the plugin's watch to recover: the API server ends every watch of
// the resource about a second after a CRD update, resuming one fails with
// "too old resource version", and client-go's reflector relists only after
// its backoff (800ms, doubled on each failure within 2 minutes, with
// jitter). Its time is logged. The second change must show within 2
// seconds.
func (r *migRig) updatesAfter(version string, setIP func(u *unstructured.Unstructured, ip string)) {
	r.T.Helper()
	sinceCRD := time.Since(r.CRDChanged)
	seen, accepted := r.ChangeSeen(version, "svc1", migIP(1, 1), func(u *unstructured.Unstructured) { setIP(u, migIP(1, 1)) })
	r.Logf("the first update after the migration (%.1fs after the CRD's last change) answered in %.2fs (the API server took %.2fs to accept it)",
		sinceCRD.Seconds(), seen.Seconds(), accepted.Seconds())
	time.Sleep(500 * time.Millisecond)
	seen, accepted = r.ChangeSeen(version, "svc0", migIP(0, 1), func(u *unstructured.Unstructured) { setIP(u, migIP(0, 1)) })
	r.Logf("the update after the migration answered in %.2fs (the API server took %.2fs to accept it)", seen.Seconds(), accepted.Seconds())
	if seen > 2*time.Second {
		r.T.Errorf("update took %v to show, want at most 2s", seen)
	}
	r.Settle("svc1 and svc0 updated through " + version)
}

// keepOnly ends a migration to version: it becomes the only stored version,
// then the CRD's only version; each of gone stops being served, and every
// service is answered from version.
func (r *migRig) keepOnly(version string, gone ...string) {
	r.T.Helper()
	r.KeepStored(version)
	r.UpdateCRD(func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{*harness.CRDVersion(crd, version)}
	})
	for _, v := range gone {
		r.WaitServed(v, false)
	}
	r.Settle(strings.Join(gone, " and ") + " dropped from storedVersions and from the CRD")
	r.answeredFrom(version)
}

// finish checks a migration's end: updates through version with setIP show
// (updatesAfter), the prober saw no failure, dig gets every name, each from
// version, and CoreDNS logged nothing unexpected.
func (r *migRig) finish(version string, setIP func(u *unstructured.Unstructured, ip string)) {
	r.T.Helper()
	r.updatesAfter(version, setIP)
	r.Report()
	r.DigAll()
	r.answeredFrom(version)
	r.CheckLog()
}

// The ServiceImports of a migration test: migCount ClusterSetIP services
// svc<i> and the headless service db with endpoints in two clusters.
const migCount = 10

func migIP(i, gen int) string { return fmt.Sprintf("10.%d.0.%d", 70+gen, i+1) }

func migNames() []string {
	names := []string{"db"}
	for i := range migCount {
		names = append(names, fmt.Sprintf("svc%d", i))
	}
	return names
}

// populate creates the ServiceImports through version (spec/status
// shape) and db's EndpointSlices, waits until CoreDNS answers every name
// and has the prober check them.
func (r *migRig) populate(version string) {
	r.T.Helper()
	for i := range migCount {
		r.Create(migImport(version, r.NS, fmt.Sprintf("svc%d", i), "ClusterSetIP", migIP(i, 0)))
	}
	r.Create(migImport(version, r.NS, "db", "Headless"))
	r.CreateSlice(migSlice(r.NS, "db", "west",
		harness.Endpoint("10.1.0.11", "db-0", true),
		harness.Endpoint("10.1.0.12", "", true),
		harness.Endpoint("10.1.0.13", "db-2", false)))
	r.CreateSlice(migSlice(r.NS, "db", "east",
		harness.Endpoint("10.2.0.21", "db-0", true)))
}

// expectAll waits for every name of populate to answer.
func (r *migRig) expectAll() {
	r.T.Helper()
	for i := range migCount {
		r.Answers(r.ServiceName(fmt.Sprintf("svc%d", i)), migIP(i, 0))
	}
	r.Answers(r.ServiceName("db"), "10.1.0.11", "10.1.0.12", "10.2.0.21")
	r.Answers(r.ServiceName("db-0.west.db"), "10.1.0.11")
	r.Answers(r.ServiceName("db-0.east.db"), "10.2.0.21")
}
