// Package multicluster is a CoreDNS plugin that serves the Kubernetes
// Multi-Cluster Services DNS zone (clusterset.local) from ServiceImports and
// multi-cluster EndpointSlices, as KEP-1645's DNS specification describes.
package multicluster

import (
	"context"
	"time"

	"github.com/coredns/coredns/plugin"
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
	HasNamespace(namespace string) bool
	Serial() uint32
}

// Multicluster is the plugin.
type Multicluster struct {
	Next  plugin.Handler
	Zones []string // lower-case, fully qualified; the zone index matches cache.Service.Zones
	TTL   uint32
	Fall  fall.F

	backend Backend

	// Set from the Corefile, used when starting the controller.
	kubeconfig     string
	kubecontext    string
	fallback       bool
	namespaces     []string
	startupTimeout time.Duration
	stop           context.CancelFunc
	done           chan struct{}
}

// Name implements plugin.Handler.
func (m *Multicluster) Name() string { return pluginName }

// Ready implements ready.Readiness: ready once the informers have synced.
func (m *Multicluster) Ready() bool { return m.backend != nil && m.backend.HasSynced() }
