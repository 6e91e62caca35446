package e2e

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// What the plugin watches and answers, with and without fallback v1alpha1,
// for each CRD a cluster holds today (the README's table "Which versions are
// read"), on control planes of their own.
func TestServedVersions(t *testing.T) {
	t.Run("mcs-api v0.5.2 CRD: one watch per shape", func(t *testing.T) {
		t.Parallel()
		r := migStart(t, "mcs-api CRD", "versions", migUpstreamCRD(t))
		r.Create(migImport("v1beta1", "versions", "web", "ClusterSetIP", "10.71.0.1"))
		r.runCoreDNS()
		withFallback := r.extraCoreDNS("fallback v1alpha1")
		name := "web.versions.svc.clusterset.local."
		r.Answers(name, "10.71.0.1")
		eventually(t, withFallback, name, "A", want{Answer: []string{a(name, "10.71.0.1")}})
		verWantMetric(t, r.DNS.MetricsURL, 1, "coredns_multicluster_serviceimports", "version", "v1beta1")
		verWantMetric(t, r.DNS.MetricsURL, 0, "coredns_multicluster_unread_versions", "version", "v1alpha1")
		// Both servers watch v1beta1, and neither watches v1alpha1, which
		// has the same schema: the API server's own count of watches.
		harness.Eventually(t, 20*time.Second, func() error {
			w, err := verWatches(r.Env)
			if err != nil {
				return err
			}
			if w["v1beta1"] != 2 || w["v1alpha1"] != 0 {
				return fmt.Errorf("ServiceImport watches by version %v, want v1beta1=2 and no v1alpha1", w)
			}
			return nil
		})
		r.CheckLog()
	})

	t.Run("v1alpha1-only CRD: unread without fallback", func(t *testing.T) {
		t.Parallel()
		r := migStart(t, "v1alpha1 CRD", "versions", migUpstreamV1alpha1Only(t))
		r.Create(migImport("v1alpha1", "versions", "web", "ClusterSetIP", "10.71.0.2"))
		r.runCoreDNS()
		withFallback := r.extraCoreDNS("fallback v1alpha1")
		name := "web.versions.svc.clusterset.local."
		eventually(t, withFallback, name, "A", want{Answer: []string{a(name, "10.71.0.2")}})
		verWantMetric(t, r.DNS.MetricsURL, 1, "coredns_multicluster_unread_versions", "version", "v1alpha1")
		expect(t, r.DNS, defaultTTL, name, "A", nxdomain())
		lines := verLogLines(r.DNS, "ServiceImport v1alpha1 is served, but this configuration does not read it")
		if len(lines) != 1 || !strings.Contains(lines[0], `"fallback v1alpha1"`) {
			t.Errorf("log lines %q, want one naming fallback v1alpha1", lines)
		}
		if got := verLogLines(withFallback, "does not read it"); len(got) != 0 {
			t.Errorf("with fallback v1alpha1: %q", got)
		}
	})

	t.Run("no ServiceImport CRD", func(t *testing.T) {
		t.Parallel()
		r := &migRig{Rig: harness.StartRig(t, "no CRD", "versions", harness.Options{CRDDirectoryPaths: []string{t.TempDir()}})}
		r.runCoreDNS()
		// Ready, answering, and saying what to install.
		expect(t, r.DNS, defaultTTL, "dns-version."+apex, "TXT", want{Answer: []string{`dns-version.clusterset.local. txt "1.0.0"`}})
		expect(t, r.DNS, defaultTTL, n("web.versions"), "A", nxdomain())
		harness.Eventually(t, 10*time.Second, func() error {
			if lines := verLogLines(r.DNS, "the API server serves no ServiceImport"); len(lines) != 1 || !strings.Contains(lines[0], "install the ServiceImport CRD") {
				return fmt.Errorf("log lines %q, want one saying what to install", lines)
			}
			return nil
		})
		// The CRD arrives: answered without a restart.
		opts := envtest.CRDInstallOptions{CRDs: []*apiextensionsv1.CustomResourceDefinition{migUpstreamCRD(t)}, MaxTime: time.Minute}
		if _, err := envtest.InstallCRDs(r.Env.Config, opts); err != nil {
			t.Fatal(err)
		}
		r.Create(migImport("v1beta1", "versions", "web", "ClusterSetIP", "10.71.0.3"))
		eventually(t, r.DNS, n("web.versions"), "A", want{Answer: []string{a(n("web.versions"), "10.71.0.3")}})
	})
}

// extraCoreDNS starts one more CoreDNS on the rig's control plane, with the
// given plugin options.
func (r *migRig) extraCoreDNS(options ...string) *harness.CoreDNS {
	r.T.Helper()
	id, err := r.Env.PluginIdentity(r.Ctx)
	if err != nil {
		r.T.Fatal(err)
	}
	return harness.RunCoreDNS(r.T, coredns, harness.CoreDNSOptions{Plugins: harness.MulticlusterBlock(id.Kubeconfig, options...)})
}

func verWantMetric(t *testing.T, url string, value float64, name string, labels ...string) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, func() error {
		v, err := harness.ScrapeValue(url, name, labels...)
		if err != nil {
			return err
		}
		if v != value {
			return fmt.Errorf("%s%v = %v, want %v", name, labels, v, value)
		}
		return nil
	})
}

// verWatches reads, from kube-apiserver's own metrics, how many watches of
// ServiceImports are open, by version.
func verWatches(e *harness.Env) (map[string]int, error) {
	ctx, cancel := harness.Context(10 * time.Second)
	defer cancel()
	body, err := e.Clientset.Discovery().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, err
	}
	m, err := harness.ParseMetrics(bytes.NewReader(body))
	if err != nil {
		return nil, err
	}
	out := map[string]int{}
	for _, s := range m["apiserver_longrunning_requests"].GetMetric() {
		if l := harness.Labels(s); l["resource"] == "serviceimports" && l["verb"] == "WATCH" {
			out[l["version"]] += int(harness.SeriesValue(s))
		}
	}
	return out, nil
}

// verLogLines returns the lines of c's output that contain s.
func verLogLines(c *harness.CoreDNS, s string) []string {
	var out []string
	for line := range strings.Lines(c.Output()) {
		if strings.Contains(line, s) {
			out = append(out, strings.TrimSpace(line))
		}
	}
	return out
}
