package multicluster

import (
	"net/netip"

	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

// reverse answers in a reverse zone given among ZONES: PTR records naming the
// services that hold a ClusterSetIP, and the endpoints of headless services
// by their ready addresses with endpoint_ptr, as the MCS specification allows.
func (m *Multicluster) reverse(state request.Request, qname string, zi int) ([]dns.RR, []dns.RR, result) {
	switch qname {
	case m.zones[zi].name:
		return m.apex(state, zi)
	case m.zones[zi].ns: // the name server the apex NS names, inside the zone as in a forward one
		return pick(m.nsAddress(state, qname, state.QType()), nil)
	case "dns." + m.zones[zi].name:
		return nil, nil, noData // the empty non-terminal above it
	}
	ptrs := m.ptrs(qname)
	if len(ptrs) == 0 {
		return nil, nil, nameError
	}
	if state.QType() != dns.TypePTR {
		return nil, nil, noData
	}
	return ptrs, nil, success
}

// ptrs returns the PTR records of a reverse name.
func (m *Multicluster) ptrs(name string) []dns.RR {
	ip, err := netip.ParseAddr(dnsutil.ExtractAddressFromReverse(name))
	if err != nil {
		return nil
	}
	ip = ip.Unmap()
	var out []dns.RR
	var names []string
	for _, svc := range m.backend.LookupIP(ip) {
		target := cache.ServiceName(svc.Name(), svc.Namespace(), m.ptrZone())
		if !svc.Headless() {
			out = append(out, &dns.PTR{Hdr: m.hdr(name, dns.TypePTR), Ptr: target})
			continue
		}
		if !m.endpointPTR {
			continue
		}
		// A headless service's endpoint: one PTR per endpoint name at the
		// address, as the kubernetes plugin answers for its endpoints.
		names = svc.EndpointNames(ip, names[:0])
		for _, n := range names {
			out = append(out, &dns.PTR{Hdr: m.hdr(name, dns.TypePTR), Ptr: n + "." + target})
		}
	}
	return out
}

// ptrZone is the forward zone PTR records point into.
func (m *Multicluster) ptrZone() string {
	if len(m.forward) > 0 {
		return m.forward[0]
	}
	return "clusterset.local."
}
