package multicluster

import (
	"net/netip"
	"slices"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

// clusterSetIP writes into rep the answer of a ClusterSetIP service for a
// name at or below it. svcName is the service's lower-case name in the zone,
// sub the part of the query name below it ("" for the service's own name),
// and owner the query name as asked, which the answer's records take.
//
// The records are made here from the service's addresses and ports rather
// than kept ready in the snapshot: they are copied into every reply anyway,
// and a ClusterSetIP service then costs a few hundred bytes, not kilobytes.
func (m *Multicluster) clusterSetIP(rep *reply, svc *cache.Service, svcName, sub, owner string, qtype uint16) result {
	if sub == "" {
		switch qtype {
		case dns.TypeA, dns.TypeAAAA:
			// Every address of the family: the cache keeps one per family,
			// and the answer does not depend on it.
			ips := svc.IPs()
			ans := rep.section(len(ips))
			for _, ip := range ips {
				if ip.Is4() == (qtype == dns.TypeA) {
					ans = append(ans, m.address(rep, owner, ip))
				}
			}
			if len(ans) > 0 {
				rep.msg.Answer = ans
				return success
			}
		case dns.TypeSRV:
			ports := svc.SRVPorts() // one per number: the target is the same
			if len(ports) == 0 {
				return noData
			}
			ans := rep.section(len(ports))
			w := cache.SRVWeight(len(ports))
			for i, p := range ports {
				ans = append(ans, m.srv(rep, owner, p.Port, w, svcName, len(ports)-i))
			}
			rep.msg.Answer = ans
			rep.needGlue(svc, svcName)
			return success
		}
		return noData
	}
	for _, p := range svc.Ports() {
		if isPortName(sub, p) {
			if qtype != dns.TypeSRV {
				return noData
			}
			rep.msg.Answer = append(rep.section(1), m.srv(rep, owner, p.Port, cache.SRVWeight(1), svcName, 1))
			rep.needGlue(svc, svcName)
			return success
		}
	}
	for _, p := range svc.Ports() {
		if len(sub) == 1+len(p.Proto) && sub[0] == '_' && sub[1:] == p.Proto {
			return noData // "_<proto>": an empty non-terminal
		}
	}
	return nameError
}

// glue is the address records of a ClusterSetIP service, A before AAAA, for
// the additional section of its SRV answers. answer makes them once lookup
// has returned (reply.needGlue), not down in clusterSetIP: there they were
// the deepest stack of any query, and the copy of each SRV query's stack
// when its goroutine had to grow took 16% of the CPU under dnsperf.
func (m *Multicluster) glue(rep *reply, svc *cache.Service, svcName string) []dns.RR {
	extra := rep.section(len(svc.IPs()))
	for _, v4 := range []bool{true, false} {
		for _, ip := range svc.IPs() {
			if ip.Is4() == v4 {
				extra = append(extra, m.address(rep, svcName, ip))
			}
		}
	}
	return extra
}

// isPortName reports whether sub is "_<name>._<proto>" of port p.
func isPortName(sub string, p cache.Port) bool {
	n := len(p.Name)
	return len(sub) == n+len(p.Proto)+3 && sub[0] == '_' && sub[1:1+n] == p.Name &&
		sub[1+n:3+n] == "._" && sub[3+n:] == p.Proto
}

// address makes an A or AAAA record in the reply.
func (m *Multicluster) address(rep *reply, name string, ip netip.Addr) dns.RR {
	if ip.Is4() {
		b := ip.As4()
		return push(&rep.a, cache.A(name, rep.ip(b[:], 1), m.TTL), 1)
	}
	b := ip.As16()
	return push(&rep.aaaa, cache.AAAA(name, rep.ip(b[:], 1), m.TTL), 1)
}

// srv makes an SRV record in the reply; left is how many more the answer
// will hold, this one included.
//
// Not inlined: inlined, its temporaries grew clusterSetIP's frame by 152
// bytes on every path, and the A path's stack then crossed the size at
// which each query's fresh goroutine has to copy its stack (see ServeDNS):
// copystack took 23% of the CPU and A fell from 77k to 59k QPS per
// CPU-second under dnsperf.
//
//go:noinline
func (m *Multicluster) srv(rep *reply, owner string, port, weight uint16, target string, left int) dns.RR {
	return push(&rep.srvs, cache.SRV(owner, m.TTL, weight, port, target), left)
}

// clusterSetIPRecords is every record of a ClusterSetIP service in one zone,
// in the order of a zone transfer: A, AAAA, SRV of the service, then the SRV
// of each port by name.
func (m *Multicluster) clusterSetIPRecords(svc *cache.Service, zone string) []dns.RR {
	svcName := cache.ServiceName(svc.Name(), svc.Namespace(), zone)
	var rs []dns.RR
	for _, qt := range []uint16{dns.TypeA, dns.TypeAAAA, dns.TypeSRV} {
		rep := &reply{}
		if m.clusterSetIP(rep, svc, svcName, "", svcName, qt) == success {
			rs = append(rs, rep.msg.Answer...)
		}
	}
	subs := make([]string, len(svc.Ports()))
	for i, p := range svc.Ports() {
		subs[i] = p.Sub()
	}
	slices.Sort(subs)
	for _, sub := range subs {
		rep := &reply{}
		if m.clusterSetIP(rep, svc, svcName, sub, sub+"."+svcName, dns.TypeSRV) == success {
			rs = append(rs, rep.msg.Answer...)
		}
	}
	return rs
}
