package cache

import (
	"context"
	"encoding/json"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
)

// fakeImports is the ImportClient over a fake dynamic client: what the fake
// holds goes through the version's decoder as JSON, as the API server's
// responses go through the REST client's.
type fakeImports struct{ dyn dynamic.Interface }

func (f fakeImports) List(ctx context.Context, version string, o metav1.ListOptions) (runtime.Object, error) {
	l, err := f.dyn.Resource(ServiceImports(version)).Namespace(metav1.NamespaceAll).List(ctx, o)
	if err != nil {
		return nil, err
	}
	l.SetAPIVersion(ServiceImports(version).GroupVersion().String())
	l.SetKind("ServiceImportList")
	for i := range l.Items {
		l.Items[i].SetAPIVersion(l.GetAPIVersion())
		l.Items[i].SetKind("ServiceImport")
	}
	return decodeJSON(version, l)
}

func (f fakeImports) Watch(ctx context.Context, version string, o metav1.ListOptions) (watch.Interface, error) {
	w, err := f.dyn.Resource(ServiceImports(version)).Namespace(metav1.NamespaceAll).Watch(ctx, o)
	if err != nil {
		return nil, err
	}
	return watch.Filter(w, func(e watch.Event) (watch.Event, bool) {
		if e.Type == watch.Error {
			return e, true
		}
		u := map[string]any{}
		if data, err := json.Marshal(e.Object); err == nil && json.Unmarshal(data, &u) == nil {
			u["apiVersion"], u["kind"] = ServiceImports(version).GroupVersion().String(), "ServiceImport"
			if obj, err := decodeJSON(version, u); err == nil {
				e.Object = obj
			}
		}
		return e, true
	}), nil
}

// IsWatchListSemanticsUnSupported tells the reflector what the fake tells.
func (fakeImports) IsWatchListSemanticsUnSupported() bool { return true }

// decodeJSON decodes obj's JSON with the version's decoder.
func decodeJSON(version string, obj any) (runtime.Object, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	return typedVersions[version].decode(data)
}

// readUnstructured makes the import of u read through version, by way of
// its JSON, as the API server would send it in that version.
func readUnstructured(u *unstructured.Unstructured, version string) *Import {
	u = u.DeepCopy()
	u.SetAPIVersion(ServiceImports(version).GroupVersion().String())
	u.SetKind("ServiceImport")
	im, err := ReadImport(u)
	if err != nil {
		panic(err)
	}
	return im
}

func importFromV1alpha2(u *unstructured.Unstructured) *Import { return readUnstructured(u, V1alpha2) }
func importFromV1alpha1(u *unstructured.Unstructured) *Import { return readUnstructured(u, V1alpha1) }

func TestReadImportRefusesOtherObjects(t *testing.T) {
	for _, apiVersion := range []string{"v1", "multicluster.x-k8s.io/v9", "other.example/v1beta1"} {
		u := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": apiVersion, "kind": "ServiceImport",
			"metadata": map[string]any{"namespace": "ns", "name": "svc"},
		}}
		if im, err := ReadImport(u); err == nil {
			t.Errorf("%s: read %+v, want an error", apiVersion, im)
		} else {
			t.Log(err)
		}
	}
	u := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": "ns", "name": "svc"},
		"spec":     map[string]any{"type": "ClusterSetIP", "ips": []any{"10.0.0.1"}},
	}}
	im, err := ReadImport(u)
	if err != nil || !im.HasData || im.Headless || len(im.IPs) != 1 || im.Version() != V1beta1 {
		t.Errorf("v1beta1 ClusterSetIP import: %+v, %v", im, err)
	}
}
