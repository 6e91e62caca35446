package v1alpha2

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ServiceImportType says how a ServiceImport is reached.
// +kubebuilder:validation:Enum=ClusterSetIP;Headless
type ServiceImportType string

const (
	// ClusterSetIP services are reached through the IPs in ServiceImport.IPs.
	ClusterSetIP ServiceImportType = "ClusterSetIP"
	// Headless services are reached through their endpoints' own IPs.
	Headless ServiceImportType = "Headless"
)

// ServiceImport describes a service imported from the clusters of a ClusterSet.
// +kubebuilder:object:root=true
// +kubebuilder:resource:path=serviceimports,singular=serviceimport,scope=Namespaced,shortName=svcim;svcimport
// +kubebuilder:subresource:status
// +kubebuilder:printcolumn:name="Type",type=string,JSONPath=`.type`,description="The type of this ServiceImport"
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.ips`,description="The VIP for this ServiceImport"
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type ServiceImport struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// Spec is empty, kept for future use.
	// +optional
	Spec ServiceImportSpec `json:"spec,omitempty"`

	// IPs are the ClusterSet IPs of a ClusterSetIP service: at most two, one per family.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=2
	// +kubebuilder:validation:items:MaxLength=45
	// +kubebuilder:validation:items:XValidation:rule="isIP(self)",message="must be an IP address"
	// +kubebuilder:validation:XValidation:rule="size(self) < 2 || ip(self[0]).family() != ip(self[1]).family()",message="at most one address per IP family"
	IPs []string `json:"ips,omitempty"`
	// Type is ClusterSetIP or Headless.
	// +required
	Type ServiceImportType `json:"type"`
	// Ports are the service's ports, in the shape of core v1 ServicePort: port
	// from 1 to 65535, protocol TCP (the default), UDP or SCTP, a name of at most
	// 63 characters.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:items:XValidation:rule="self.port >= 1 && self.port <= 65535",message="must be from 1 to 65535",fieldPath=".port"
	// +kubebuilder:validation:items:XValidation:rule="!has(self.protocol) || self.protocol in ['TCP', 'UDP', 'SCTP']",message="must be TCP, UDP or SCTP",fieldPath=".protocol"
	// +kubebuilder:validation:items:XValidation:rule="!has(self.name) || size(self.name) <= 63",message="must be at most 63 characters",fieldPath=".name"
	Ports []corev1.ServicePort `json:"ports,omitempty"`
	// SessionAffinity is ClientIP or None.
	// +optional
	// +kubebuilder:validation:Enum=ClientIP;None
	SessionAffinity corev1.ServiceAffinity `json:"sessionAffinity,omitempty"`
	// SessionAffinityConfig holds the ClientIP affinity settings; timeoutSeconds
	// is from 1 to 86400.
	// +optional
	// +kubebuilder:validation:XValidation:rule="!has(self.clientIP) || !has(self.clientIP.timeoutSeconds) || (self.clientIP.timeoutSeconds >= 1 && self.clientIP.timeoutSeconds <= 86400)",message="must be from 1 to 86400",fieldPath=".clientIP.timeoutSeconds"
	SessionAffinityConfig *corev1.SessionAffinityConfig `json:"sessionAffinityConfig,omitempty"`
	// InternalTrafficPolicy is the exported Service's internalTrafficPolicy,
	// Cluster or Local, as in spec.internalTrafficPolicy of v1beta1: carried
	// for the data plane; DNS answers do not depend on it.
	// +optional
	// +kubebuilder:validation:Enum=Cluster;Local
	InternalTrafficPolicy *corev1.ServiceInternalTrafficPolicy `json:"internalTrafficPolicy,omitempty"`
	// TrafficDistribution is the exported Service's trafficDistribution, as in
	// spec.trafficDistribution of v1beta1: with PreferClose (or PreferSameZone,
	// PreferSameNode) the endpoints of the consuming cluster come first.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	TrafficDistribution *string `json:"trafficDistribution,omitempty"`
	// Clusters lists the clusters that export the service.
	// +optional
	// +listType=map
	// +listMapKey=cluster
	Clusters []ClusterStatus `json:"clusters,omitempty"`

	// +optional
	Status ServiceImportStatus `json:"status,omitempty"`
}

// ServiceImportSpec is empty, kept for future use.
type ServiceImportSpec struct{}

// ClusterStatus names one cluster exporting the service.
type ClusterStatus struct {
	// Cluster is the cluster's name, an RFC 1123 DNS subdomain.
	// +required
	// +kubebuilder:validation:MaxLength=253
	// +kubebuilder:validation:Pattern=`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`
	Cluster string `json:"cluster"`
}

// ServiceImportStatus holds the conditions of the import.
type ServiceImportStatus struct {
	// Conditions are the import's current conditions.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// ServiceImportList is a list of ServiceImports.
// +kubebuilder:object:root=true
type ServiceImportList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []ServiceImport `json:"items"`
}
