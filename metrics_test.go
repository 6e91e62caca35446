package multicluster

import (
	"regexp"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/clustersetdns/multicluster/cache"
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

// Every reason an object can be skipped for has its series at zero from
// start-up.
func TestSkippedSeriesFromStart(t *testing.T) {
	for kind, reasons := range cache.SkipReasons {
		for _, r := range reasons {
			if n := testutil.CollectAndCount(skipped); n < len(reasons) {
				t.Fatalf("%d skipped series", n)
			}
			if v := testutil.ToFloat64(skipped.WithLabelValues(kind, r)); v < 0 {
				t.Errorf("%s %s: %v", kind, r, v)
			}
		}
	}
	if n, want := testutil.CollectAndCount(skipped), len(cache.SkipReasons["ServiceImport"])+len(cache.SkipReasons["EndpointSlice"]); n < want {
		t.Errorf("%d skipped series at start-up, want at least %d", n, want)
	}
}
