package multicluster

import (
	"context"
	"net"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"
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
func (m *Multicluster) ServeDNS(ctx context.Context, w dns.ResponseWriter, r *dns.Msg) (int, error) {
	state := request.Request{W: w, Req: r}
	qname := state.Name()
	zi := m.zoneOf(qname)
	if zi < 0 {
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	var answer, extra []dns.RR
	res := serverFailure
	if m.backend != nil && m.backend.HasSynced() {
		if fi := m.zoneFwd[zi]; fi >= 0 {
			answer, extra, res = m.lookup(state, qname, zi, fi)
		} else {
			answer, extra, res = m.reverse(state, qname, zi)
		}
	}
	if res == nameError && m.Fall.Through(qname) {
		return plugin.NextOrFailure(m.Name(), m.Next, ctx, w, r)
	}
	responses.WithLabelValues(metrics.WithServer(ctx), resultLabel[res]).Inc()
	if qt := state.QType(); (qt == dns.TypeAXFR || qt == dns.TypeIXFR) && res != serverFailure {
		// Zone transfers are the transfer plugin's; it answers before us when configured.
		rep := newReply(r)
		rep.msg.Rcode = dns.RcodeRefused
		w.WriteMsg(&rep.msg)
		return dns.RcodeSuccess, nil
	}

	rep := newReply(r)
	msg := &rep.msg
	switch res {
	case success:
		msg.Answer = rep.records(answer, state.QName())
		msg.Extra = rep.records(extra, "")
	case nameError:
		msg.Rcode = dns.RcodeNameError
		msg.Ns = rep.records([]dns.RR{m.soaInto(&rep.soa, zi)}, "")
	case noData:
		msg.Ns = rep.records([]dns.RR{m.soaInto(&rep.soa, zi)}, "")
	case serverFailure:
		msg.Rcode = dns.RcodeServerFailure
	}
	w.WriteMsg(msg)
	return dns.RcodeSuccess, nil
}

// zoneOf returns the index of the most specific of the plugin's zones that
// holds name, or -1.
func (m *Multicluster) zoneOf(name string) int {
	zi := -1
	for i, z := range m.Zones {
		if inZone(name, z) && (zi < 0 || len(z) > len(m.Zones[zi])) {
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

var resultLabel = map[result]string{success: "success", nameError: "NXDOMAIN", noData: "NODATA", serverFailure: "SERVFAIL"}

// lookup finds the records of a name; it reads only the backend's snapshot.
func (m *Multicluster) lookup(state request.Request, qname string, zi, fi int) (answer, extra []dns.RR, res result) {
	qtype := state.QType()
	p := parseName(qname, m.Zones[zi])
	switch p.kind {
	case kindNone:
		return nil, nil, nameError
	case kindApex:
		return m.apex(state, zi)
	case kindDNSVersion:
		if qtype == dns.TypeTXT {
			return []dns.RR{&dns.TXT{Hdr: m.hdr(qname, dns.TypeTXT), Txt: []string{dnsSchemaVersion}}}, nil, success
		}
		return nil, nil, noData
	case kindNSHost:
		return pick(m.nsAddress(state, qname, qtype), nil)
	case kindStatic:
		return nil, nil, noData
	case kindNamespace:
		if m.backend.HasNamespace(p.namespace) {
			return nil, nil, noData
		}
		return nil, nil, nameError
	}
	svc := m.backend.Lookup(p.service)
	if svc == nil || fi >= len(svc.Zones) {
		return nil, nil, nameError
	}
	z := &svc.Zones[fi]
	if p.kind == kindService {
		return answersFor(&z.Service, qtype)
	}
	if a := z.Sub[p.sub]; a != nil {
		return answersFor(a, qtype)
	}
	if _, ok := z.ENT[p.sub]; ok {
		return nil, nil, noData
	}
	return nil, nil, nameError
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
	return dns.RR_Header{Name: name, Rrtype: t, Class: dns.ClassINET, Ttl: m.TTL}
}

// soa is the SOA of the zone at index zi, shaped as CoreDNS's kubernetes
// plugin shapes its own.
func (m *Multicluster) soa(zi int) *dns.SOA { return m.soaInto(new(dns.SOA), zi) }

func (m *Multicluster) soaInto(soa *dns.SOA, zi int) *dns.SOA {
	zone := m.Zones[zi]
	h := m.hdr(zone, dns.TypeSOA)
	h.Ttl = min(m.TTL, 300)
	*soa = dns.SOA{Hdr: h, Ns: m.nsNames[zi], Mbox: m.mboxes[zi],
		Serial: m.backend.Serial(), Refresh: 7200, Retry: 1800, Expire: 86400, Minttl: m.TTL}
	return soa
}

func (m *Multicluster) ns(zi int) *dns.NS {
	return &dns.NS{Hdr: m.hdr(m.Zones[zi], dns.TypeNS), Ns: m.nsNames[zi]}
}

// nsAddress answers for ns.dns.<zone> with the address the query came in on,
// as the kubernetes plugin does when it finds no service of its own. A qtype
// of 0 gives the record of either family.
func (m *Multicluster) nsAddress(state request.Request, name string, qtype uint16) []dns.RR {
	ip := net.ParseIP(state.LocalIP())
	if ip == nil || ip.IsUnspecified() {
		return nil
	}
	if v4 := ip.To4(); v4 != nil {
		if qtype == dns.TypeA || qtype == 0 {
			return []dns.RR{&dns.A{Hdr: m.hdr(name, dns.TypeA), A: v4}}
		}
		return nil
	}
	if qtype == dns.TypeAAAA || qtype == 0 {
		return []dns.RR{&dns.AAAA{Hdr: m.hdr(name, dns.TypeAAAA), AAAA: ip}}
	}
	return nil
}
