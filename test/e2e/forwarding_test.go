package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/miekg/dns"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// snippetIP is the standalone Service's ClusterIP in deploy/forwarding.md.
const snippetIP = "10.96.0.53"

// TestForwardingSnippets runs every snippet of deploy/forwarding.md as
// written, the Service's address swapped for our CoreDNS's: stock CoreDNS
// v1.15.0 loads the Corefile snippets (a server block, the coredns-custom
// import of k3s and AKS, NodeLocal DNSCache's block, the block OpenShift's
// DNS operator renders from its servers entry), dnsmasq takes kube-dns's
// stubDomains as its nanny passes them, and the contract's names answer
// through each as the contract says.
func TestForwardingSnippets(t *testing.T) {
	stock := os.Getenv("E2E_STOCK_COREDNS")
	if stock == "" {
		missing(t, "E2E_STOCK_COREDNS is not set: hack/stock.sh builds stock CoreDNS v1.15.0 and hack/test.sh passes it")
	}
	t.Parallel()
	snippets := readSnippets(t, filepath.Join(env.Repo, "deploy", "forwarding.md"))
	ours := startPluginDNS(t)
	waitForTestdata(t, ours)
	upstream := ours.Addr() // 127.0.0.1:PORT

	corefileOf := func(snippet string) func(port int) string {
		return func(port int) string { return localCorefile(t, snippet, upstream, port) }
	}
	run := func(corefile func(port int) string) *harness.CoreDNS {
		return harness.RunCoreDNS(t, stock, harness.CoreDNSOptions{Corefile: corefile})
	}
	t.Run("coredns", func(t *testing.T) {
		answersThrough(t, run(corefileOf(snippets["coredns"])).Port)
	})
	t.Run("coredns-custom", func(t *testing.T) {
		var cm corev1.ConfigMap
		if err := yaml.UnmarshalStrict([]byte(snippets["coredns-custom"]), &cm); err != nil {
			t.Fatal(err)
		}
		dir := t.TempDir()
		fwd := run(func(port int) string {
			for key, server := range cm.Data {
				if !strings.HasSuffix(key, ".server") {
					t.Fatalf("coredns-custom key %q: k3s and AKS import only *.server (and *.override inside .:53)", key)
				}
				if err := os.WriteFile(filepath.Join(dir, key), []byte(localCorefile(t, server, upstream, port)), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			// The last line of k3s's Corefile (manifests/coredns.yaml).
			return "import " + filepath.Join(dir, "*.server") + "\n"
		})
		answersThrough(t, fwd.Port)
	})
	t.Run("node-local-dns", func(t *testing.T) {
		answersThrough(t, run(corefileOf(snippets["node-local-dns"])).Port)
	})
	t.Run("openshift-dns", func(t *testing.T) {
		answersThrough(t, run(corefileOf(openshiftBlock(t, snippets["openshift-dns"]))).Port)
	})
	t.Run("kube-dns", func(t *testing.T) {
		answersThrough(t, dnsmasqStub(t, snippets["kube-dns"], upstream), "+rec")
	})
}

// readSnippets returns the fenced blocks of a Markdown file whose info
// string names them ("~~~ corefile coredns"), by name.
func readSnippets(t *testing.T, path string) map[string]string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, m := range regexp.MustCompile("(?ms)^~~~ ([a-z]+) ([a-z-]+)\n(.*?)^~~~$").FindAllStringSubmatch(string(b), -1) {
		out[m[2]] = m[3]
	}
	for _, name := range []string{"coredns", "coredns-custom", "node-local-dns", "kube-dns", "openshift-dns"} {
		if out[name] == "" {
			t.Fatalf("%s has no snippet %q", path, name)
		}
	}
	return out
}

// localCorefile is a snippet made to run here: the Service's address is
// upstream, port 53 (or 5353) is port, every listener on 127.0.0.1.
func localCorefile(t *testing.T, snippet, upstream string, port int) string {
	t.Helper()
	s := strings.ReplaceAll(snippet, snippetIP, upstream)
	bind := "\n    bind 127.0.0.1"
	if strings.Contains(s, "\n    bind ") {
		s = regexp.MustCompile(`(?m)^    bind .*$`).ReplaceAllString(s, "    bind 127.0.0.1")
		bind = ""
	}
	s = regexp.MustCompile(`(?m)^(\S+):(53|5353) \{$`).ReplaceAllString(s, "${1}:"+strconv.Itoa(port)+" {"+bind)
	if m := regexp.MustCompile(`prometheus (\S*):(\d+)`).FindString(s); m != "" {
		p, err := harness.FreePort()
		if err != nil {
			t.Fatal(err)
		}
		s = strings.ReplaceAll(s, m, fmt.Sprintf("prometheus 127.0.0.1:%d", p))
	}
	return s
}

// openshiftBlock is the server block the cluster DNS operator renders from
// the DNS resource's one servers entry (its testdata, e.g. 1ns_no_policy):
// its listener port 5353, forward with the default policy random, its error
// log, bufsize and cache.
func openshiftBlock(t *testing.T, snippet string) string {
	t.Helper()
	var dns unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(snippet), &dns.Object); err != nil {
		t.Fatal(err)
	}
	servers, _, err := unstructured.NestedSlice(dns.Object, "spec", "servers")
	if err != nil || len(servers) != 1 {
		t.Fatalf("spec.servers: %v, %v; want one entry", servers, err)
	}
	server, _ := servers[0].(map[string]any)
	name, _, _ := unstructured.NestedString(server, "name")
	zones, _, _ := unstructured.NestedStringSlice(server, "zones")
	upstreams, _, _ := unstructured.NestedStringSlice(server, "forwardPlugin", "upstreams")
	if name == "" || len(zones) == 0 || len(upstreams) == 0 {
		t.Fatalf("servers entry %v: want a name, zones and forwardPlugin.upstreams", server)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %s\n", name)
	for _, z := range zones {
		fmt.Fprintf(&b, "%s:5353 {\n    prometheus 127.0.0.1:9153\n    forward . %s {\n        policy random\n    }\n"+
			"    errors\n    log . {\n        class error\n    }\n    bufsize 1232\n    cache 900 {\n        denial 9984 30\n    }\n}\n",
			z, strings.Join(upstreams, " "))
	}
	return b.String()
}

// dnsmasqStub runs dnsmasq as kube-dns's dnsmasq-nanny runs it with the
// ConfigMap's stubDomains (one --server=/domain/address per entry, its
// cache, no negative cache), forwarding to upstream, and returns its port.
func dnsmasqStub(t *testing.T, snippet, upstream string) int {
	t.Helper()
	bin, err := exec.LookPath("dnsmasq")
	if err != nil {
		missing(t, "dnsmasq is not installed (apt-get install dnsmasq-base)")
	}
	var cm corev1.ConfigMap
	if err := yaml.UnmarshalStrict([]byte(snippet), &cm); err != nil {
		t.Fatal(err)
	}
	var stubs map[string][]string
	if err := json.Unmarshal([]byte(cm.Data["stubDomains"]), &stubs); err != nil {
		t.Fatalf("stubDomains: %v", err)
	}
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"--keep-in-foreground", "--log-facility=-", "--no-resolv", "--no-hosts", "--no-negcache",
		"--cache-size=1000", "--bind-interfaces", "--listen-address=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--pid-file=", "--user=nobody"}
	for domain, servers := range stubs {
		for _, s := range servers {
			if s != snippetIP {
				t.Fatalf("stubDomains %s: %s, want %s", domain, s, snippetIP)
			}
			host, p, _ := strings.Cut(upstream, ":")
			args = append(args, fmt.Sprintf("--server=/%s/%s#%s", domain, host, p))
		}
	}
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, bin, args...)
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cancel()
		_ = cmd.Wait()
		if t.Failed() {
			t.Logf("dnsmasq %s:\n%s", strings.Join(args, " "), out.String())
		}
	})
	harness.Eventually(t, 10*time.Second, func() error {
		_, err := harness.Dig(port, "dns-version."+apex, "TXT", "+rec")
		return err
	})
	return port
}

// answersThrough asks a forwarder every contract question within the zone:
// each answers as the contract says (Want.CheckAnswer: rcode and answer
// records; the forwarder's cache changes TTLs and owner-name case).
func answersThrough(t *testing.T, forwarder int, extra ...string) {
	t.Helper()
	asked := 0
	for _, tc := range contract.Cases {
		if !dns.IsSubDomain(apex, tc.Name) {
			continue
		}
		asked++
		harness.Eventually(t, 10*time.Second, func() error {
			got, err := harness.Dig(forwarder, tc.Name, tc.Type, extra...)
			if err != nil {
				return err
			}
			if err := tc.Want.CheckAnswer(got.Msg()); err != nil {
				return fmt.Errorf("%s %s through the forwarder: %v\n%s", tc.Name, tc.Type, err, got)
			}
			return nil
		})
	}
	t.Logf("%d contract questions answered through the forwarder", asked)
}
