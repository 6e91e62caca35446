package multicluster

import (
	"context"
	"sync"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/clustersetdns/multicluster/cache"
)

const subsystem = "multicluster"

var (
	responses = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: subsystem,
		Name:      "responses_total",
		Help:      "Counter of answers in the multicluster zones, by result (success, NXDOMAIN, NODATA, SERVFAIL).",
	}, []string{"server", "result"})

	serviceImports = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: subsystem,
		Name:      "serviceimports",
		Help:      "Services answered, by the ServiceImport version their answers come from.",
	}, []string{"version"})

	endpoints = promauto.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: subsystem,
		Name:      "endpoints",
		Help:      "Ready headless endpoint names answered.",
	})

	unreadVersions = promauto.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: subsystem,
		Name:      "unread_versions",
		Help:      "1 while the API server serves this ServiceImport version and the configuration reads no version of its shape, else 0.",
	}, []string{"version"})

	skipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: subsystem,
		Name:      "skipped_objects_total",
		Help:      "Counter of objects, or parts of objects, not used because they are unusable, by kind and reason.",
	}, []string{"kind", "reason"})
)

// resultLabel is the result label of each result.
var resultLabel = [...]string{success: "success", nameError: "NXDOMAIN", noData: "NODATA", serverFailure: "SERVFAIL"}

// resultCounters are one server's response counters, by result.
type resultCounters [len(resultLabel)]prometheus.Counter

// byServer caches each server's resultCounters, so that a query costs one
// map read instead of hashing its labels into the CounterVec.
var byServer sync.Map // server label → *resultCounters

// counters returns the response counters of the server that ctx belongs to.
func (m *Multicluster) counters(ctx context.Context) *resultCounters {
	server := metrics.WithServer(ctx)
	if c, ok := byServer.Load(server); ok {
		return c.(*resultCounters)
	}
	c := new(resultCounters)
	for i, l := range resultLabel {
		c[i] = responses.WithLabelValues(server, l)
	}
	actual, _ := byServer.LoadOrStore(server, c)
	return actual.(*resultCounters)
}

func recordStats(s cache.Stats) {
	for v, n := range s.Imports {
		serviceImports.WithLabelValues(v).Set(float64(n))
	}
	endpoints.Set(float64(s.Endpoints))
}

func recordSkip(kind, reason string) { skipped.WithLabelValues(kind, reason).Inc() }

func recordUnread(version string, unread bool) {
	v := 0.0
	if unread {
		v = 1
	}
	unreadVersions.WithLabelValues(version).Set(v)
}
