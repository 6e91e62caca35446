package cache

import (
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miekg/dns"
)

// FuzzObjectToRecords feeds arbitrary field values through conversion and
// building: nothing may panic, every record must pack into a message, and
// no guard may be passed (guard.go): no answered address is one the
// standard library's net package calls unspecified, loopback, link-local or
// multicast, nor the broadcast address, nor in the denied range; a slice of
// a cluster the import does not list answers nothing; and answers that are
// the local cluster's alone hold only addresses of the local Service's own
// (own, comma-separated).
func FuzzObjectToRecords(f *testing.F) {
	f.Add("ClusterSetIP", "10.0.0.1,fd00::1", "http,TCP,80;dns,UDP,53", "west", "db-0", "10.1.0.1", "IPv4", "", "", "")
	f.Add("Headless", "", "mysql,,3306", "east.prod", "", "fd00::2", "IPv6", "east.prod,west", "fd00::/120", "fd00::2")
	f.Add("Headless", "1.2.3.4", "A_B,SCTP,0", "x..y", "-h-", "999.1.1.1", "FQDN", "x..y", "", "")
	f.Add("ClusterSetIP", "169.254.169.254,::ffff:127.0.0.1,10.42.1.2", "http,TCP,80", "west", "", "239.1.1.1,255.255.255.255,10.1.0.9", "IPv4", "west", "10.42.0.0/16", "10.1.0.9")
	f.Add("Headless", "", "http,TCP,80", "rogue", "", "10.9.0.1", "IPv4", "east", "", "")
	f.Fuzz(func(t *testing.T, typ, ips, ports, cluster, host, addrs, family, listed, deny, own string) {
		denied := fuzzDeny(deny)
		im := fuzzImport(typ, ips, ports, listed, denied)
		s := fuzzSlice(cluster, host, addrs, family, denied)
		if !im.HasData {
			return
		}
		ownSet := map[netip.Addr]bool{}
		for _, a := range strings.Split(own, ",") {
			if ip, err := netip.ParseAddr(a); err == nil {
				ownSet[ip] = true
			}
		}
		proven := func(_ *Slice, e Endpoint) bool {
			for _, a := range e.Addrs {
				if !ownSet[a] {
					return false
				}
			}
			return true
		}
		n, ok := normalize(im, []*Slice{s}, s.Cluster, "", proven)
		if !ok {
			return
		}
		if im.Headless && listed != "" && !slices.Contains(strings.Split(strings.ToLower(listed), ","), s.Cluster) {
			t.Fatalf("cluster %q, not among %q, answers", s.Cluster, listed)
		}
		svc := build(im, n, []string{"clusterset.local."}, 5, SelectByCluster|SelectByZone)
		if !svc.Headless() {
			checkClusterSetIPFields(t, svc)
			for _, ip := range svc.IPs() {
				checkAllowed(t, ip.AsSlice(), denied)
			}
			return
		}
		for _, rr := range checkHeadlessRecords(t, svc) {
			switch r := rr.(type) {
			case *dns.A:
				checkAllowed(t, r.A, denied)
			case *dns.AAAA:
				checkAllowed(t, r.AAAA, denied)
			}
		}
		z := svc.Zone(0)
		if z.Closest&ClosestA != 0 {
			for _, rr := range z.Service.A {
				if ip, _ := netip.AddrFromSlice(rr.(*dns.A).A.To4()); !ownSet[ip] {
					t.Fatalf("%v answered as the local cluster's, not the local Service's own %q", rr, own)
				}
			}
		}
	})
}

// fuzzDeny is the range deny names, if it names one.
func fuzzDeny(deny string) []netip.Prefix {
	if p, err := netip.ParsePrefix(deny); err == nil {
		return []netip.Prefix{p.Masked()}
	}
	return nil
}

// checkAllowed fails when ip is an address no Service may answer: the net
// package's reading of it, a second decoder beside netip's.
func checkAllowed(t *testing.T, ip net.IP, deny []netip.Prefix) {
	t.Helper()
	if ip.IsUnspecified() || ip.IsLoopback() || ip.IsLinkLocalUnicast() || ip.IsMulticast() || ip.Equal(net.IPv4bcast) ||
		ip.To4() != nil && ip.To4()[0] == 0 {
		t.Fatalf("answered %v", ip)
	}
	for _, p := range deny {
		if a, ok := netip.AddrFromSlice(ip); ok && p.Contains(a.Unmap()) {
			t.Fatalf("answered %v, in the denied %v", ip, p)
		}
	}
}

// fuzzImport is a v1alpha2 ServiceImport of type typ, with the IPs of ips
// (comma-separated) and the ports of ports (name,protocol,number;...; the
// number's characters read as digits modulo 10), read as the plugin reads it.
func fuzzImport(typ, ips, ports, clusters string, deny []netip.Prefix) *Import {
	u := v2("ns", "svc", "1", "")
	u.Object["type"] = typ
	var ipList []any
	for _, ip := range strings.Split(ips, ",") {
		ipList = append(ipList, ip)
	}
	u.Object["ips"] = ipList
	var portList []any
	for _, p := range strings.Split(ports, ";") {
		f := strings.Split(p, ",")
		for len(f) < 3 {
			f = append(f, "")
		}
		n := int64(0)
		for _, c := range f[2] {
			n = n*10 + int64(c%10)
			if n > 1<<20 {
				break
			}
		}
		portList = append(portList, map[string]any{"name": f[0], "protocol": f[1], "port": n})
	}
	u.Object["ports"] = portList
	if clusters != "" {
		var cs []any
		for _, c := range strings.Split(clusters, ",") {
			cs = append(cs, map[string]any{"cluster": c})
		}
		u.Object["clusters"] = cs
	}
	u.SetAPIVersion(ServiceImports(V1alpha2).GroupVersion().String())
	u.SetKind("ServiceImport")
	obj, err := decodeJSON(V1alpha2, u.Object)
	if err != nil {
		panic(err)
	}
	im, _ := typedVersions[V1alpha2].read(obj, deny)
	return im
}

// fuzzSlice is an EndpointSlice of the service from cluster, of address type
// family, with one endpoint: addrs (comma-separated) and hostname host.
func fuzzSlice(cluster, host, addrs, family string, deny []netip.Prefix) *Slice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s",
		Labels: map[string]string{LabelServiceName: "svc", LabelSourceCluster: cluster}},
		AddressType: discoveryv1.AddressType(family)}
	es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: strings.Split(addrs, ","), Hostname: &host})
	return sliceFrom(es, deny)
}

// checkClusterSetIPFields checks what the handler relies on when it makes a
// ClusterSetIP service's records from its fields: one valid address per
// family, and ports that can name an SRV record.
func checkClusterSetIPFields(t *testing.T, svc *Service) {
	t.Helper()
	var have4, have6 bool
	for _, ip := range svc.IPs() {
		if !ip.IsValid() || ip.Zone() != "" || (ip.Is4() && have4) || (ip.Is6() && have6) {
			t.Fatalf("ClusterSetIPs %v: not one valid address per family", svc.IPs())
		}
		have4, have6 = have4 || ip.Is4(), have6 || ip.Is6()
	}
	for _, p := range svc.Ports() {
		if _, ok := dns.IsDomainName(p.Sub() + ".svc.ns.svc.clusterset.local."); !ok ||
			len(p.Name) > 63 || p.Port == 0 || strings.ToLower(p.Name) != p.Name {
			t.Fatalf("port %+v cannot name an SRV record", p)
		}
	}
}

// checkHeadlessRecords checks that a headless service's names are domain
// names and that every record it built packs into a message and unpacks,
// and returns the records.
func checkHeadlessRecords(t *testing.T, svc *Service) []dns.RR {
	t.Helper()
	var all []dns.RR
	z := *svc.Zone(0)
	all = append(all, z.Service.A...)
	all = append(all, z.Service.AAAA...)
	all = append(all, z.Service.SRV...)
	all = append(all, z.Service.Extra...)
	for sub, a := range z.Sub {
		if _, ok := dns.IsDomainName(sub + ".svc.ns.svc.clusterset.local."); !ok {
			t.Fatalf("sub name %q is not a domain name", sub)
		}
		all = append(append(append(append(all, a.A...), a.AAAA...), a.SRV...), a.Extra...)
	}
	for _, rr := range all {
		m := new(dns.Msg)
		m.SetQuestion("clusterset.local.", dns.TypeA)
		m.Answer = []dns.RR{rr}
		buf, err := m.Pack()
		if err != nil {
			t.Fatalf("record %v does not pack: %v", rr, err)
		}
		if err := new(dns.Msg).Unpack(buf); err != nil {
			t.Fatalf("record %v does not unpack: %v", rr, err)
		}
	}
	return all
}
