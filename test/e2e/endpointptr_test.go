package e2e

import (
	"slices"
	"strings"
	"testing"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestEndpointPTR: with endpoint_ptr, the address of a headless service's
// ready endpoint answers PTR with the endpoint's names in the zone
// (KEP-1645: <hostname>.<clusterid>.<svc>.<ns>.svc.clusterset.local, the
// address with dashes without a hostname), one per name at the address,
// also for a cluster ID with a dot and over IPv6; an endpoint that is not
// ready has none, and one that stops being ready loses it; the reverse
// zone's transfer holds each record once. Without the option, as before it:
// none.
func TestEndpointPTR(t *testing.T) {
	const ns = "endpoint-ptr"
	reverse := []string{"10.in-addr.arpa", "d.f.ip6.arpa"}
	start := func(options ...string) *harness.CoreDNS {
		return harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
			Zones:   append([]string{"clusterset.local"}, reverse...),
			Plugins: "transfer " + reverse[0] + " {\n\tto *\n}\n" + harness.MulticlusterBlock(plugin.Kubeconfig, options...),
		})
	}
	with, without := start("endpoint_ptr"), start()
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	writeImport(t, harness.Import{Namespace: ns, Name: "db", Type: "Headless", Ports: trustPorts})
	west := []mcsEndpoint{
		{addr: "10.150.0.1", hostname: "db-0"},
		{addr: "10.150.0.2"},
		{addr: "10.150.0.3", hostname: "db-2", ready: "false"},
	}
	applyMCSSlice(t, ns, "db-west", "db", "west", trustManagedBy, "IPv4", trustPorts, west)
	// The same address in a second cluster, whose ID has a dot.
	applyMCSSlice(t, ns, "db-east", "db", "east.prod", trustManagedBy, "IPv4", trustPorts,
		[]mcsEndpoint{{addr: "10.150.0.1", hostname: "db-0"}})
	applyMCSSlice(t, ns, "db-east-v6", "db", "east.prod", trustManagedBy, "IPv6", trustPorts,
		[]mcsEndpoint{{addr: "fd00:150::1", hostname: "db-0"}})

	name := func(host string) string { return n(host + ".db." + ns) }
	rev := func(ip string) string {
		r, err := dns.ReverseAddr(ip)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	ptr := func(ip string, hosts ...string) want {
		var w want
		for _, h := range hosts {
			w.Answer = append(w.Answer, rev(ip)+" ptr "+name(h))
		}
		return w
	}
	// Every slice has been read once each cluster's endpoint answers.
	for _, c := range []*harness.CoreDNS{with, without} {
		eventually(t, c, name("db-0.east.prod"), "AAAA", want{Answer: []string{aaaa(name("db-0.east.prod"), "fd00:150::1")}})
		eventually(t, c, name("10-150-0-2.west"), "A", want{Answer: []string{a(name("10-150-0-2.west"), "10.150.0.2")}})
	}
	// An authoritative NXDOMAIN with the reverse zone's SOA.
	nx := func(c *harness.CoreDNS, ip string) {
		t.Helper()
		r := dig(t, c, rev(ip), "PTR")
		if r.Rcode != "NXDOMAIN" || len(r.Answer) != 0 || !r.AA() || len(r.Msg().Ns) != 1 ||
			r.Msg().Ns[0].Header().Rrtype != dns.TypeSOA || r.Msg().Ns[0].Header().Name != reverse[0]+"." {
			t.Errorf("PTR %s: want an authoritative NXDOMAIN with the SOA of %s\n%s", ip, reverse[0], r)
		}
	}
	expect(t, with, defaultTTL, rev("10.150.0.1"), "PTR", ptr("10.150.0.1", "db-0.east.prod", "db-0.west"))
	expect(t, with, defaultTTL, rev("10.150.0.2"), "PTR", ptr("10.150.0.2", "10-150-0-2.west"))
	expect(t, with, defaultTTL, rev("fd00:150::1"), "PTR", ptr("fd00:150::1", "db-0.east.prod"))
	nx(with, "10.150.0.3") // not ready
	nx(with, "10.150.0.9") // no endpoint
	nx(without, "10.150.0.1")
	nx(without, "10.150.0.2")

	// The reverse zone's transfer: each record once.
	var ptrs []string
	for _, rr := range digAXFR(t, with.Port, reverse[0]+".") {
		// Other tests' namespaces share the API server: this one's alone.
		if p, ok := rr.(*dns.PTR); ok && strings.HasSuffix(p.Ptr, "."+ns+".svc.clusterset.local.") {
			ptrs = append(ptrs, contract.Brief(p))
		}
	}
	wantPTRs := slices.Concat(ptr("10.150.0.1", "db-0.east.prod", "db-0.west").Answer, ptr("10.150.0.2", "10-150-0-2.west").Answer)
	slices.Sort(ptrs)
	slices.Sort(wantPTRs)
	if !slices.Equal(ptrs, wantPTRs) {
		t.Errorf("the transfer of %s: PTR records\n%q\nwant\n%q", reverse[0], ptrs, wantPTRs)
	}

	// db-0 in west stops being ready: its name goes, east's stays.
	west[0].ready = "false"
	applyMCSSlice(t, ns, "db-west", "db", "west", trustManagedBy, "IPv4", trustPorts, west)
	eventually(t, with, rev("10.150.0.1"), "PTR", ptr("10.150.0.1", "db-0.east.prod"))
}
