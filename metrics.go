package multicluster

import (
	"context"
	"sync"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/coredns/coredns/plugin/metrics"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promauto"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/metricname"
)

// registered are the plugin's collectors, in the order they are made: the
// lint test reads them here, so that a new metric is checked without a
// list kept by hand.
var registered []prometheus.Collector

// recording registers with the default registerer, as promauto does, and
// keeps each collector in registered.
type recording struct{ prometheus.Registerer }

func (r recording) Register(c prometheus.Collector) error {
	registered = append(registered, c)
	return r.Registerer.Register(c)
}

func (r recording) MustRegister(cs ...prometheus.Collector) {
	registered = append(registered, cs...)
	r.Registerer.MustRegister(cs...)
}

var reg = promauto.With(recording{prometheus.DefaultRegisterer})

// The metrics are declared as CoreDNS's plugins declare theirs, under
// plugin.Namespace and the plugin's subsystem, with names from package
// metricname, which the dashboard and alerting rules of deploy/monitoring are
// generated from; TestMetricNames checks the two agree.
var (
	responses = reg.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.ResponsesName,
		Help:      "Counter of answers in the multicluster zones, by result (success, NXDOMAIN, NODATA, SERVFAIL).",
	}, []string{metricname.Server, metricname.Result})

	serviceImports = reg.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.ServiceImportsName,
		Help:      "Services answered, by the ServiceImport version their answers come from.",
	}, []string{metricname.Version})

	endpoints = reg.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.EndpointsName,
		Help:      "Ready headless endpoint names answered, by source cluster (only clusters with some; past 256 clusters, the rest as _other).",
	}, []string{metricname.Cluster})

	clusterLastChange = reg.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.ClusterLastChangeName,
		Help:      "When an EndpointSlice of each source cluster was last seen added, changed or deleted, in seconds since the epoch (only clusters with EndpointSlices; the first list counts).",
	}, []string{metricname.Cluster})

	unreadVersions = reg.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.UnreadVersionsName,
		Help:      "1 while the API server serves this ServiceImport version and the configuration reads no version of its shape, else 0.",
	}, []string{metricname.Version})

	skipped = reg.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.SkippedObjectsName,
		Help:      "Counter of objects, or parts of objects, not used because they are unusable, by kind and reason.",
	}, []string{metricname.Kind, metricname.Reason})

	headlessAnswers = reg.NewCounterVec(prometheus.CounterOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.HeadlessAnswersName,
		Help:      "Counter of answers at headless services' names and port names, by scope: the local cluster's endpoints only (local) or every cluster's (clusterset).",
	}, []string{metricname.Scope})

	synced = reg.NewGauge(prometheus.GaugeOpts{
		Namespace: plugin.Namespace,
		Subsystem: metricname.Subsystem,
		Name:      metricname.SyncedName,
		Help:      "1 once the plugin has listed what it watches and answers from it, 0 before (it answers SERVFAIL until then).",
	})
)

// The headless answer counters: the local cluster's endpoints alone, or
// every cluster's. Both series exist from start-up.
var (
	localAnswers      = headlessAnswers.WithLabelValues(metricname.ScopeLocal)
	clustersetAnswers = headlessAnswers.WithLabelValues(metricname.ScopeClusterset)
)

// countScope counts an answer with records of type qtype at a headless
// service's name or one of its port names, by whose endpoints it holds.
func countScope(z *cache.ZoneAnswers, qtype uint16) {
	if z.Closest.Of(qtype) {
		localAnswers.Inc()
	} else {
		clustersetAnswers.Inc()
	}
}

// resultLabel is the result label of each result.
var resultLabel = [...]string{success: metricname.Success, nameError: metricname.NameError, noData: metricname.NoData, serverFailure: metricname.ServerFailure}

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

// recordStats publishes what the cache answers; the cache calls it only once
// synced, so it marks the plugin synced too.
func recordStats(s cache.Stats) {
	synced.Set(1)
	for v, n := range s.Imports {
		serviceImports.WithLabelValues(v).Set(float64(n))
	}
	clusterSeries.Lock()
	defer clusterSeries.Unlock()
	clusterSeries.endpoints = setByCluster(endpoints, clusterSeries.endpoints, s.EndpointsByCluster, func(n int) float64 { return float64(n) })
	clusterSeries.changed = setByCluster(clusterLastChange, clusterSeries.changed, s.ClusterChanged, func(t time.Time) float64 {
		return float64(t.UnixNano()) / 1e9
	})
}

// clusterSeries are the clusters each per-cluster gauge has a series of:
// those of the last Stats, whose counts the cache keeps only for clusters
// with some, so that a cluster gone is a series deleted.
var clusterSeries struct {
	sync.Mutex
	endpoints, changed map[string]bool
}

// setByCluster sets g's series of each cluster of now and deletes those of
// the clusters in had that now lacks; it returns the clusters set.
func setByCluster[V any](g *prometheus.GaugeVec, had map[string]bool, now map[string]V, value func(V) float64) map[string]bool {
	for c := range had {
		if _, ok := now[c]; !ok {
			g.DeleteLabelValues(c)
		}
	}
	set := make(map[string]bool, len(now))
	for c, v := range now {
		g.WithLabelValues(c).Set(value(v))
		set[c] = true
	}
	return set
}

func recordSkip(kind, reason string) { skipped.WithLabelValues(kind, reason).Inc() }

// The skipped counters exist from start-up, at zero, so that the dashboard
// and the alerts read 0 on a healthy cluster rather than no data.
func init() {
	for _, kr := range append(cache.SkipSeries(), cache.EmptySeries()...) {
		skipped.WithLabelValues(kr[0], kr[1])
	}
}

func recordUnread(version string, unread bool) {
	v := 0.0
	if unread {
		v = 1
	}
	unreadVersions.WithLabelValues(version).Set(v)
}
