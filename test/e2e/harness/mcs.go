package harness

import (
	"maps"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"
)

// Import is a ServiceImport, to be written in any served version.
type Import struct {
	Namespace, Name string
	Type            string // ClusterSetIP or Headless
	IPs             []string
	IPFamilies      []string
	Ports           []corev1.ServicePort
	// More are further fields, such as sessionAffinity.
	More map[string]any
	// Clusters go in status.clusters (v1alpha1, v1beta1), which a create
	// ignores, or in clusters (v1alpha2).
	Clusters []string
}

// Object is im in version's shape: v1alpha2 keeps its fields at the root,
// v1alpha1 and v1beta1 under spec and status.
func (im Import) Object(version string) *unstructured.Unstructured {
	var ports []any
	for _, p := range im.Ports {
		m := map[string]any{"protocol": string(p.Protocol), "port": int64(p.Port)}
		if p.Name != "" {
			m["name"] = p.Name
		}
		ports = append(ports, m)
	}
	fields := map[string]any{"type": im.Type, "ports": ports}
	if len(im.IPs) > 0 {
		fields["ips"] = anys(im.IPs)
	}
	if len(im.IPFamilies) > 0 {
		fields["ipFamilies"] = anys(im.IPFamilies)
	}
	maps.Copy(fields, im.More)
	var clusters []any
	for _, c := range im.Clusters {
		clusters = append(clusters, map[string]any{"cluster": c})
	}
	obj := map[string]any{
		"apiVersion": "multicluster.x-k8s.io/" + version, "kind": "ServiceImport",
		"metadata": map[string]any{"namespace": im.Namespace, "name": im.Name},
	}
	switch {
	case version == "v1alpha2":
		maps.Copy(obj, fields)
		if clusters != nil {
			obj["clusters"] = clusters
		}
	default:
		obj["spec"] = fields
		if clusters != nil {
			obj["status"] = map[string]any{"clusters": clusters}
		}
	}
	return &unstructured.Unstructured{Object: obj}
}

func anys(ss []string) []any {
	out := make([]any, len(ss))
	for i, s := range ss {
		out[i] = s
	}
	return out
}

// TCP is a TCP service port.
func TCP(name string, port int32) corev1.ServicePort {
	return corev1.ServicePort{Name: name, Protocol: corev1.ProtocolTCP, Port: port}
}

// MCSSlice is an IPv4 EndpointSlice name of service from cluster, labelled
// as an MCS controller (managedBy) labels one, with ports and endpoints.
func MCSSlice(ns, name, service, cluster, managedBy string, ports []corev1.ServicePort, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return &discoveryv1.EndpointSlice{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: map[string]string{
			mcsv1beta1.LabelServiceName:              service,
			mcsv1beta1.LabelSourceCluster:            cluster,
			"endpointslice.kubernetes.io/managed-by": managedBy,
		}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       SlicePorts(ports),
		Endpoints:   eps,
	}
}

// SlicePorts are service ports as an EndpointSlice's ports.
func SlicePorts(ports []corev1.ServicePort) []discoveryv1.EndpointPort {
	var out []discoveryv1.EndpointPort
	for _, p := range ports {
		ep := discoveryv1.EndpointPort{Protocol: ptr.To(p.Protocol), Port: ptr.To(p.Port)}
		if p.Name != "" {
			ep.Name = ptr.To(p.Name)
		}
		out = append(out, ep)
	}
	return out
}

// Endpoint is one endpoint of an EndpointSlice; hostname may be empty.
func Endpoint(ip, hostname string, ready bool) discoveryv1.Endpoint {
	ep := discoveryv1.Endpoint{Addresses: []string{ip}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(ready)}}
	if hostname != "" {
		ep.Hostname = ptr.To(hostname)
	}
	return ep
}
