package harness

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// ServiceImports is the ServiceImport resource in version (v1alpha1,
// v1beta1, v1alpha2), named by mcs-api's own constants: the tests and the
// bench spell no group or resource of their own.
func ServiceImports(version string) schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: mcsv1beta1.GroupName, Version: version, Resource: mcsv1beta1.ServiceImportPluralName}
}
