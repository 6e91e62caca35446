package e2e

import (
	"strings"
	"testing"
)

// Unusable EndpointSlices on the real API server: FQDN slices, no
// source-cluster label, a cluster ID that is no DNS name, a slice for an
// import that does not exist. None may crash the plugin, make a malformed
// answer, or disturb the names that are fine.
func TestBadEndpointSlices(t *testing.T) {
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: bad\n")
	apply(t, `apiVersion: multicluster.x-k8s.io/v1alpha2
kind: ServiceImport
metadata: {name: hl, namespace: bad}
spec: {}
type: Headless
ports: [{name: http, protocol: TCP, port: 80}]
`)
	slice := func(name, svc, labels, addrType, addr string) string {
		return `apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: ` + name + `
  namespace: bad
  labels: {multicluster.kubernetes.io/service-name: ` + svc + labels + `}
addressType: ` + addrType + `
endpoints:
- addresses: ["` + addr + `"]
  hostname: h-` + name + `
`
	}
	apply(t, slice("good", "hl", ", multicluster.kubernetes.io/source-cluster: west", "IPv4", "10.90.0.1"))
	c := startPluginDNS(t)
	eventually(t, c, n("hl.bad"), "A", want{answer: []string{a(n("hl.bad"), "10.90.0.1")}})

	apply(t, slice("fqdn", "hl", ", multicluster.kubernetes.io/source-cluster: west", "FQDN", "example.org"))
	apply(t, slice("nocluster", "hl", "", "IPv4", "10.90.0.2"))
	apply(t, slice("oddcluster", "hl", ", multicluster.kubernetes.io/source-cluster: West_1", "IPv4", "10.90.0.3"))
	apply(t, slice("orphan", "nosuch", ", multicluster.kubernetes.io/source-cluster: west", "IPv4", "10.90.0.4"))
	apply(t, slice("late", "hl", ", multicluster.kubernetes.io/source-cluster: east", "IPv4", "10.90.0.5"))
	// The last good slice shows, so every slice before it has been seen.
	eventually(t, c, n("hl.bad"), "A", want{answer: []string{a(n("hl.bad"), "10.90.0.1"), a(n("hl.bad"), "10.90.0.5")}})
	expect(t, c, defaultTTL, n("h-good.west.hl.bad"), "A", want{answer: []string{a(n("h-good.west.hl.bad"), "10.90.0.1")}})
	expect(t, c, defaultTTL, n("h-oddcluster.west_1.hl.bad"), "A", nxdomain())
	expect(t, c, defaultTTL, n("nosuch.bad"), "A", nxdomain())
	expect(t, c, defaultTTL, n("web.demo"), "A", want{answer: []string{a(n("web.demo"), "10.42.0.10")}})
	r := dig(t, c, n("hl.bad"), "SRV")
	for _, rr := range r.Answer {
		if strings.Contains(rr.String(), "fqdn") || strings.Contains(rr.String(), "nocluster") || strings.Contains(rr.String(), "oddcluster") {
			t.Errorf("an unusable slice reached the answers: %s", rr)
		}
	}
	if len(r.Answer) != 2 {
		t.Errorf("hl.bad SRV: %d records, want 2 (h-good.west, h-late.east):\n%s", len(r.Answer), r)
	}
	if strings.Contains(c.Output(), "panic") {
		t.Errorf("panic:\n%s", c.Output())
	}
}
