// Package v1alpha2 holds the Go types of the proposed multicluster.x-k8s.io/v1alpha2
// ServiceImport. No released module ships them, so this project owns them. In
// this version the fields a controller owns sit at the object root, not under
// spec or status; spec stays empty for later use.
//
// The CRD schema of this version and zz_generated.deepcopy.go are generated
// from these types by controller-gen (hack/generate.sh). Ports and
// SessionAffinityConfig reuse core v1's types, whose fields carry no
// validation markers; the bounds they lack (port, protocol, port name,
// timeoutSeconds) are CEL rules on the fields that hold them, each with a
// fieldPath, so that a refusal names the offending field as a schema
// keyword would.
//
// +kubebuilder:object:generate=true
// +groupName=multicluster.x-k8s.io
package v1alpha2

import (
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// GroupName is the API group of ServiceImport, sigs.k8s.io/mcs-api's.
const GroupName = mcsv1beta1.GroupName

// SchemeGroupVersion is the group and version of the types in this package.
var SchemeGroupVersion = schema.GroupVersion{Group: GroupName, Version: "v1alpha2"}

var (
	// SchemeBuilder registers the types of this package.
	SchemeBuilder = runtime.NewSchemeBuilder(addKnownTypes)
	// AddToScheme adds the types of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)

func addKnownTypes(scheme *runtime.Scheme) error {
	scheme.AddKnownTypes(SchemeGroupVersion, &ServiceImport{}, &ServiceImportList{})
	metav1.AddToGroupVersion(scheme, SchemeGroupVersion)
	return nil
}
