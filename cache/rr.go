package cache

import (
	"net"

	"github.com/miekg/dns"
)

// The shape of every record the plugin answers is made here: the snapshot's
// precomputed records of headless services and the handler's per-query
// records of ClusterSetIP services, the SOA, NS and TXT alike.

// Header is the header of a record of the zone: class IN, the zone's TTL.
func Header(name string, rrtype uint16, ttl uint32) dns.RR_Header {
	return dns.RR_Header{Name: name, Rrtype: rrtype, Class: dns.ClassINET, Ttl: ttl}
}

// A is an A record; ip is used as given, not copied.
func A(name string, ip net.IP, ttl uint32) dns.A {
	return dns.A{Hdr: Header(name, dns.TypeA, ttl), A: ip}
}

// AAAA is an AAAA record; ip is used as given, not copied.
func AAAA(name string, ip net.IP, ttl uint32) dns.AAAA {
	return dns.AAAA{Hdr: Header(name, dns.TypeAAAA, ttl), AAAA: ip}
}

// SRV is an SRV record of priority 0, the fields in RFC 2782's order.
func SRV(owner string, ttl uint32, weight, port uint16, target string) dns.SRV {
	return dns.SRV{Hdr: Header(owner, dns.TypeSRV, ttl), Priority: 0, Weight: weight, Port: port, Target: target}
}

// SRVWeight is the weight of each of n SRV records of one answer, as CoreDNS's
// kubernetes plugin gives it: floor(100 / n), and at least 1 (a weight of 0
// means "rarely pick" in RFC 2782).
func SRVWeight(n int) uint16 { return uint16(max(1, 100/n)) }

// ServiceName is the name of a service in zone: <name>.<namespace>.svc.<zone>.
func ServiceName(name, namespace, zone string) string {
	return name + "." + namespace + ".svc." + zone
}
