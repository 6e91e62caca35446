package multicluster

import (
	"maps"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	dto "github.com/prometheus/client_model/go"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/metricname"
)

// TestMetricNames: every metric the plugin registers is under CoreDNS's
// namespace and the plugin's subsystem, as CoreDNS's plugins name theirs.
func TestMetricNames(t *testing.T) {
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range registered {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		m := fqName.FindStringSubmatch((<-ch).String())
		if m == nil {
			t.Fatalf("no name in %v", c)
		}
		if want := plugin.Namespace + "_" + pluginName + "_"; !strings.HasPrefix(m[1], want) {
			t.Errorf("metric %s is not under %s", m[1], want)
		}
		if !slices.Contains(metricname.Full, m[1]) {
			t.Errorf("metric %s is not among metricname's full names %v, which the dashboard and alerts query", m[1], metricname.Full)
		}
	}
}

// TestMetricsLint: every collector the plugin registers (registered, not a
// list kept here) passes Prometheus's own linter: names, units, help. A
// vector's family is linted through a sample of its own, with the vector's
// Desc and placeholder label values, so that there is a sample to lint and
// the plugin's vectors, which the default registry serves, get no series.
func TestMetricsLint(t *testing.T) {
	variable := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	if len(registered) < 7 {
		t.Fatalf("only %d collectors registered", len(registered))
	}
	for _, c := range registered {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		d := <-ch
		desc := d.String()
		before := testutil.CollectAndCount(c)
		lint := []prometheus.Collector{c}
		if m := variable.FindStringSubmatch(desc); m != nil && m[1] != "" {
			values := strings.Split(m[1], ",")
			for i := range values {
				values[i] = "x"
			}
			switch c.(type) {
			case *prometheus.CounterVec:
				lint = append(lint, sample{d, prometheus.CounterValue, values})
			case *prometheus.GaugeVec:
				lint = append(lint, sample{d, prometheus.GaugeValue, values})
			default:
				t.Errorf("%s: a vector of a type the test does not know", desc)
			}
		}
		for _, l := range lint {
			problems, err := testutil.CollectAndLint(l)
			if err != nil {
				t.Fatalf("%s: %v", desc, err)
			}
			for _, p := range problems {
				t.Errorf("%s: %s", p.Metric, p.Text)
			}
		}
		if after := testutil.CollectAndCount(c); after != before {
			t.Errorf("%s: %d series after linting, %d before", desc, after, before)
		}
	}
}

// sample is one series of a vector's family, apart from the vector: its
// Desc, type and label values, at zero.
type sample struct {
	desc   *prometheus.Desc
	typ    prometheus.ValueType
	values []string
}

func (s sample) Describe(ch chan<- *prometheus.Desc) { ch <- s.desc }

func (s sample) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(s.desc, s.typ, 0, s.values...)
}

// skippedAtStart is the skipped counter's series as the package's init
// functions leave them, before any test counts a skip: metrics.go's init has
// run by then, since the go tool gives the compiler a package's files before
// its test files, and init functions run in that order.
var skippedAtStart map[[2]string]float64

func init() {
	ch := make(chan prometheus.Metric)
	go func() {
		skipped.Collect(ch)
		close(ch)
	}()
	skippedAtStart = map[[2]string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			panic(err)
		}
		labels := map[string]string{}
		for _, l := range pb.GetLabel() {
			labels[l.GetName()] = l.GetValue()
		}
		skippedAtStart[[2]string{labels[metricname.Kind], labels[metricname.Reason]}] = pb.GetCounter().GetValue()
	}
}

// Every series of the skipped counter the cache can count, and no other,
// exists from start-up, at zero, under the kinds the cache really reports: a
// problem of a ServiceImport read through v1beta1 is "ServiceImport
// v1beta1".
func TestSkippedSeriesFromStart(t *testing.T) {
	series := append(cache.SkipSeries(), cache.EmptySeries()...)
	want := map[[2]string]bool{}
	for _, kr := range series {
		if want[kr] {
			t.Errorf("cache.SkipSeries has %v twice", kr)
		}
		want[kr] = true
	}
	for kr, v := range skippedAtStart {
		switch {
		case !want[kr]:
			t.Errorf("series %v at start-up, which cache.SkipSeries does not list", kr)
		case v != 0:
			t.Errorf("series %v is %v at start-up, want 0", kr, v)
		}
	}
	for kr := range want {
		if _, ok := skippedAtStart[kr]; !ok {
			t.Errorf("no series %v at start-up", kr)
		}
	}
	for _, want := range [][2]string{{cache.ImportKind(cache.V1beta1), cache.ReasonBadIP}, {cache.KindServiceImport, cache.ReasonDataLost},
		{cache.KindEndpointSlice, cache.ReasonNoCluster}, {"ServiceImport v1alpha2", cache.ReasonDecode},
		{"ServiceImport v1beta1", cache.ReasonNoEndpointSlices}, {"ServiceImport v1beta1", cache.ReasonEndpointSlicesAbsent},
		{"ServiceImport v1alpha2", cache.ReasonNoEndpointSlices}} {
		if !slices.Contains(series, want) {
			t.Errorf("no series %v", want)
		}
	}
}

// gaugeSeries are the series of a gauge vector: its label value of label →
// value.
func gaugeSeries(t *testing.T, g *prometheus.GaugeVec, label string) map[string]float64 {
	t.Helper()
	ch := make(chan prometheus.Metric)
	go func() {
		g.Collect(ch)
		close(ch)
	}()
	out := map[string]float64{}
	for m := range ch {
		var pb dto.Metric
		if err := m.Write(&pb); err != nil {
			t.Fatal(err)
		}
		for _, l := range pb.GetLabel() {
			if l.GetName() == label {
				out[l.GetValue()] = pb.GetGauge().GetValue()
			}
		}
	}
	return out
}

// TestEndpointsByCluster: the endpoints gauge has one series per source
// cluster of the last Stats, and so has the last-change gauge, at the time
// in seconds; a cluster gone from the Stats is a series deleted.
func TestEndpointsByCluster(t *testing.T) {
	t.Cleanup(func() { recordStats(cache.Stats{}) })
	at := time.Unix(1_700_000_000, 500_000_000)
	recordStats(cache.Stats{Endpoints: 5, EndpointsByCluster: map[string]int{"west": 3, "east.prod": 2},
		ClusterChanged: map[string]time.Time{"west": at, "east.prod": at.Add(time.Second), "quiet": at.Add(-time.Hour)}})
	if got, want := gaugeSeries(t, endpoints, metricname.Cluster), map[string]float64{"west": 3, "east.prod": 2}; !maps.Equal(got, want) {
		t.Errorf("%s: %v, want %v", metricname.Endpoints, got, want)
	}
	if got, want := gaugeSeries(t, clusterLastChange, metricname.Cluster),
		map[string]float64{"west": 1_700_000_000.5, "east.prod": 1_700_000_001.5, "quiet": 1_699_996_400.5}; !maps.Equal(got, want) {
		t.Errorf("%s: %v, want %v", metricname.ClusterLastChange, got, want)
	}
	recordStats(cache.Stats{Endpoints: 1, EndpointsByCluster: map[string]int{"west": 1},
		ClusterChanged: map[string]time.Time{"west": at}})
	if got, want := gaugeSeries(t, endpoints, metricname.Cluster), map[string]float64{"west": 1}; !maps.Equal(got, want) {
		t.Errorf("%s after east.prod left: %v, want %v", metricname.Endpoints, got, want)
	}
	if got := gaugeSeries(t, clusterLastChange, metricname.Cluster); len(got) != 1 {
		t.Errorf("%s after east.prod and quiet left: %v", metricname.ClusterLastChange, got)
	}
	if cache.OtherClusters != metricname.OtherClusters {
		t.Errorf("cache.OtherClusters %q, metricname.OtherClusters %q", cache.OtherClusters, metricname.OtherClusters)
	}
}
