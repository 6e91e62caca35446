package multicluster

import (
	"regexp"
	"strings"
	"testing"

	"github.com/coredns/coredns/plugin"
	"github.com/prometheus/client_golang/prometheus"
)

// TestMetricNames: every metric of the plugin is under CoreDNS's namespace and
// the plugin's subsystem, as CoreDNS's plugins name theirs.
func TestMetricNames(t *testing.T) {
	fqName := regexp.MustCompile(`fqName: "([^"]+)"`)
	for _, c := range []prometheus.Collector{responses, serviceImports, endpoints, unreadVersions, skipped, synced} {
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
