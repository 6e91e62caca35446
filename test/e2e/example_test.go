package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// Corefile.example, as shipped, runs with the built CoreDNS: one server block
// where kubernetes answers cluster.local and multicluster answers
// clusterset.local, each its own zone. Only what cannot be the same here
// changes: listen addresses become free 127.0.0.1 ports, and both plugins
// get a kubeconfig (outside a pod there is no in-cluster configuration).
func TestCorefileExample(t *testing.T) {
	data, err := os.ReadFile(filepath.Join(env.Repo, "Corefile.example"))
	if err != nil {
		t.Fatal(err)
	}
	admin := filepath.Join(t.TempDir(), "admin.kubeconfig")
	if err := env.WriteAdminKubeconfig(admin); err != nil {
		t.Fatal(err)
	}
	var ports [3]int
	for i := range ports {
		if ports[i], err = harness.FreePort(); err != nil {
			t.Fatal(err)
		}
	}
	conf := func(port int) string {
		s := string(data)
		s = strings.Replace(s, ".:53 {", fmt.Sprintf(".:%d {\n    bind 127.0.0.1", port), 1)
		s = strings.Replace(s, "    health\n", fmt.Sprintf("    health 127.0.0.1:%d\n", ports[0]), 1)
		s = strings.Replace(s, "    ready\n", fmt.Sprintf("    ready 127.0.0.1:%d\n", ports[1]), 1)
		s = strings.Replace(s, "prometheus :9153", fmt.Sprintf("prometheus 127.0.0.1:%d", ports[2]), 1)
		s = regexp.MustCompile(`(?m)^\s*# kubeconfig .*$`).ReplaceAllString(s, "        kubeconfig "+plugin.Kubeconfig)
		s = strings.Replace(s, "        pods insecure\n", "        pods insecure\n        kubeconfig "+admin+"\n", 1)
		return s
	}
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Corefile: conf})
	if !strings.Contains(c.Corefile, "kubeconfig "+plugin.Kubeconfig) || !strings.Contains(c.Corefile, "kubeconfig "+admin) {
		t.Fatalf("Corefile.example changed shape; the test's edits did not apply:\n%s", c.Corefile)
	}
	eventually(t, c, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	r := dig(t, c, "kubernetes.default.svc.cluster.local.", "A")
	if r.Rcode != "NOERROR" || len(r.Answer) != 1 || !r.AA() {
		t.Errorf("the kubernetes plugin did not answer its own zone:\n%s", r)
	}
	if r := dig(t, c, "web.demo.svc.cluster.local.", "A"); r.Rcode != "NXDOMAIN" {
		t.Errorf("an imported service leaked into cluster.local:\n%s", r)
	}
}
