package cache

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	mcsv1alpha1 "sigs.k8s.io/mcs-api/pkg/apis/v1alpha1"

	"github.com/clustersetdns/multicluster/apis/v1alpha2"
)

// Reasons an object, or part of one, is not used. They label the skipped metric.
const (
	ReasonBadIP          = "bad_ip"
	ReasonExtraIP        = "extra_ip"
	ReasonHeadlessIPs    = "headless_with_ips"
	ReasonNoIPs          = "no_ips"
	ReasonBadType        = "bad_type"
	ReasonBadPortName    = "bad_port_name"
	ReasonBadPort        = "bad_port"
	ReasonDuplicatePort  = "duplicate_port"
	ReasonNoCluster      = "no_source_cluster"
	ReasonBadCluster     = "bad_cluster_id"
	ReasonAddressType    = "unsupported_address_type"
	ReasonBadAddress     = "bad_address"
	ReasonDataLost       = "data_lost"
	ReasonDecode         = "decode_error"
	ReasonBadServiceName = "bad_service_name"
)

// importFromV1alpha2 makes the slim record of a v1alpha2 view.
func importFromV1alpha2(u *unstructured.Unstructured) *Import {
	im := newImport(u, V1alpha2)
	var si v1alpha2.ServiceImport
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &si); err != nil {
		im.Problems = append(im.Problems, ReasonDecode)
		return im
	}
	ports := make([]rawPort, 0, len(si.Ports))
	for _, p := range si.Ports {
		ports = append(ports, rawPort{p.Name, p.Protocol, p.Port})
	}
	fill(im, string(si.Type), si.IPs, ports)
	return im
}

// importFromV1alpha1 makes the slim record of a v1alpha1 view, read with the
// sigs.k8s.io/mcs-api types.
func importFromV1alpha1(u *unstructured.Unstructured) *Import {
	im := newImport(u, V1alpha1)
	var si mcsv1alpha1.ServiceImport
	if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &si); err != nil {
		im.Problems = append(im.Problems, ReasonDecode)
		return im
	}
	ports := make([]rawPort, 0, len(si.Spec.Ports))
	for _, p := range si.Spec.Ports {
		ports = append(ports, rawPort{p.Name, p.Protocol, p.Port})
	}
	fill(im, string(si.Spec.Type), si.Spec.IPs, ports)
	return im
}

func newImport(u *unstructured.Unstructured, version string) *Import {
	return &Import{Meta: Meta{Namespace: u.GetNamespace(), Name: u.GetName(), ResourceVersion: u.GetResourceVersion()}, Version: version}
}

type rawPort struct {
	name  string
	proto corev1.Protocol
	port  int32
}

// fill validates the fields both versions share. A view without a type is a
// view the API server pruned: it carries no data.
func fill(im *Import, typ string, ips []string, ports []rawPort) {
	switch typ {
	case "":
		return
	case string(v1alpha2.ClusterSetIP):
	case string(v1alpha2.Headless):
		im.Headless = true
	default:
		im.Problems = append(im.Problems, ReasonBadType)
		return
	}
	im.HasData = true
	if im.Headless {
		if len(ips) > 0 {
			im.Problems = append(im.Problems, ReasonHeadlessIPs)
		}
	} else {
		var have4, have6 bool
		for _, s := range ips {
			ip, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil || ip.Zone() != "" {
				im.Problems = append(im.Problems, ReasonBadIP)
				continue
			}
			ip = ip.Unmap()
			if (ip.Is4() && have4) || (ip.Is6() && have6) {
				im.Problems = append(im.Problems, ReasonExtraIP)
				continue
			}
			have4, have6 = have4 || ip.Is4(), have6 || ip.Is6()
			im.IPs = append(im.IPs, ip)
		}
		if len(im.IPs) == 0 {
			im.Problems = append(im.Problems, ReasonNoIPs)
		}
	}
	for _, p := range ports {
		if p.port < 1 || p.port > 65535 {
			im.Problems = append(im.Problems, ReasonBadPort)
			continue
		}
		if p.name == "" {
			continue // unnamed ports have no SRV records
		}
		if len(validation.IsDNS1123Label(p.name)) > 0 {
			im.Problems = append(im.Problems, ReasonBadPortName)
			continue
		}
		proto := strings.ToLower(string(p.proto))
		switch proto {
		case "":
			proto = "tcp"
		case "tcp", "udp", "sctp":
		default:
			im.Problems = append(im.Problems, ReasonBadPort)
			continue
		}
		np := Port{Name: p.name, Proto: proto, Port: uint16(p.port)}
		dup := false
		for _, q := range im.Ports {
			if q.Name == np.Name && q.Proto == np.Proto {
				dup = true
				break
			}
		}
		if dup {
			im.Problems = append(im.Problems, ReasonDuplicatePort)
			continue
		}
		im.Ports = append(im.Ports, np)
	}
}

// sliceFrom makes the slim record of a multi-cluster EndpointSlice. Only ready
// endpoints are kept (a nil ready counts as ready).
func sliceFrom(es *discoveryv1.EndpointSlice) *Slice {
	s := &Slice{Meta: Meta{Namespace: es.Namespace, Name: es.Name, ResourceVersion: es.ResourceVersion}, Service: es.Labels[LabelServiceName]}
	if len(validation.IsDNS1123Label(s.Service)) > 0 {
		s.Problems = append(s.Problems, ReasonBadServiceName)
		s.Service = ""
		return s
	}
	cluster, ok := es.Labels[LabelSourceCluster]
	switch {
	case !ok || cluster == "":
		s.Problems = append(s.Problems, ReasonNoCluster)
		return s
	case len(validation.IsDNS1123Subdomain(cluster)) > 0:
		s.Problems = append(s.Problems, ReasonBadCluster)
		return s
	}
	var want func(netip.Addr) bool
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4:
		want = netip.Addr.Is4
	case discoveryv1.AddressTypeIPv6:
		want = func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }
	default:
		s.Problems = append(s.Problems, ReasonAddressType)
		return s
	}
	s.Cluster = cluster
	for _, ep := range es.Endpoints {
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			continue
		}
		e := Endpoint{}
		for _, a := range ep.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil || ip.Zone() != "" || !want(ip) {
				s.Problems = append(s.Problems, ReasonBadAddress)
				continue
			}
			e.Addrs = append(e.Addrs, ip)
		}
		if len(e.Addrs) == 0 {
			continue
		}
		if ep.Hostname != nil && len(validation.IsDNS1123Label(*ep.Hostname)) == 0 {
			e.Host = *ep.Hostname
		} else {
			e.Host = dashed(e.Addrs[0])
		}
		s.Endpoints = append(s.Endpoints, e)
	}
	return s
}

// dashed writes an IP as a DNS label: 10.1.2.3 -> 10-1-2-3, fd00::1 -> fd00--1.
func dashed(ip netip.Addr) string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(ip.String())
}

// describe names an object in log lines.
func describe(kind, namespace, name string) string {
	return fmt.Sprintf("%s %s/%s", kind, namespace, name)
}
