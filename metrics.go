package multicluster

import (
	"github.com/coredns/coredns/plugin"

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

	skipped = promauto.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: subsystem,
		Name:      "skipped_objects_total",
		Help:      "Counter of objects, or parts of objects, not used because they are unusable, by kind and reason.",
	}, []string{"kind", "reason"})
)

func recordStats(s cache.Stats) {
	for v, n := range s.Imports {
		serviceImports.WithLabelValues(v).Set(float64(n))
	}
	endpoints.Set(float64(s.Endpoints))
}

func recordSkip(kind, reason string) { skipped.WithLabelValues(kind, reason).Inc() }
