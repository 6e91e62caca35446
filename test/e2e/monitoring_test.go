package e2e

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/prometheus/model/labels"
	"github.com/prometheus/prometheus/promql/parser"
	"sigs.k8s.io/yaml"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestMonitoringMetricsExist: every metric and label that the dashboard and
// the alerting rules of deploy/monitoring query exists on a running CoreDNS's
// /metrics, and so does every label value they match exactly. A renamed
// metric or label breaks this test, not the dashboard.
func TestMonitoringMetricsExist(t *testing.T) {
	queries := monitoringQueries(t)

	// A namespace with an unusable ServiceImport, so that
	// skipped_objects_total counts one.
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: monitoring\n")
	apply(t, `apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: broken, namespace: monitoring}
spec:
  type: ClusterSetIP
  ips: ["not-an-ip"]
  ports: [{name: http, protocol: TCP, port: 80}]
`)
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Metrics: true, Plugins: harness.MulticlusterBlock(plugin.Kubeconfig)})
	// One answer of each result but SERVFAIL, which a synced server does
	// not give; its counter exists beside the others all the same.
	expect(t, c, defaultTTL, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	expect(t, c, defaultTTL, n("nosuch.demo"), "A", nxdomain())
	expect(t, c, defaultTTL, n("web.demo"), "TXT", nodata())

	url := c.MetricsURL
	var exported map[string]*series
	harness.Eventually(t, 10*time.Second, func() error {
		var err error
		if exported, err = scrapeAll(url); err != nil {
			return err
		}
		if exported["coredns_multicluster_skipped_objects_total"] == nil {
			return fmt.Errorf("no skipped object counted yet")
		}
		return nil
	})

	checked := 0
	for _, q := range queries {
		for _, err := range checkQuery(q.expr, exported) {
			t.Errorf("%s: %v\n\tquery: %s", q.where, err, q.expr)
		}
		checked++
	}
	t.Logf("%d queries checked against %d metric families", checked, len(exported))
}

// series is what a scrape shows of one metric: the labels its series carry,
// and the values each label takes.
type series struct{ values map[string][]string }

func scrapeAll(url string) (map[string]*series, error) {
	families, err := harness.Scrape(url)
	if err != nil {
		return nil, err
	}
	out := map[string]*series{}
	add := func(name string, pairs map[string]string) {
		s := out[name]
		if s == nil {
			s = &series{values: map[string][]string{}}
			out[name] = s
		}
		for k, v := range pairs {
			if !slices.Contains(s.values[k], v) {
				s.values[k] = append(s.values[k], v)
			}
		}
	}
	for name, f := range families {
		for _, m := range f.GetMetric() {
			pairs := map[string]string{}
			for _, l := range m.GetLabel() {
				pairs[l.GetName()] = l.GetValue()
			}
			add(name, pairs)
			if h := m.GetHistogram(); h != nil {
				add(name+"_count", pairs)
				add(name+"_sum", pairs)
				for _, b := range h.GetBucket() {
					add(name+"_bucket", map[string]string{"le": fmt.Sprint(b.GetUpperBound())})
				}
				add(name+"_bucket", pairs)
			}
		}
	}
	return out, nil
}

// scrapeLabels are the labels Prometheus adds to every series it scrapes:
// no target exports them.
var scrapeLabels = []string{"job", "instance"}

// checkQuery parses a PromQL query and checks each metric it selects, the
// labels it matches on and groups by, and the values it matches exactly,
// against what a scrape exported.
func checkQuery(expr string, exported map[string]*series) []error {
	e, err := parser.NewParser(parser.Options{}).ParseExpr(expr)
	if err != nil {
		return []error{fmt.Errorf("does not parse: %v", err)}
	}
	var errs []error
	// Each selector's metric, its matchers' labels, and its exact values.
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		vs, ok := node.(*parser.VectorSelector)
		if !ok {
			return nil
		}
		s := exported[vs.Name]
		if s == nil {
			errs = append(errs, fmt.Errorf("metric %s is not exported", vs.Name))
			return nil
		}
		for _, m := range vs.LabelMatchers {
			if m.Name == labels.MetricName || slices.Contains(scrapeLabels, m.Name) {
				continue
			}
			have, ok := s.values[m.Name]
			if !ok {
				errs = append(errs, fmt.Errorf("metric %s has no label %q", vs.Name, m.Name))
				continue
			}
			for _, v := range exactValues(m) {
				if !slices.Contains(have, v) {
					errs = append(errs, fmt.Errorf("%s{%s} takes none of the values %q: it takes %q", vs.Name, m.Name, v, have))
				}
			}
		}
		return nil
	})
	// Each label an aggregation keeps must be on a metric it aggregates.
	parser.Inspect(e, func(node parser.Node, _ []parser.Node) error {
		agg, ok := node.(*parser.AggregateExpr)
		if !ok || agg.Without {
			return nil
		}
		var inside []*series
		parser.Inspect(agg.Expr, func(n parser.Node, _ []parser.Node) error {
			if vs, ok := n.(*parser.VectorSelector); ok && exported[vs.Name] != nil {
				inside = append(inside, exported[vs.Name])
			}
			return nil
		})
		for _, l := range agg.Grouping {
			if slices.Contains(scrapeLabels, l) {
				continue
			}
			if !slices.ContainsFunc(inside, func(s *series) bool { _, ok := s.values[l]; return ok }) {
				errs = append(errs, fmt.Errorf("by (%s): no metric aggregated there has the label", l))
			}
		}
		return nil
	})
	return errs
}

// exactValues are the values an equality matcher, or a regexp matcher that
// is only alternatives of plain words ("v1alpha1|v1beta1"), accepts; other
// matchers give none.
func exactValues(m *labels.Matcher) []string {
	switch m.Type {
	case labels.MatchEqual:
		return []string{m.Value}
	case labels.MatchRegexp:
		if regexp.MustCompile(`^[A-Za-z0-9_]+(\|[A-Za-z0-9_]+)*$`).MatchString(m.Value) {
			return strings.Split(m.Value, "|")
		}
	}
	return nil
}

type monitoringQuery struct{ where, expr string }

// grafanaVars stand in for the dashboard's variables: an interval for the
// rate window, and a regexp that matches anything for the others.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", `"$job"`, `".*"`, `"$instance"`, `".*"`, `"$zone"`, `".*"`)

// monitoringQueries reads every query of the dashboard (its panels' and its
// variables') and of the alerting rules (the rules file and the
// PrometheusRule, which must hold the same groups).
func monitoringQueries(t *testing.T) []monitoringQuery {
	t.Helper()
	dir := filepath.Join("deploy", "monitoring") // readRepoFile reads below the repository
	var out []monitoringQuery

	var board map[string]any
	if err := json.Unmarshal([]byte(readRepoFile(t, filepath.Join(dir, "dashboard.json"))), &board); err != nil {
		t.Fatal(err)
	}
	var walk func(path string, v any)
	walk = func(path string, v any) {
		switch v := v.(type) {
		case map[string]any:
			title, _ := v["title"].(string)
			if title == "" {
				title, _ = v["name"].(string)
			}
			for k, x := range v {
				if s, ok := x.(string); ok && k == "expr" {
					out = append(out, monitoringQuery{"dashboard " + path, grafanaVars.Replace(s)})
				}
				walk(path+"/"+title, x)
			}
		case []any:
			for _, x := range v {
				walk(path, x)
			}
		}
	}
	walk("", board)
	// The variables' label_values(selector, label) become "count by
	// (label) (selector)", which asks the same of the scrape.
	labelValues := regexp.MustCompile(`^label_values\((.+), *([a-z_]+)\)$`)
	templating, _ := board["templating"].(map[string]any)
	list, _ := templating["list"].([]any)
	for _, v := range list {
		v, _ := v.(map[string]any)
		q, _ := v["query"].(string)
		if m := labelValues.FindStringSubmatch(q); m != nil {
			out = append(out, monitoringQuery{"dashboard variable " + fmt.Sprint(v["name"]), grafanaVars.Replace(fmt.Sprintf("count by (%s) (%s)", m[2], m[1]))})
		} else if v["type"] == "query" {
			t.Errorf("dashboard variable %v: query %q is not label_values(selector, label)", v["name"], q)
		}
	}
	if len(out) < 10 {
		t.Fatalf("the dashboard has %d queries; did its JSON shape change?", len(out))
	}

	type groups struct {
		Groups []struct {
			Name  string `json:"name"`
			Rules []struct {
				Alert string `json:"alert"`
				Expr  string `json:"expr"`
			} `json:"rules"`
		} `json:"groups"`
	}
	var rules groups
	if err := yaml.Unmarshal([]byte(readRepoFile(t, filepath.Join(dir, "prometheus", "coredns-multicluster.rules.yaml"))), &rules); err != nil {
		t.Fatal(err)
	}
	var pr struct {
		Kind string `json:"kind"`
		Spec groups `json:"spec"`
	}
	if err := yaml.Unmarshal([]byte(readRepoFile(t, filepath.Join(dir, "prometheusrule.yaml"))), &pr); err != nil {
		t.Fatal(err)
	}
	if a, b := fmt.Sprint(rules), fmt.Sprint(pr.Spec); pr.Kind != "PrometheusRule" || a != b {
		t.Errorf("prometheusrule.yaml (kind %s) does not hold the rules file's groups", pr.Kind)
	}
	n := 0
	for _, g := range rules.Groups {
		for _, r := range g.Rules {
			out = append(out, monitoringQuery{"alert " + r.Alert, r.Expr})
			n++
		}
	}
	if n < 5 {
		t.Fatalf("the rules file has %d alerts", n)
	}
	return out
}
