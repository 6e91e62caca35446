package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
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
