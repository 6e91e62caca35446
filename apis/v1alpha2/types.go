package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceImportType says how a ServiceImport is reached.
type ServiceImportType string

const (
	// ClusterSetIP services are reached through the IPs in ServiceImport.IPs.
	ClusterSetIP ServiceImportType = "ClusterSetIP"
	// Headless services are reached through their endpoints' own IPs.
	Headless ServiceImportType = "Headless"
)

// ServiceImport describes a service imported from the clusters of a ClusterSet.
type ServiceImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is empty, kept for future use.
	Spec ServiceImportSpec `json:"spec,omitempty"`

	// IPs are the ClusterSet IPs of a ClusterSetIP service: at most two, one per family.
	IPs []string `json:"ips,omitempty"`
	// Type is ClusterSetIP or Headless.
	Type ServiceImportType `json:"type"`
	// Ports are the service's ports, in the shape of core v1 ServicePort.
	Ports []corev1.ServicePort `json:"ports,omitempty"`
	// SessionAffinity is ClientIP or None.
	SessionAffinity corev1.ServiceAffinity `json:"sessionAffinity,omitempty"`
	// SessionAffinityConfig holds the ClientIP affinity settings.
	SessionAffinityConfig *corev1.SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
	// Clusters lists the clusters that export the service.
	Clusters []ClusterStatus `json:"clusters,omitempty"`

	Status ServiceImportStatus `json:"status,omitempty"`
}

// ServiceImportSpec is empty, kept for future use.
type ServiceImportSpec struct{}

// ClusterStatus names one cluster exporting the service.
type ClusterStatus struct {
	// Cluster is the cluster's name, an RFC 1123 DNS subdomain.
	Cluster string `json:"cluster"`
}

// ServiceImportStatus holds the conditions of the import.
type ServiceImportStatus struct {
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServiceImportList is a list of ServiceImports.
type ServiceImportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceImport `json:"items"`
}
