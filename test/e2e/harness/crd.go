package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiextensions "k8s.io/apiextensions-apiserver/pkg/client/clientset/clientset"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/util/retry"
	"sigs.k8s.io/yaml"
)

// ServiceImportCRD reads the ServiceImport CRD of <repo>/<dir>, e.g.
// deploy/crds or deploy/crds-v1alpha2-storage.
func ServiceImportCRD(repo, dir string) (*apiextensionsv1.CustomResourceDefinition, error) {
	path := filepath.Join(repo, dir, "multicluster.x-k8s.io_serviceimports.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return crd, nil
}

// SetStorage makes version crd's storage version, the others not; it fails
// when crd does not serve version. With conversion strategy None the API
// server prunes every object against the storage version's schema, so an
// object written in another version's shape may lose its fields.
func SetStorage(crd *apiextensionsv1.CustomResourceDefinition, version string) error {
	found := false
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		v.Storage = v.Name == version
		found = found || (v.Storage && v.Served)
	}
	if !found {
		return fmt.Errorf("CRD %s does not serve %s", crd.Name, version)
	}
	return nil
}

// KeepVersions drops every version of crd but the named ones, serves those
// and makes the first the storage version.
func KeepVersions(crd *apiextensionsv1.CustomResourceDefinition, versions ...string) error {
	crd.Spec.Versions = slices.DeleteFunc(crd.Spec.Versions, func(v apiextensionsv1.CustomResourceDefinitionVersion) bool {
		return !slices.Contains(versions, v.Name)
	})
	for i := range crd.Spec.Versions {
		crd.Spec.Versions[i].Served = true
	}
	if len(crd.Spec.Versions) != len(versions) {
		return fmt.Errorf("CRD %s has %d of the versions %v", crd.Name, len(crd.Spec.Versions), versions)
	}
	return SetStorage(crd, versions[0])
}

// StorageVersion is the name of crd's storage version, "" when it has none.
func StorageVersion(crd *apiextensionsv1.CustomResourceDefinition) string {
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			return v.Name
		}
	}
	return ""
}

// ServedVersions are the names of the versions crd serves, sorted.
func ServedVersions(crd *apiextensionsv1.CustomResourceDefinition) []string {
	var served []string
	for _, v := range crd.Spec.Versions {
		if v.Served {
			served = append(served, v.Name)
		}
	}
	slices.Sort(served)
	return served
}

// CRDVersion is crd's version called name, nil when crd has none.
func CRDVersion(crd *apiextensionsv1.CustomResourceDefinition, name string) *apiextensionsv1.CustomResourceDefinitionVersion {
	for i := range crd.Spec.Versions {
		if crd.Spec.Versions[i].Name == name {
			return &crd.Spec.Versions[i]
		}
	}
	return nil
}

// CRD reads the installed CRD name.
func (e *Env) CRD(ctx context.Context, name string) (*apiextensionsv1.CustomResourceDefinition, error) {
	return apiextensions.NewForConfigOrDie(e.Config).ApiextensionsV1().CustomResourceDefinitions().Get(ctx, name, metav1.GetOptions{})
}

// UpdateCRD reads the installed CRD name, changes it with change and writes
// it back, again on a conflict. With status it writes the status
// subresource instead, the only write that changes status.storedVersions.
func (e *Env) UpdateCRD(ctx context.Context, name string, status bool, change func(*apiextensionsv1.CustomResourceDefinition)) error {
	crds := apiextensions.NewForConfigOrDie(e.Config).ApiextensionsV1().CustomResourceDefinitions()
	write := crds.Update
	if status {
		write = crds.UpdateStatus
	}
	return retry.RetryOnConflict(retry.DefaultRetry, func() error {
		crd, err := crds.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		change(crd)
		_, err = write(ctx, crd, metav1.UpdateOptions{})
		return err
	})
}

// Serves says whether the API server serves gvr, by listing it in namespace
// ns: NotFound says it does not; any other error is returned.
func (e *Env) Serves(ctx context.Context, gvr schema.GroupVersionResource, ns string) (bool, error) {
	_, err := e.Dynamic.Resource(gvr).Namespace(ns).List(ctx, metav1.ListOptions{})
	if apierrors.IsNotFound(err) {
		return false, nil
	}
	return err == nil, err
}
