package multicluster

import (
	"context"
	"net"
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
	zones   []servedZone // Zones, in order, with what answering in each takes
	forward []string     // the forward zones, in order: the index of each is its forward index

	nsAddrs    []net.IP // ns_address: the addresses of ns.dns.<zone>; nil for the server's own
	boundAddrs []net.IP // the server block's own addresses (boundAddrs)

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
	clusterID      string // the local cluster; else the ClusterProperty's
	preferLocal    bool   // every headless service prefers the local cluster
	localZone      string // local_zone: this replica's topology zone, lower-case
	endpointPTR    bool   // endpoint_ptr: headless endpoints answer PTR in the reverse zones
	clusterSel     bool   // cluster_selectors: <cluster>.pin._cluster and <cluster>.prefer._cluster names
	zonal          bool   // zonal: <zone>.pin._zone and <zone>.prefer._zone names
	denyRanges     []netip.Prefix
	allowNS        []string // protected namespaces answered all the same
	maxEndpoints   int      // 0 for cache.DefaultMaxEndpoints
	startupTimeout time.Duration
	closeIdle      func()          // closes the API server connections at shutdown
	ctx            context.Context // the controller's, until shutdown
	stop           context.CancelFunc
	done           chan struct{}
}

// servedZone is one of the plugin's zones.
type servedZone struct {
	name string // lower-case, fully qualified
	// forward is the zone's index among the forward zones, which is also
	// the index of its records in cache.Service.Zones; -1 for a reverse zone.
	forward int
	ns      string // ns.dns.<zone>: the NS record's target and the SOA's MNAME
	mbox    string // hostmaster.<zone>: the SOA's RNAME
}

// setZones sets the zones and tells forward zones from reverse ones.
func (m *Multicluster) setZones(names []string) {
	m.Zones, m.zones, m.forward = names, make([]servedZone, len(names)), nil
	for i, name := range names {
		z := servedZone{name: name, forward: -1, ns: "ns.dns." + name, mbox: "hostmaster." + name}
		if !isReverseZone(name) {
			z.forward = len(m.forward)
			m.forward = append(m.forward, name)
		}
		m.zones[i] = z
	}
}

// isReverseZone reports whether a zone is a reverse zone: inside
// in-addr.arpa or ip6.arpa, or one of them itself (kubeadm's Corefile names
// them so), which dnsutil.IsReverse, made for query names, does not count.
func isReverseZone(name string) bool {
	return dnsutil.IsReverse(name) > 0 || name == "in-addr.arpa." || name == "ip6.arpa."
}

// Name implements plugin.Handler.
func (m *Multicluster) Name() string { return pluginName }

// Ready implements ready.Readiness: ready once the informers have synced.
func (m *Multicluster) Ready() bool { return m.backend != nil && m.backend.HasSynced() }
