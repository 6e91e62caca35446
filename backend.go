package multicluster

import "github.com/miekg/dns"

// DefaultTTL is the ttl option's default, the TTL of every record when the
// Corefile sets none.
const DefaultTTL = defaultTTL

// NewWithBackend returns the plugin as a `multicluster { ttl TTL }` block
// in a server block for zones makes it, but answering from b rather than
// from a controller it starts; it starts nothing. b must hold answers built
// for the same zones and TTL, as cache.Config{Zones: zones, TTL: ttl}.Static
// builds them from API objects. Set Next before serving to chain a plugin.
//
// It lets a program put the plugin's handler in CoreDNS's server without an
// API server: hack/run.sh answers the objects of testdata/ so at once, while
// the kube-apiserver the real plugin then watches is still being built.
func NewWithBackend(zones []string, ttl uint32, b Backend) *Multicluster {
	names := make([]string, len(zones))
	for i, z := range zones {
		names[i] = dns.CanonicalName(z)
	}
	m := &Multicluster{TTL: ttl, backend: b}
	m.setZones(names)
	return m
}
