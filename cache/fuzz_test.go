package cache

import (
	"strings"
	"testing"

	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/miekg/dns"
)

// FuzzObjectToRecords feeds arbitrary field values through conversion and
// building: nothing may panic, and every record must pack into a message.
func FuzzObjectToRecords(f *testing.F) {
	f.Add("ClusterSetIP", "10.0.0.1,fd00::1", "http,TCP,80;dns,UDP,53", "west", "db-0", "10.1.0.1", "IPv4")
	f.Add("Headless", "", "mysql,,3306", "east.prod", "", "fd00::2", "IPv6")
	f.Add("Headless", "1.2.3.4", "A_B,SCTP,0", "x..y", "-h-", "999.1.1.1", "FQDN")
	f.Fuzz(func(t *testing.T, typ, ips, ports, cluster, host, addrs, family string) {
		im := fuzzImport(typ, ips, ports)
		s := fuzzSlice(cluster, host, addrs, family)
		if !im.HasData {
			return
		}
		n, ok := normalize(im, []*Slice{s}, "", nil)
		if !ok {
			return
		}
		svc := build(im, n, []string{"clusterset.local."}, 5)
		if !svc.Headless() {
			checkClusterSetIPFields(t, svc)
			return
		}
		checkHeadlessRecords(t, svc)
	})
}

// fuzzImport is a v1alpha2 ServiceImport of type typ, with the IPs of ips
// (comma-separated) and the ports of ports (name,protocol,number;...; the
// number's characters read as digits modulo 10), read as the plugin reads it.
func fuzzImport(typ, ips, ports string) *Import {
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
	return importFromV1alpha2(u)
}

// fuzzSlice is an EndpointSlice of the service from cluster, of address type
// family, with one endpoint: addrs (comma-separated) and hostname host.
func fuzzSlice(cluster, host, addrs, family string) *Slice {
	es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "s",
		Labels: map[string]string{LabelServiceName: "svc", LabelSourceCluster: cluster}},
		AddressType: discoveryv1.AddressType(family)}
	es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: strings.Split(addrs, ","), Hostname: &host})
	return sliceFrom(es, nil)
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
// names and that every record it built packs into a message and unpacks.
func checkHeadlessRecords(t *testing.T, svc *Service) {
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
}
