package main

// This file is compiled into two programs: devenv, and snapshot.go's server
// of testdata/, which hack/run.sh builds from the plugin's own module (see
// snapshot.go). It imports only what both modules hold.

import (
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clustersetdns/multicluster/cache"
)

// zone is the one zone devenv's CoreDNS and the snapshot server serve.
const zone = "clusterset.local"

// portFree fails early, before the long part, when the port is taken. The
// snapshot server binds with SO_REUSEPORT, as CoreDNS does, which would
// share the port with another such server rather than fail: it asks first.
func portFree(port int) error {
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (TCP): %w; choose another with -port", addr, err)
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (UDP): %w; choose another with -port", addr, err)
	}
	return u.Close()
}

// runtimeObjects turns what contract.ReadObjects read into what the
// snapshot builder takes.
func runtimeObjects(objs []*unstructured.Unstructured) []runtime.Object {
	in := make([]runtime.Object, len(objs))
	for i, o := range objs {
		in[i] = o
	}
	return in
}

// answers are the plugin's answers to the objects in the zone, with ttl.
func answers(objs []*unstructured.Unstructured, ttl uint32) (*cache.Static, error) {
	return cache.NewStatic([]string{zone + "."}, ttl, runtimeObjects(objs)...)
}

// digCommands lists one dig command for each kind of name st answers. The
// names come from the plugin's own answers to the objects, so the list
// cannot drift from what CoreDNS serves.
func digCommands(port int, st *cache.Static) string {
	var svcs []*cache.Service
	st.Each(func(s *cache.Service) bool { svcs = append(svcs, s); return true })
	slices.SortFunc(svcs, func(a, b *cache.Service) int {
		return strings.Compare(a.Namespace()+"/"+a.Name(), b.Namespace()+"/"+b.Name())
	})

	d := digs{seen: map[string]bool{}}
	d.add(zone, "SOA", "the apex")
	d.add(zone, "NS", "the apex")
	d.add("dns-version."+zone, "TXT", "schema version")
	for _, s := range svcs {
		d.service(s)
	}
	d.add("nosuch.svc."+zone, "A", "NXDOMAIN")

	var b strings.Builder
	for _, q := range d.qs {
		fmt.Fprintf(&b, "  dig @127.0.0.1 -p %d +norec %-58s # %s\n", port, q[0], q[1])
	}
	return b.String()
}

// digs collects the questions of digCommands, one of each kind.
type digs struct {
	qs   [][2]string // "name qtype", why
	seen map[string]bool
}

func (d *digs) add(name, qtype, why string) { d.qs = append(d.qs, [2]string{name + " " + qtype, why}) }

// once reports whether kind is new, and marks it seen.
func (d *digs) once(kind string) bool {
	if d.seen[kind] {
		return false
	}
	d.seen[kind] = true
	return true
}

// service adds the questions of s of a kind not asked yet.
func (d *digs) service(s *cache.Service) {
	svc := fmt.Sprintf("%s.%s.svc.%s", s.Name(), s.Namespace(), zone)
	if d.once("namespace") {
		d.add(s.Namespace()+".svc."+zone, "A", "a namespace: NODATA")
	}
	var port string
	if ps := s.Ports(); len(ps) > 0 {
		port = ps[0].Sub()
	}
	if z := s.Zone(0); z != nil {
		if d.once("headless") {
			d.headless(svc, port, z)
		}
		return
	}
	v4 := slices.ContainsFunc(s.IPs(), netip.Addr.Is4)
	v6 := slices.ContainsFunc(s.IPs(), netip.Addr.Is6)
	switch {
	case v4 && v6 && d.once("dual"):
		d.add(svc, "AAAA", "dual-stack ClusterSetIP")
	case v4 && !v6 && d.once("v4"):
		d.add(svc, "A", "ClusterSetIP")
		d.add(svc, "AAAA", "IPv4 only: NODATA")
		if port != "" {
			d.add(port+"."+svc, "SRV", "ClusterSetIP SRV")
		}
	case v6 && !v4 && d.once("v6"):
		d.add(svc, "AAAA", "IPv6-only ClusterSetIP")
	}
}

// headless adds the questions of the first headless service, z its answers.
func (d *digs) headless(svc, port string, z *cache.ZoneAnswers) {
	d.add(svc, "A", "headless: ready endpoints of every cluster, no plain EndpointSlice's")
	if port != "" {
		d.add(port+"."+svc, "SRV", "headless SRV: one per ready endpoint")
	}
	d.add(svc, "SRV", "all named ports")
	for _, sub := range slices.Sorted(maps.Keys(z.Sub)) {
		if strings.HasPrefix(sub, "_") {
			continue // a port's SRV name
		}
		host, cluster, _ := strings.Cut(sub, ".")
		qtype, rrs := "A", z.Sub[sub].A
		if len(rrs) == 0 {
			qtype, rrs = "AAAA", z.Sub[sub].AAAA
		}
		how := "its hostname"
		if len(rrs) > 0 && host == cache.AddressLabel(addressOf(rrs[0])) {
			how = "its address"
		}
		if strings.Contains(cluster, ".") {
			how += ", dotted cluster ID"
		}
		if d.once("endpoint " + qtype + how) {
			d.add(sub+"."+svc, qtype, "one endpoint of cluster "+cluster+", named by "+how)
		}
		if d.once("cluster") {
			d.add(cluster+"."+svc, "A", "a cluster: NODATA")
		}
	}
}

// addressOf is the address of an A or AAAA record.
func addressOf(rr dns.RR) netip.Addr {
	var b []byte
	switch r := rr.(type) {
	case *dns.A:
		b = r.A
	case *dns.AAAA:
		b = r.AAAA
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip.Unmap()
}
