package multicluster

import (
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

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
// vector without series yet gets one, with placeholder label values, so
// that there is a sample to lint.
func TestMetricsLint(t *testing.T) {
	variable := regexp.MustCompile(`variableLabels: \{([^}]*)\}`)
	if len(registered) < 7 {
		t.Fatalf("only %d collectors registered", len(registered))
	}
	for _, c := range registered {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		desc := (<-ch).String()
		if m := variable.FindStringSubmatch(desc); m != nil && m[1] != "" {
			values := strings.Split(m[1], ",")
			for i := range values {
				values[i] = "x"
			}
			switch v := c.(type) {
			case *prometheus.CounterVec:
				v.WithLabelValues(values...)
			case *prometheus.GaugeVec:
				v.WithLabelValues(values...)
			default:
				t.Errorf("%s: a vector of a type the test does not know", desc)
			}
		}
		problems, err := testutil.CollectAndLint(c)
		if err != nil {
			t.Fatalf("%s: %v", desc, err)
		}
		for _, p := range problems {
			t.Errorf("%s: %s", p.Metric, p.Text)
		}
	}
}

// Every series of the skipped counter the cache can count exists from
// start-up, at zero, under the kinds the cache really reports: a problem of
// a ServiceImport read through v1beta1 is "ServiceImport v1beta1".
func TestSkippedSeriesFromStart(t *testing.T) {
	series := cache.SkipSeries()
	if n := testutil.CollectAndCount(skipped); n < len(series) {
		t.Errorf("%d skipped series at start-up, want at least %d", n, len(series))
	}
	for _, want := range [][2]string{{cache.ImportKind(cache.V1beta1), cache.ReasonBadIP}, {cache.KindServiceImport, cache.ReasonDataLost},
		{cache.KindEndpointSlice, cache.ReasonNoCluster}, {"ServiceImport v1alpha2", cache.ReasonDecode}} {
		if !slices.Contains(series, want) {
			t.Errorf("no series %v", want)
		}
	}
}
