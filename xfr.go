package multicluster

import (
	"cmp"
	"slices"

	"github.com/coredns/coredns/plugin/transfer"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/cache"
)

// Transfer implements transfer.Transferer: the transfer plugin calls it for
// AXFR and IXFR. A reverse zone transfers the PTR records of the ClusterSetIPs
// (and, with endpoint_ptr, headless endpoints' addresses) inside it. An IXFR from the current serial gets the SOA alone, as in
// CoreDNS's other plugins; any other IXFR gets the whole zone.
func (m *Multicluster) Transfer(zone string, serial uint32) (<-chan []dns.RR, error) {
	zi := slices.Index(m.Zones, zone)
	if zi < 0 || m.backend == nil || !m.backend.HasSynced() {
		return nil, transfer.ErrNotAuthoritative
	}
	soa := []dns.RR{m.soa(zi)}
	services := m.services()
	ch := make(chan []dns.RR)
	go func() {
		defer close(ch)
		ch <- soa
		if serial != 0 && soa[0].(*dns.SOA).Serial == serial {
			return
		}
		ns := m.ns(zi)
		// The name server's addresses: ns.dns.<zone> is inside the zone,
		// and a zone without them does not load (named-checkzone: "NS has
		// no address records").
		ch <- append([]dns.RR{ns}, m.addressRecords(ns.Ns, m.serverAddrs(), 0)...)
		if fi := m.zones[zi].forward; fi >= 0 {
			ch <- []dns.RR{&dns.TXT{Hdr: m.hdr("dns-version."+zone, dns.TypeTXT), Txt: []string{dnsSchemaVersion}}}
			for _, svc := range services {
				switch {
				case !svc.Headless():
					ch <- m.clusterSetIPRecords(svc, zone)
				case svc.Zone(fi) != nil:
					ch <- zoneRecords(svc.Zone(fi))
				}
			}
		} else {
			// Each address once: ptrs names every service and endpoint at
			// it, and services may share one.
			seen := map[string]bool{}
			for _, svc := range services {
				addrs := svc.IPs()
				if m.endpointPTR {
					addrs = svc.ReverseAddrs()
				}
				for _, ip := range addrs {
					name, err := dns.ReverseAddr(ip.String())
					if err == nil && !seen[name] && dns.IsSubDomain(zone, name) {
						seen[name] = true
						ch <- m.ptrs(name)
					}
				}
			}
		}
		ch <- soa
	}()
	return ch, nil
}

// services lists every service with answers, by namespace and name.
func (m *Multicluster) services() []*cache.Service {
	var list []*cache.Service
	m.backend.Each(func(s *cache.Service) bool { list = append(list, s); return true })
	slices.SortFunc(list, func(a, b *cache.Service) int {
		return cmp.Or(cmp.Compare(a.Namespace(), b.Namespace()), cmp.Compare(a.Name(), b.Name()))
	})
	return list
}

// zoneRecords is every record of a headless service in one zone, in a stable order.
func zoneRecords(z *cache.ZoneAnswers) []dns.RR {
	rs := slices.Concat(z.Service.A, z.Service.AAAA, z.Service.SRV)
	subs := make([]string, 0, len(z.Sub))
	for sub := range z.Sub {
		subs = append(subs, sub)
	}
	slices.Sort(subs)
	for _, sub := range subs {
		a := z.Sub[sub]
		rs = append(rs, slices.Concat(a.A, a.AAAA, a.SRV)...)
	}
	return (&reply{}).records(rs, "")
}
