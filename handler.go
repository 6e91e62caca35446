package multicluster

import (
	"context"
	"net"
	"slices"
	"strings"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/request"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

// result is the outcome of a lookup, mapped to a reply in one place.
type result int

const (
	success result = iota
	nameError
	noData
	serverFailure
)

// ServeDNS implements plugin.Handler.
//
// Its own frame is kept small on purpose: miekg/dns runs every UDP query on a
// new goroutine, and the stack it holds when the reply is written decides
// whether that goroutine's stack has to grow, a copy that once cost a fifth
// of the CPU. The work happens in answer, whose frame is gone by then.
func (m *Multicluster) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	rep := m.answer(ctx, w, r)
	if rep == nil {
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	w.WriteMsg(&rep.msg)
	return dns.RcodeSuccess, nil
}

// answer builds the reply to r, or returns nil when the query is for the
// next plugin: outside the plugin's zones, or a name error with fallthrough.
//
//go:noinline
func (m *Multicluster) answer(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) *reply {
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	zi := m.zoneOf(qname)
	if zi < 0 {
		return nil
	}
	rep := newReply(r)
	res := serverFailure
	if m.backend != nil && m.backend.HasSynced() {
		if fi := m.zones[zi].forward; fi >= 0 {
			res = m.lookup(rep, state, qname, zi, fi)
			if rep.glueOf != nil {
				rep.msg.Extra = m.glue(rep, rep.glueOf, rep.glueName)
			}
		} else {
			res = rep.put(m.reverse(state, qname, zi))
		}
	}
	if res == nameError && m.Fall.Through(qname) {
		return nil
	}
	m.counters(ctx)[res].Inc()
	msg := &rep.msg
	if qt := state.QType(); (qt == dns.TypeAXFR || qt == dns.TypeIXFR) && res != serverFailure {
		// Zone transfers are the transfer plugin's; it answers before us when configured.
		msg.Answer, msg.Extra, msg.Rcode = nil, nil, dns.RcodeRefused
		return rep
	}
	switch res {
	case nameError:
		msg.Rcode = dns.RcodeNameError
		fallthrough
	case noData:
		msg.Ns = rep.records([]dns.RR{m.soaInto(&rep.soa, zi)}, "")
	case serverFailure:
		msg.Rcode = dns.RcodeServerFailure
	}
	return rep
}

// zoneOf returns the index of the most specific of the plugin's zones that
// holds name, or -1.
func (m *Multicluster) zoneOf(name string) int {
	zi := -1
	for i, z := range m.zones {
		if inZone(name, z.name) && (zi < 0 || len(z.name) > len(m.zones[zi].name)) {
			zi = i
		}
	}
	return zi
}

// inZone reports whether name is zone or below it; both are lower-case and
// fully qualified. Unlike dns.IsSubDomain it does not allocate.
func inZone(name, zone string) bool {
	if zone == "." {
		return true
	}
	return name == zone || (len(name) > len(zone) && name[len(name)-len(zone)-1] == '.' && name[len(name)-len(zone):] == zone)
}

// lookup writes the records of a name into rep and returns the result; it
// reads only the backend's snapshot.
func (m *Multicluster) lookup(rep *reply, state request.Request, qname string, zi, fi int) result {
	qtype := state.QType()
	p := parseName(qname, m.zones[zi].name)
	switch p.kind {
	case kindNone:
		return nameError
	case kindApex:
		return rep.put(m.apex(state, zi))
	case kindDNSVersion:
		if qtype == dns.TypeTXT {
			return rep.put([]dns.RR{&dns.TXT{Hdr: m.hdr(qname, dns.TypeTXT), Txt: []string{dnsSchemaVersion}}}, nil, success)
		}
		return noData
	case kindNSHost:
		return rep.put(pick(m.nsAddress(state, qname, qtype), nil))
	case kindEmptyNonTerminal:
		return noData
	case kindNamespace:
		if m.backend.HasNamespace(p.namespace) {
			return noData
		}
		return nameError
	}
	svc := m.backend.Lookup(p.service)
	if svc == nil {
		return nameError
	}
	if !svc.Headless() {
		svcName := qname // the query name, lower-cased, less the sub-name
		if p.kind == kindSub {
			svcName = qname[len(p.sub)+1:]
		}
		return m.clusterSetIP(rep, svc, svcName, p.sub, state.QName(), qtype)
	}
	z := svc.Zone(fi)
	if z == nil {
		return nameError
	}
	a := &z.Service
	if p.kind != kindService {
		a = z.Sub[p.sub]
		if a == nil && (m.clusterSel || m.zonal) {
			if kind, value, byZone := parseSelector(p.sub, m.clusterSel, m.zonal); kind != selNone {
				return m.selected(rep, svc, z, kind, value, byZone, qtype)
			}
		}
	}
	if a != nil {
		res := rep.put(answersFor(a, qtype))
		if res == success && (p.kind == kindService || strings.HasPrefix(p.sub, "_")) { // not an endpoint's own name
			countScope(z, qtype)
		}
		return res
	}
	if _, ok := z.ENT[p.sub]; ok {
		return noData
	}
	return nameError
}

// apex answers at the apex of the zone at index zi: SOA and NS.
func (m *Multicluster) apex(state request.Request, zi int) ([]dns.RR, []dns.RR, result) {
	switch state.QType() {
	case dns.TypeSOA:
		return []dns.RR{m.soa(zi)}, nil, success
	case dns.TypeNS:
		ns := m.ns(zi)
		return []dns.RR{ns}, m.nsAddress(state, ns.Ns, 0), success
	}
	return nil, nil, noData
}

func answersFor(a *cache.Answers, qtype uint16) ([]dns.RR, []dns.RR, result) {
	switch qtype {
	case dns.TypeA:
		return pick(a.A, nil)
	case dns.TypeAAAA:
		return pick(a.AAAA, nil)
	case dns.TypeSRV:
		return pick(a.SRV, a.Extra)
	}
	return nil, nil, noData
}

func pick(answer, extra []dns.RR) ([]dns.RR, []dns.RR, result) {
	if len(answer) == 0 {
		return nil, nil, noData
	}
	return answer, extra, success
}

func (m *Multicluster) hdr(name string, t uint16) dns.RR_Header {
	return cache.Header(name, t, m.TTL)
}

// soa is the SOA of the zone at index zi, shaped as CoreDNS's kubernetes
// plugin shapes its own.
func (m *Multicluster) soa(zi int) *dns.SOA { return m.soaInto(new(dns.SOA), zi) }

func (m *Multicluster) soaInto(soa *dns.SOA, zi int) *dns.SOA {
	zone := m.zones[zi].name
	h := m.hdr(zone, dns.TypeSOA)
	h.Ttl = min(m.TTL, 300)
	*soa = dns.SOA{Hdr: h, Ns: m.zones[zi].ns, Mbox: m.zones[zi].mbox,
		Serial: m.backend.Serial(), Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: m.TTL}
	return soa
}

func (m *Multicluster) ns(zi int) *dns.NS {
	return &dns.NS{Hdr: m.hdr(m.zones[zi].name, dns.TypeNS), Ns: m.zones[zi].ns}
}

// nsAddress answers for ns.dns.<zone>: the addresses ns_address names, or
// else the address the query came in on, as the kubernetes plugin does when
// it finds no service of its own, or else (a wildcard socket, which does not
// say) the server's own (serverAddrs). A qtype of 0 gives the records of
// either family.
func (m *Multicluster) nsAddress(state request.Request, name string, qtype uint16) []dns.RR {
	addrs := m.serverAddrs()
	if ip := net.ParseIP(state.LocalIP()); len(m.nsAddrs) == 0 && ip != nil && !ip.IsUnspecified() {
		addrs = []net.IP{ip}
	}
	return m.addressRecords(name, addrs, qtype)
}

// addressRecords are the A and AAAA records of name for addrs; a qtype of A
// or AAAA keeps that family alone.
func (m *Multicluster) addressRecords(name string, addrs []net.IP, qtype uint16) []dns.RR {
	var rrs []dns.RR
	for _, ip := range addrs {
		if v4 := ip.To4(); v4 != nil {
			if qtype == dns.TypeA || qtype == 0 {
				r := cache.A(name, v4, m.TTL)
				rrs = append(rrs, &r)
			}
		} else if qtype == dns.TypeAAAA || qtype == 0 {
			r := cache.AAAA(name, ip, m.TTL)
			rrs = append(rrs, &r)
		}
	}
	return rrs
}

// serverAddrs are the addresses a zone transfer publishes for ns.dns.<zone>,
// where there is no query to take one from: ns_address, or the server's own.
func (m *Multicluster) serverAddrs() []net.IP {
	if len(m.nsAddrs) > 0 {
		return m.nsAddrs
	}
	return m.boundAddrs
}

// appendAddr appends ip to list unless list holds it already; an IPv4
// address is kept in its 4-byte form.
func appendAddr(list []net.IP, ip net.IP) []net.IP {
	if v4 := ip.To4(); v4 != nil {
		ip = v4
	}
	if slices.ContainsFunc(list, ip.Equal) {
		return list
	}
	return append(list, ip)
}

// boundAddrs returns the addresses the server block listens on: those bind
// names, as they are; for a wildcard socket, the host's addresses but
// loopback and link-local ones, or its loopback ones when it has no other
// (the kubernetes plugin's localIPs, which also leaves out bind's).
func boundAddrs(listenHosts []string, ifaceAddrs func() ([]net.Addr, error)) []net.IP {
	var out []net.IP
	for _, h := range listenHosts {
		if ip := net.ParseIP(h); ip != nil && !ip.IsUnspecified() {
			out = appendAddr(out, ip)
		}
	}
	if len(out) > 0 || ifaceAddrs == nil {
		return out
	}
	addrs, err := ifaceAddrs()
	if err != nil {
		return nil
	}
	var loopback []net.IP
	for _, a := range addrs {
		ipn, ok := a.(*net.IPNet)
		if !ok {
			continue
		}
		switch ip := ipn.IP; {
		case ip.IsLoopback():
			loopback = appendAddr(loopback, ip)
		case !ip.IsLinkLocalUnicast() && !ip.IsUnspecified():
			out = appendAddr(out, ip)
		}
	}
	if len(out) == 0 {
		return loopback
	}
	return out
}
