package e2e

import (
	"testing"
	"time"

	authorizationv1 "k8s.io/api/authorization/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestPluginIdentityIsLeastPrivilege: the identity the plugin's CoreDNS runs
// as may list and watch ServiceImports and EndpointSlices, and nothing else;
// RBAC is really enforced. RBAC grants a resource, not a version: the one
// rule covers every ServiceImport version the CRD serves (v1beta1, v1alpha2
// and v1alpha1), and the checks go through each.
func TestPluginIdentityIsLeastPrivilege(t *testing.T) {
	ctx, cancel := harness.Context(time.Minute)
	defer cancel()
	const mcs, discovery, serviceImports = mcsv1beta1.GroupName, "discovery.k8s.io", mcsv1beta1.ServiceImportPluralName
	versions := []string{"v1beta1", "v1alpha2", "v1alpha1"}
	type access struct {
		attrs authorizationv1.ResourceAttributes
		want  bool
	}
	var perVersion []access
	for _, v := range versions {
		perVersion = append(perVersion,
			access{authorizationv1.ResourceAttributes{Verb: "list", Group: mcs, Version: v, Resource: serviceImports}, true},
			access{authorizationv1.ResourceAttributes{Verb: "watch", Group: mcs, Version: v, Resource: serviceImports, Namespace: "demo"}, true},
			access{authorizationv1.ResourceAttributes{Verb: "get", Group: mcs, Version: v, Resource: serviceImports, Namespace: "demo", Name: "web"}, false},
			access{authorizationv1.ResourceAttributes{Verb: "update", Group: mcs, Version: v, Resource: serviceImports, Subresource: "status", Namespace: "demo"}, false},
		)
	}
	for _, tc := range append([]access{
		{authorizationv1.ResourceAttributes{Verb: "list", Group: mcs, Resource: serviceImports}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: mcs, Resource: serviceImports}, true},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: discovery, Resource: "endpointslices"}, true},
		{authorizationv1.ResourceAttributes{Verb: "watch", Group: discovery, Resource: "endpointslices", Namespace: "demo"}, true},
		{authorizationv1.ResourceAttributes{Verb: "get", Group: mcs, Resource: serviceImports, Namespace: "demo", Name: "web"}, false},
		{authorizationv1.ResourceAttributes{Verb: "create", Group: mcs, Resource: serviceImports, Namespace: "demo"}, false},
		{authorizationv1.ResourceAttributes{Verb: "update", Group: mcs, Resource: serviceImports, Subresource: "status", Namespace: "demo"}, false},
		{authorizationv1.ResourceAttributes{Verb: "get", Group: discovery, Resource: "endpointslices", Namespace: "demo"}, false},
		{authorizationv1.ResourceAttributes{Verb: "delete", Group: discovery, Resource: "endpointslices", Namespace: "demo"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "services"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "endpoints"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "namespaces"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Resource: "secrets"}, false},
		{authorizationv1.ResourceAttributes{Verb: "list", Group: mcs, Resource: "serviceexports"}, false},
	}, perVersion...) {
		got, err := plugin.Can(ctx, tc.attrs)
		if err != nil {
			t.Fatal(err)
		}
		if got != tc.want {
			t.Errorf("%s may %s %s/%s/%s (subresource %q, ns %q, name %q): %v, want %v", plugin.Name,
				tc.attrs.Verb, tc.attrs.Group, tc.attrs.Version, tc.attrs.Resource, tc.attrs.Subresource,
				tc.attrs.Namespace, tc.attrs.Name, got, tc.want)
		}
	}

	// And the real calls.
	dyn, err := dynamic.NewForConfig(plugin.Config)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := plugin.Clientset.CoreV1().Services("").List(ctx, metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Errorf("list Services as %s: %v, want Forbidden", plugin.Name, err)
	}
	for _, v := range versions {
		si := cache.ServiceImports(v)
		if _, err := dyn.Resource(si).Namespace("demo").Get(ctx, "web", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
			t.Errorf("get %s ServiceImport demo/web as %s: %v, want Forbidden", v, plugin.Name, err)
		}
		list, err := dyn.Resource(si).List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("list %s ServiceImports as %s: %v", v, plugin.Name, err)
			continue
		}
		if len(list.Items) < 4 {
			t.Errorf("list %s ServiceImports as %s: %d items, want testdata's 4 or more", v, plugin.Name, len(list.Items))
		}
		w, err := dyn.Resource(si).Namespace("demo").Watch(ctx, metav1.ListOptions{})
		if err != nil {
			t.Errorf("watch %s ServiceImports in demo as %s: %v", v, plugin.Name, err)
			continue
		}
		w.Stop()
	}
	if _, err := plugin.Clientset.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{}); err != nil {
		t.Errorf("list EndpointSlices as %s: %v", plugin.Name, err)
	}
}
