package cache

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/util/validation"

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
	ReasonNameTooLong    = "name_too_long"

	// What a peer cannot make the plugin answer (guard.go).
	ReasonUnspecifiedAddress = "unspecified_address"
	ReasonLoopbackAddress    = "loopback_address"
	ReasonLinkLocalAddress   = "link_local_address"
	ReasonMulticastAddress   = "multicast_address"
	ReasonBroadcastAddress   = "broadcast_address"
	ReasonDeniedAddress      = "denied_address"
	ReasonProtectedNamespace = "protected_namespace"
	ReasonUnlistedCluster    = "unlisted_cluster"
	ReasonUnprovenLocal      = "unproven_local"
	ReasonTooManyEndpoints   = "too_many_endpoints"
)

// addressReasons are the reasons addressProblem gives.
var addressReasons = []string{ReasonUnspecifiedAddress, ReasonLoopbackAddress, ReasonLinkLocalAddress,
	ReasonMulticastAddress, ReasonBroadcastAddress, ReasonDeniedAddress}

// Kinds of the objects the skipped metric counts: a ServiceImport's problems
// are counted by the version it was read through (ImportKind), the loss of
// its data across versions as KindServiceImport.
const (
	KindServiceImport = "ServiceImport"
	KindEndpointSlice = "EndpointSlice"
)

// ImportKind is the kind under which the problems of a ServiceImport read
// through version are counted.
func ImportKind(version string) string { return KindServiceImport + " " + version }

// SkipSeries are the kind and reason of every skipped series the cache can
// count, so that each exists from start-up, at zero.
func SkipSeries() [][2]string {
	var out [][2]string
	for _, v := range Versions {
		for _, r := range []string{ReasonBadIP, ReasonExtraIP, ReasonHeadlessIPs, ReasonNoIPs, ReasonBadType,
			ReasonBadPortName, ReasonBadPort, ReasonDuplicatePort, ReasonDecode, ReasonProtectedNamespace, ReasonBadServiceName} {
			out = append(out, [2]string{ImportKind(v), r})
		}
		for _, r := range addressReasons {
			out = append(out, [2]string{ImportKind(v), r})
		}
	}
	out = append(out, [2]string{KindServiceImport, ReasonDataLost})
	for _, r := range append([]string{ReasonBadServiceName, ReasonNoCluster, ReasonBadCluster, ReasonAddressType, ReasonBadAddress,
		ReasonUnlistedCluster, ReasonUnprovenLocal, ReasonTooManyEndpoints, ReasonNameTooLong}, addressReasons...) {
		out = append(out, [2]string{KindEndpointSlice, r})
	}
	return out
}

// intern returns the one copy of s the process keeps: a namespace, a port
// name or a cluster name is held by many imports and slices, and each decoded object
// brings its own copy. unique keeps its canonical copy only while a Handle
// to it lives, and the slim copies keep the string, not the Handle: after a garbage
// collection the next copy that reads s gets a new canonical copy, which those
// after it share. So there is one copy of s per GC cycle in which objects holding
// it were read, not one per object; a Handle per copy would cost 8 bytes
// each to save that.
func intern(s string) string { return unique.Make(s).Value() }

// TopologyZone is a topology zone as the answers compare and name it
// (<zone>.pin._zone): lower-case, "" when it is not a DNS label. An
// endpoint's zone and the replica's own (local_zone) go through it alike.
func TopologyZone(z string) string {
	z = strings.ToLower(z)
	if len(validation.IsDNS1123Label(z)) > 0 {
		return ""
	}
	return z
}

type rawPort struct {
	name  string
	proto corev1.Protocol
	port  int64
}

// rawImport is what answers are made from in a ServiceImport of any version.
type rawImport struct {
	typ                 string
	ips                 []string
	ports               []rawPort
	trafficDistribution *string
	clusters            []string
	slicesAbsent        bool // status.endpointSliceObjects: Absent (the spec shape has it)
}

// readShared validates the fields both shapes share and puts them in im,
// leaving out the addresses addressProblem refuses, deny among them. A view
// without a type is a view the API server pruned: it carries no data. An
// import whose name is not a DNS label (a custom resource's name may hold
// dots) is not used: its name would read as another service's, of another
// namespace.
func readShared(im *Import, raw rawImport, deny []netip.Prefix) {
	typ, ips, ports := raw.typ, raw.ips, raw.ports
	switch {
	case typ == "":
		return
	case len(validation.IsDNS1123Label(im.Name)) > 0:
		im.addProblem(ReasonBadServiceName)
		return
	}
	switch typ {
	case string(v1alpha2.ClusterSetIP):
	case string(v1alpha2.Headless):
		im.Headless = true
	default:
		im.addProblem(ReasonBadType)
		return
	}
	im.HasData = true
	im.PreferClose = raw.trafficDistribution != nil && prefersClose(*raw.trafficDistribution)
	if im.Headless {
		if len(ips) > 0 {
			im.addProblem(ReasonHeadlessIPs)
		}
		readClusters(im, raw.clusters)
	} else {
		var have4, have6 bool
		for _, s := range ips {
			ip, err := netip.ParseAddr(strings.TrimSpace(s))
			if err != nil || ip.Zone() != "" {
				im.addProblem(ReasonBadIP)
				continue
			}
			ip = ip.Unmap()
			if why := addressProblem(ip, deny); why != "" {
				im.addProblem(why)
				continue
			}
			if (ip.Is4() && have4) || (ip.Is6() && have6) {
				im.addProblem(ReasonExtraIP)
				continue
			}
			have4, have6 = have4 || ip.Is4(), have6 || ip.Is6()
			im.IPs = append(im.IPs, ip)
		}
		if len(im.IPs) == 0 {
			im.addProblem(ReasonNoIPs)
		}
	}
	for _, p := range ports {
		if p.port < 1 || p.port > 65535 {
			im.addProblem(ReasonBadPort)
			continue
		}
		if p.name == "" {
			continue // unnamed ports have no SRV records
		}
		// A DNS label that "_" still fits in: a Service's port names
		// are at most 15 characters, an import's have no limit.
		if len(validation.IsDNS1123Label(p.name)) > 0 || len(p.name) > validation.DNS1123LabelMaxLength-len("_") {
			im.addProblem(ReasonBadPortName)
			continue
		}
		var proto string // a constant, not a copy per record
		switch strings.ToLower(string(p.proto)) {
		case "", "tcp":
			proto = "tcp"
		case "udp":
			proto = "udp"
		case "sctp":
			proto = "sctp"
		default:
			im.addProblem(ReasonBadPort)
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
			im.addProblem(ReasonDuplicatePort)
			continue
		}
		im.Ports = append(im.Ports, np)
	}
	im.Ports = sharedPorts(im.Ports)
	if im.Headless && raw.slicesAbsent {
		im.addProblem(ReasonEndpointSlicesAbsent)
	}
}

// readClusters keeps the clusters a headless import lists, the only ones
// whose EndpointSlices answer it. A name that is no cluster ID matches no
// slice (sliceFrom refuses those), so it is kept: an import that lists only
// unusable names lists clusters all the same, and takes no slice.
func readClusters(im *Import, clusters []string) {
	if len(clusters) == 0 {
		return
	}
	// Sorted, then compacted: 40,000 names deduplicated by search took 5 s
	// (BenchmarkReadClusters40k), and every answer waited.
	cs := make([]string, len(clusters))
	for i, c := range clusters {
		cs[i] = strings.ToLower(c)
	}
	slices.Sort(cs)
	cs = slices.Clip(slices.Compact(cs))
	for i, c := range cs {
		cs[i] = intern(c)
	}
	im.more().clusters = cs
}

// prefersClose reports whether a trafficDistribution asks for close
// endpoints first: PreferClose, or its successors PreferSameZone and
// PreferSameNode (Kubernetes 1.34), which ask for endpoints closer still.
// The cluster the query comes from is as close as DNS can tell.
func prefersClose(td string) bool {
	switch td {
	case corev1.ServiceTrafficDistributionPreferClose, corev1.ServiceTrafficDistributionPreferSameZone,
		corev1.ServiceTrafficDistributionPreferSameNode:
		return true
	}
	return false
}

// portLists holds one copy of each list of ports seen, up to maxPortLists of
// them: most services of a cluster have one of a few lists (http, TCP 80),
// and slim copies are never modified, so theirs can be one slice.
var portLists = struct {
	sync.Mutex
	m map[string][]Port
}{m: map[string][]Port{}}

const maxPortLists = 4096

// sharedPorts returns the held copy of ports, holding it first if there is
// room; ports is the import's own new slice, which it may change.
func sharedPorts(ports []Port) []Port {
	if len(ports) == 0 {
		return nil
	}
	var buf [256]byte
	k := buf[:0]
	for _, p := range ports {
		k = append(append(append(append(k, p.Name...), '/'), p.Proto...), '/')
		k = append(strconv.AppendUint(k, uint64(p.Port), 10), ',')
	}
	portLists.Lock()
	defer portLists.Unlock()
	if held, ok := portLists.m[string(k)]; ok {
		return held
	}
	// A list not held yet: its names are interned here, once, rather than
	// for every object, most of which find their list held.
	for i := range ports {
		ports[i].Name = intern(ports[i].Name)
	}
	ports = slices.Clip(ports)
	if len(portLists.m) < maxPortLists {
		portLists.m[string(k)] = ports
	}
	return ports
}

// sliceFrom makes the slim copy of a multi-cluster EndpointSlice. Only ready
// endpoints are kept (a nil ready counts as ready), and only their addresses
// that addressProblem lets through (deny among them).
func sliceFrom(es *discoveryv1.EndpointSlice, deny []netip.Prefix) *Slice {
	s := &Slice{Meta: Meta{Namespace: intern(es.Namespace), Name: es.Name, ResourceVersion: es.ResourceVersion}, Service: es.Labels[LabelServiceName]}
	if len(validation.IsDNS1123Label(s.Service)) > 0 {
		s.addProblem(ReasonBadServiceName)
		s.Service = ""
		return s
	}
	cluster, ok := es.Labels[LabelSourceCluster]
	switch {
	case !ok || cluster == "":
		s.addProblem(ReasonNoCluster)
		return s
	case len(validation.IsDNS1123Subdomain(cluster)) > 0:
		s.addProblem(ReasonBadCluster)
		return s
	}
	var want func(netip.Addr) bool
	switch es.AddressType {
	case discoveryv1.AddressTypeIPv4:
		want = netip.Addr.Is4
	case discoveryv1.AddressTypeIPv6:
		want = func(a netip.Addr) bool { return a.Is6() && !a.Is4In6() }
	default:
		s.addProblem(ReasonAddressType)
		return s
	}
	s.Cluster = intern(cluster)
	for _, ep := range es.Endpoints {
		if ep.Conditions.Ready != nil && !*ep.Conditions.Ready {
			continue
		}
		e := Endpoint{}
		for _, a := range ep.Addresses {
			ip, err := netip.ParseAddr(a)
			if err != nil || ip.Zone() != "" {
				s.addProblem(ReasonBadAddress)
				continue
			}
			if why := addressProblem(ip, deny); why != "" {
				s.addProblem(why)
				continue
			}
			if !want(ip) {
				s.addProblem(ReasonBadAddress)
				continue
			}
			e.Addrs = append(e.Addrs, ip)
		}
		if len(e.Addrs) == 0 {
			continue
		}
		if ep.Zone != nil {
			e.Zone = intern(TopologyZone(*ep.Zone))
		}
		if ep.Hostname != nil && len(validation.IsDNS1123Label(*ep.Hostname)) == 0 {
			e.Host = *ep.Hostname
			s.Endpoints = append(s.Endpoints, e)
			continue
		}
		// Named by its address, each address is an endpoint of its own
		// name, as the kubernetes plugin has them: 10-1-0-2 answers
		// 10.1.0.2 alone, and 10-1-0-3 answers the second address.
		for i, ip := range e.Addrs {
			s.Endpoints = append(s.Endpoints, Endpoint{Host: AddressLabel(ip), Zone: e.Zone, Addrs: e.Addrs[i : i+1 : i+1]})
		}
	}
	return s
}

// AddressLabel is the DNS label of an endpoint without a hostname, its
// address written as a label: 10.1.2.3 -> 10-1-2-3, fd00::1 -> fd00--1.
func AddressLabel(ip netip.Addr) string {
	return strings.NewReplacer(".", "-", ":", "-").Replace(ip.String())
}

// describe names an object in log lines.
func describe(kind, namespace, name string) string {
	return fmt.Sprintf("%s %s/%s", kind, namespace, name)
}
