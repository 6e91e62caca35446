package harness

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// Metrics is one scrape of a Prometheus text endpoint: its metric families
// by name, as expfmt parses them.
type Metrics map[string]*dto.MetricFamily

// ErrNoSeries is what Value says of a series a scrape does not hold.
var ErrNoSeries = errors.New("no such series")

// Scrape reads url's metrics, in the Prometheus text format.
func Scrape(url string) (Metrics, error) {
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(url)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("%s: %s", url, resp.Status)
	}
	m, err := ParseMetrics(resp.Body)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", url, err)
	}
	return m, nil
}

// ParseMetrics parses metrics in the Prometheus text format.
func ParseMetrics(r io.Reader) (Metrics, error) {
	parser := expfmt.NewTextParser(model.UTF8Validation)
	return parser.TextToMetricFamilies(r)
}

// Value is the value of the gauge, counter or untyped series name whose
// labels are exactly labels, given as name, value pairs; ErrNoSeries when
// the scrape holds none.
func (m Metrics) Value(name string, labels ...string) (float64, error) {
	want := map[string]string{}
	for i := 0; i+1 < len(labels); i += 2 {
		want[labels[i]] = labels[i+1]
	}
	for _, s := range m[name].GetMetric() {
		if maps.Equal(Labels(s), want) {
			return SeriesValue(s), nil
		}
	}
	return 0, fmt.Errorf("%s%v: %w", name, labels, ErrNoSeries)
}

// Labels are a series' labels.
func Labels(s *dto.Metric) map[string]string {
	out := map[string]string{}
	for _, l := range s.GetLabel() {
		out[l.GetName()] = l.GetValue()
	}
	return out
}

// SeriesValue is a gauge's, counter's or untyped series' value: the one of
// the three a series has, the others reading 0.
func SeriesValue(s *dto.Metric) float64 {
	return s.GetGauge().GetValue() + s.GetCounter().GetValue() + s.GetUntyped().GetValue()
}

// ScrapeValue scrapes url and returns one series' value (Metrics.Value).
func ScrapeValue(url, name string, labels ...string) (float64, error) {
	m, err := Scrape(url)
	if err != nil {
		return 0, err
	}
	return m.Value(name, labels...)
}

// ScrapeGauge is ScrapeValue for a series of a labelled gauge, which reads 0
// when it was never set: a vector exports only the series set.
func ScrapeGauge(url, name string, labels ...string) (float64, error) {
	v, err := ScrapeValue(url, name, labels...)
	if errors.Is(err, ErrNoSeries) {
		return 0, nil
	}
	return v, err
}
