package e2e

import (
	"testing"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestEndpointAddresses: an endpoint of several addresses without a
// hostname is named by each of its addresses (the contract: "its hostname,
// else its IP with . or : turned into -"; the kubernetes plugin does the
// same), so that each name answers its own address and SRV has a target per
// address; an endpoint with a hostname answers all of its addresses under it
// (KEP-1645 specification §2.4.1: one A record for each IP of a hostname).
func TestEndpointAddresses(t *testing.T) {
	const ns = "endpoint-addresses"
	c := startPluginDNS(t)
	ensureNamespace(t, ns)
	writeImport(t, harness.Import{Namespace: ns, Name: "db", Type: "Headless", Ports: trustPorts})
	es := mcsSlice(ns, "db-west", "db", "west", trustManagedBy, "IPv4", trustPorts,
		[]mcsEndpoint{{addr: "10.155.0.2"}, {addr: "10.155.0.4", hostname: "db-1"}})
	es.Endpoints[0].Addresses = append(es.Endpoints[0].Addresses, "10.155.0.3")
	es.Endpoints[1].Addresses = append(es.Endpoints[1].Addresses, "10.155.0.5")
	applyObjects(t, sliceObject(t, es))

	name := n("db." + ns)
	host := func(h string) string { return n(h + ".west.db." + ns) }
	eventually(t, c, name, "A", want{Answer: []string{a(name, "10.155.0.2"), a(name, "10.155.0.3"), a(name, "10.155.0.4"), a(name, "10.155.0.5")}})
	expect(t, c, defaultTTL, host("10-155-0-2"), "A", want{Answer: []string{a(host("10-155-0-2"), "10.155.0.2")}})
	expect(t, c, defaultTTL, host("10-155-0-3"), "A", want{Answer: []string{a(host("10-155-0-3"), "10.155.0.3")}})
	expect(t, c, defaultTTL, host("db-1"), "A", want{Answer: []string{a(host("db-1"), "10.155.0.4"), a(host("db-1"), "10.155.0.5")}})
	owner := n("_http._tcp.db." + ns)
	expect(t, c, defaultTTL, owner, "SRV", want{
		Answer: []string{srv(owner, 33, 80, host("10-155-0-2")), srv(owner, 33, 80, host("10-155-0-3")), srv(owner, 33, 80, host("db-1"))},
		Additional: []string{a(host("10-155-0-2"), "10.155.0.2"), a(host("10-155-0-3"), "10.155.0.3"),
			a(host("db-1"), "10.155.0.4"), a(host("db-1"), "10.155.0.5")},
	})
}
