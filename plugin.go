// Package multicluster is a CoreDNS plugin that serves the Kubernetes
// Multi-Cluster Services DNS zone (clusterset.local) from ServiceImports and
// multi-cluster EndpointSlices, as KEP-1645's DNS specification describes.
package multicluster

import (
	"context"
	"net/netip"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/pkg/dnsutil"
	"github.com/coredns/coredns/plugin/pkg/fall"
	clog "github.com/coredns/coredns/plugin/pkg/log"

	"github.com/clustersetdns/multicluster/cache"
)

const pluginName = "multicluster"

var log = clog.NewWithPlugin(pluginName)

// Defaults of the Corefile options.
const (
	defaultTTL            = 5
	defaultStartupTimeout = 5 * time.Second
	dnsSchemaVersion      = "1.0.0"
)

// Backend is what the handler reads answers from. The cache's Controller is
// the real one; tests use a static fake.
type Backend interface {
	HasSynced() bool
	Lookup(nameDotNamespace string) *cache.Service
	LookupIP(ip netip.Addr) []*cache.Service
	HasNamespace(namespace string) bool
	Serial() uint32
	Each(func(*cache.Service) bool)
}

// Multicluster is the plugin.
type Multicluster struct {
	Next  plugin.Handler
	Zones []string // lower-case, fully qualified: forward and reverse zones
	TTL   uint32
	Fall  fall.F

	backend Backend
	forward []string // the forward zones; their index is that of cache.Service.Zones
	zoneFwd []int    // for each of Zones, its index in forward, or -1 for a reverse zone
	nsNames []string // for each of Zones, ns.dns.<zone>
	mboxes  []string // for each of Zones, hostmaster.<zone>

	// Set from the Corefile, used when starting the controller.
	kubeconfig     string
	kubecontext    string
	endpoint       string
	tlsFiles       []string // cert, key, CA
	qps            float32
	burst          int
	labels         string // a label selector on ServiceImports
	fallback       bool
	namespaces     []string
	startupTimeout time.Duration
	stop           context.CancelFunc
	done           chan struct{}
}

// setZones sets the zones and tells forward zones from reverse ones.
func (m *Multicluster) setZones(zones []string) {
	m.Zones, m.forward, m.zoneFwd = zones, nil, make([]int, len(zones))
	m.nsNames, m.mboxes = make([]string, len(zones)), make([]string, len(zones))
	for i, z := range zones {
		m.nsNames[i], m.mboxes[i] = "ns.dns."+z, "hostmaster."+z
		if dnsutil.IsReverse(z) > 0 {
			m.zoneFwd[i] = -1
			continue
		}
		m.zoneFwd[i] = len(m.forward)
		m.forward = append(m.forward, z)
	}
}

// Name implements plugin.Handler.
func (m *Multicluster) Name() string { return pluginName }

// Ready implements ready.Readiness: ready once the informers have synced.
func (m *Multicluster) Ready() bool { return m.backend != nil && m.backend.HasSynced() }
