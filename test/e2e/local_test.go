package e2e

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/metricname"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// clusterPropertyCRD is the ClusterProperty CRD of KEP-2149 as about-api
// defines it: cluster-scoped, about.k8s.io, v1beta1 stored and v1alpha1
// served, the value in spec.value. The about-api module is not on the Go
// module proxy, so it is written here, with only the schema the plugin reads.
func clusterPropertyCRD() *apiextensionsv1.CustomResourceDefinition {
	schema := &apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{
		"spec": {Type: "object", Required: []string{"value"}, Properties: map[string]apiextensionsv1.JSONSchemaProps{
			"value": {Type: "string", MinLength: ptr.To[int64](1), MaxLength: ptr.To[int64](128000)},
		}},
	}}
	version := func(name string, storage bool) apiextensionsv1.CustomResourceDefinitionVersion {
		return apiextensionsv1.CustomResourceDefinitionVersion{Name: name, Served: true, Storage: storage,
			Schema: &apiextensionsv1.CustomResourceValidation{OpenAPIV3Schema: schema}}
	}
	return &apiextensionsv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: cache.ClusterPropertyResource.Resource + "." + cache.ClusterPropertyResource.Group,
			// A *.k8s.io group needs the approval of its API, as about-api's CRD carries it.
			Annotations: map[string]string{"api-approved.kubernetes.io": "https://github.com/kubernetes/enhancements/pull/3084"}},
		Spec: apiextensionsv1.CustomResourceDefinitionSpec{
			Group: cache.ClusterPropertyResource.Group,
			Names: apiextensionsv1.CustomResourceDefinitionNames{Plural: cache.ClusterPropertyResource.Resource,
				Singular: "clusterproperty", Kind: "ClusterProperty", ListKind: "ClusterPropertyList"},
			Scope:    apiextensionsv1.ClusterScoped,
			Versions: []apiextensionsv1.CustomResourceDefinitionVersion{version("v1beta1", true), version("v1alpha1", false)},
		},
	}
}

// setClusterID writes the ClusterProperty cluster.clusterset.k8s.io, or
// deletes it when id is empty.
func (r *migRig) setClusterID(id string) {
	r.T.Helper()
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "about.k8s.io/v1beta1", "kind": "ClusterProperty",
		"metadata": map[string]any{"name": cache.ClusterIDProperty},
		"spec":     map[string]any{"value": id},
	}}
	var err error
	if id == "" {
		err = r.Env.Delete(r.Ctx, u)
	} else {
		_, err = r.Env.Apply(r.Ctx, u)
	}
	if err != nil {
		r.T.Fatal(err)
	}
}

// holdAnswer is how long a test of answer switches keeps each answer before
// the next change, so that the prober asks for it many times.
const holdAnswer = 500 * time.Millisecond

// switchesTo makes a change the prober watches, with the answers before
// and after it both right, and returns how long name took to answer after
// exactly ips by dig once the change was written.
func (r *migRig) switchesTo(what, name string, before, after []string, change func()) time.Duration {
	r.T.Helper()
	r.Prober.ExpectAny(name, before, after)
	start := time.Now()
	change()
	r.WaitA(syncWithin, name, after...)
	took := time.Since(start)
	r.Prober.Expect(name, after...)
	time.Sleep(holdAnswer) // the prober checks the new answer alone for a while
	r.Logf("%s: %s answers %v %.0f ms after the write", what, name, after, took.Seconds()*1000)
	return took
}

// TestLocalClusterFirst: a headless service whose ServiceImport says
// trafficDistribution PreferClose answers, at its name and port names, the
// local cluster's ready endpoints while it has one and every cluster's
// otherwise; the local cluster is the ClusterProperty's, followed without a
// restart. Under steady queries, through naming the cluster, flipping the
// readiness of its only endpoint, renaming and deleting the property, no
// lookup fails; a service without the field never changes.
func TestLocalClusterFirst(t *testing.T) {
	t.Parallel()
	const ns = "closest"
	r := migStartWith(t, "closest first", ns, harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{
		migUpstreamCRD(t), clusterPropertyCRD()}})
	east := createClosestFixture(r, ns)

	// As the plugin's identity, with deploy/rbac.yaml's rules: the
	// ClusterProperty is listed and watched by name.
	r.runCoreDNS()
	dbName, anyName := "db."+ns+".svc."+apex, "any."+ns+".svc."+apex
	all, eastOnly, westOnly := []string{"10.80.1.1", "10.80.2.1", "10.80.2.2"}, []string{"10.80.1.1"}, []string{"10.80.2.1", "10.80.2.2"}
	r.Answers(dbName, all...)
	r.Answers(anyName, "10.81.1.1", "10.81.2.1")
	r.Probe()

	var took []time.Duration
	took = append(took, r.switchesTo("ClusterProperty set to east", dbName, all, eastOnly, func() { r.setClusterID("east") }))
	checkClosestSRV(t, r, dbName)

	slicesOf := r.Env.Clientset.DiscoveryV1().EndpointSlices(ns)
	eastReady := func(ready bool) func() {
		return func() {
			if _, err := slicesOf.Update(r.Ctx, east(ready), metav1.UpdateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	for i := range 3 {
		took = append(took, r.switchesTo(fmt.Sprintf("east's endpoint not ready (%d)", i+1), dbName, eastOnly, westOnly, eastReady(false)))
		took = append(took, r.switchesTo(fmt.Sprintf("east's endpoint ready (%d)", i+1), dbName, westOnly, eastOnly, eastReady(true)))
	}
	took = append(took, r.switchesTo("ClusterProperty set to west", dbName, eastOnly, westOnly, func() { r.setClusterID("west") }))
	took = append(took, r.switchesTo("ClusterProperty deleted", dbName, westOnly, all, func() { r.setClusterID("") }))
	r.Settle("done")
	r.Report()
	slices.Sort(took)
	r.Logf("%d answer switches: median %.0f ms, slowest %.0f ms", len(took),
		took[len(took)/2].Seconds()*1000, took[len(took)-1].Seconds()*1000)
	checkClosestCountedAndLogged(t, r)
	r.CheckLog()
}

// createClosestFixture creates, in ns, the headless services db (which
// prefers close endpoints) and any (which does not), each with endpoints in
// east and west. It returns east's slice of db, its endpoint ready or not.
func createClosestFixture(r *migRig, ns string) func(ready bool) *discoveryv1.EndpointSlice {
	r.T.Helper()
	db := migImport("v1beta1", ns, "db", "Headless")
	_ = unstructured.SetNestedField(db.Object, "PreferClose", "spec", "trafficDistribution")
	anyDB := migImport("v1beta1", ns, "any", "Headless")
	r.Create(db)
	r.Create(anyDB)
	east := func(ready bool) *discoveryv1.EndpointSlice {
		return migSlice(ns, "db", "east", harness.Endpoint("10.80.1.1", "db-0", ready))
	}
	r.CreateSlice(east(true))
	r.CreateSlice(migSlice(ns, "db", "west", harness.Endpoint("10.80.2.1", "db-0", true),
		harness.Endpoint("10.80.2.2", "db-1", true)))
	r.CreateSlice(migSlice(ns, "any", "east", harness.Endpoint("10.81.1.1", "", true)))
	r.CreateSlice(migSlice(ns, "any", "west", harness.Endpoint("10.81.2.1", "", true)))
	// The local Service db's own slice, as kube-controller-manager writes
	// it: what proves an endpoint that claims the local cluster is its. The
	// test names east, then west, the local cluster, so it holds both's.
	r.CreateSlice(serviceSlice(ns, "db-local", "db", sliceController, nil, "10.80.1.1", "10.80.2.1", "10.80.2.2"))
	return east
}

// checkClosestSRV checks, with east the local cluster, the port name's and
// the service name's SRV: east's endpoint, its glue; and that another
// cluster's endpoint keeps its own name.
func checkClosestSRV(t *testing.T, r *migRig, dbName string) {
	t.Helper()
	srvName := "_pg._tcp." + dbName
	for _, owner := range []string{srvName, dbName} {
		expect(t, r.DNS, defaultTTL, owner, "SRV", want{
			Answer:     []string{srv(owner, 100, 5432, "db-0.east."+dbName)},
			Additional: []string{a("db-0.east."+dbName, "10.80.1.1")},
		})
	}
	// Another cluster's endpoint keeps its own name.
	expect(t, r.DNS, defaultTTL, "db-1.west."+dbName, "A", want{Answer: []string{a("db-1.west."+dbName, "10.80.2.2")}})
}

// checkClosestCountedAndLogged checks that both series count: local answers
// while east was local, clusterset-wide ones for any and after; and that
// CoreDNS logged each local cluster and could read the ClusterProperty.
func checkClosestCountedAndLogged(t *testing.T, r *migRig) {
	t.Helper()
	for _, scope := range []string{metricname.ScopeLocal, metricname.ScopeClusterset} {
		v, err := harness.ScrapeValue(r.DNS.MetricsURL, metricname.HeadlessAnswers, metricname.Scope, scope)
		if err != nil || v == 0 {
			t.Errorf("%s{scope=%q} = %v, %v", metricname.HeadlessAnswers, scope, v, err)
		}
		r.Logf("%s{scope=%q} %.0f", metricname.HeadlessAnswers, scope, v)
	}
	out := r.DNS.Output()
	for _, line := range []string{`the local cluster is "east"`, `the local cluster is "west"`, "the local cluster is unknown"} {
		if !strings.Contains(out, line) {
			t.Errorf("CoreDNS did not log %q", line)
		}
	}
	if strings.Contains(out, "cannot read ClusterProperty") {
		t.Error("the plugin's identity may not read the ClusterProperty")
	}
}
