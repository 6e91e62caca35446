package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"

	// The plugins the edited Corefiles of the corpus use; a Corefile with
	// another directive fails TestRealCorefiles until its plugin is here.
	_ "github.com/coredns/coredns/plugin/bufsize"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/chaos"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/hosts"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/rewrite"

	_ "github.com/clustersetdns/multicluster"
)

// The outcomes of TestRealCorefiles.
const (
	edited    = "edited"
	converted = "edited, the kubernetes plugin's multicluster option moved to the plugin"
	unchanged = "unchanged: the plugin is there already"
)

// Substrings of the refusals that name the lasting way.
const (
	customWay    = `forward clusterset.local to it from a "clusterset.local:53 { ... }" block under a *.server key of coredns-custom (deploy/forwarding.md, "k3s and AKS: the coredns-custom ConfigMap")`
	gardenerWay  = `forward clusterset.local to it from a "clusterset.local:8053 { ... }" block under a *.server key of coredns-custom (deploy/forwarding.md, "k3s and AKS: the coredns-custom ConfigMap")`
	openshiftWay = `add to spec.servers of dns.operator/default an entry forwarding clusterset.local to its Service address (deploy/forwarding.md, "OpenShift: the DNS operator's servers")`
)

// realCorefiles is what the corefile subcommand does with each Corefile of
// the corpus (SOURCES.md there says where each comes from): an outcome
// above, or "refused: " and a part of the refusal.
var realCorefiles = map[string]string{
	"kubeadm":                     edited,
	"kind":                        edited,
	"kind-ipv6-ci":                edited,
	"minikube":                    edited,
	"helm":                        edited,
	"rke1":                        edited,
	"rke2":                        edited,
	"k0s":                         edited,
	"microk8s":                    edited,
	"eks":                         edited,
	"talos":                       edited,
	"kubespray":                   edited,
	"kops":                        edited,
	"kops-dns-none":               edited,
	"cilium-autoconfig-kubeadm":   converted,
	"cilium-autoconfig-talos":     converted,
	"cilium-autoconfig-eks":       converted,
	"mcs-api-e2e":                 converted,
	"cilium-docs-external-plugin": unchanged,
	"aks":                         "refused: " + customWay,
	"k3s":                         "refused: " + customWay,
	"ovh":                         "refused: " + customWay,
	"gardener":                    "refused: " + gardenerWay,
	"openshift":                   "refused: " + openshiftWay,
}

// corpus is the folder of the distributions' Corefiles, next to the
// repository: ../shared/corefiles from its root.
func corpus(t *testing.T) string {
	dir, err := filepath.Abs("../../../shared/corefiles")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); err != nil {
		if os.Getenv("MULTICLUSTER_NO_SKIP") != "" {
			t.Fatalf("no corpus at %s (MULTICLUSTER_NO_SKIP is set): %v", dir, err)
		}
		t.Skipf("no corpus at %s", dir)
	}
	return dir
}

// TestRealCorefiles runs the corefile subcommand over every Corefile of the
// corpus, as distributions ship them: each is edited, left as it is or
// refused as realCorefiles says; an edited one loads in CoreDNS (loads) and
// a second run changes nothing.
func TestRealCorefiles(t *testing.T) {
	dir := corpus(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.Corefile"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no Corefile in %s: %v", dir, err)
	}
	var names []string
	for _, f := range files {
		names = append(names, strings.TrimSuffix(filepath.Base(f), ".Corefile"))
	}
	for name := range realCorefiles {
		if !slices.Contains(names, name) {
			t.Errorf("%s.Corefile is in the table but not in %s", name, dir)
		}
	}
	for i, f := range files {
		name := names[i]
		t.Run(name, func(t *testing.T) {
			want, ok := realCorefiles[name]
			if !ok {
				t.Fatalf("%s is not in realCorefiles: classify it (edited, converted, unchanged or refused)", f)
			}
			in, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			code, out, stderr := corefileRun(string(in))
			t.Logf("%s: exit %d\n%s", want, code, stderr)
			if refusal, ok := strings.CutPrefix(want, "refused: "); ok {
				if code != 2 || out != "" {
					t.Fatalf("exit %d, want 2 (a refusal); stdout:\n%s", code, out)
				}
				if !strings.Contains(stderr, refusal) {
					t.Errorf("the refusal does not name the lasting way %q:\n%s", refusal, stderr)
				}
				return
			}
			if code != 0 {
				t.Fatalf("exit %d, want 0:\n%s", code, stderr)
			}
			moved := strings.Contains(stderr, "moved clusterset.local from the kubernetes plugin's multicluster option")
			switch {
			case want == unchanged && out != string(in):
				t.Errorf("changed:\n%s", lineDiff(string(in), out))
			case want != unchanged && out == string(in):
				t.Errorf("not edited")
			case (want == converted) != moved:
				t.Errorf("want %s; stderr:\n%s", want, stderr)
			}
			code, again, stderr := corefileRun(out)
			if code != 0 || again != out || !strings.Contains(stderr, "nothing to change") {
				t.Errorf("a second run: exit %d, %s\n%s", code, stderr, lineDiff(out, again))
			}
			if err := loads(t, out); err != nil {
				t.Errorf("CoreDNS does not load the edited Corefile: %v\n%s", err, out)
			}
		})
	}
}

func corefileRun(in string) (int, string, string) {
	var out, stderr bytes.Buffer
	code := run([]string{"corefile"}, strings.NewReader(in), &out, &stderr)
	return code, out.String(), stderr.String()
}

// loads loads the Corefile as CoreDNS v1.15.0 with the multicluster plugin
// does before it starts its servers (caddy.ValidateAndExecuteDirectives,
// which coremain runs through caddy.Start): CoreDNS's Corefile parser with
// its directives and ours (cmd/coredns puts multicluster just before
// kubernetes), its checks of the server block keys, and the setup of every
// directive, our plugin's option parsing with it. Only the servers do not
// start. The kubernetes plugin's setup builds its API client, from the
// in-cluster config unless told an endpoint: each kubernetes directive is
// given "endpoint https://127.0.0.1:1", which nothing connects to.
func loads(t *testing.T, corefile string) error {
	old := dnsserver.Directives
	t.Cleanup(func() { dnsserver.Directives = old })
	i := slices.Index(old, "kubernetes")
	dnsserver.Directives = slices.Insert(slices.Clone(old), i, "multicluster")

	lines := strings.Split(corefile, "\n")
	toks := lexAll(corefile)
	for i, t := range toks {
		if t.text != "kubernetes" || (i > 0 && toks[i-1].end == t.line) {
			continue
		}
		j := i + 1
		for j < len(toks) && toks[j].line == t.line {
			j++
		}
		l, last := lines[t.line-1], toks[j-1]
		if code, _ := split(l); last.text == "{" {
			lines[t.line-1] = l + "\nendpoint https://127.0.0.1:1"
		} else {
			lines[t.line-1] = strings.TrimRight(code, "\r") + " {\nendpoint https://127.0.0.1:1\n}"
		}
	}
	in := caddy.CaddyfileInput{Contents: []byte(strings.Join(lines, "\n")), Filepath: "Corefile", ServerTypeName: "dns"}
	return caddy.ValidateAndExecuteDirectives(in, nil, true)
}

// TestLoads: the loading check of TestRealCorefiles fails on what CoreDNS
// would not load (an unknown directive, a bad option of ours or of the
// kubernetes plugin); it needs no corpus.
func TestLoads(t *testing.T) {
	good := ".:53 {\n    multicluster clusterset.local\n    kubernetes cluster.local {\n        pods insecure\n    }\n    forward . /etc/resolv.conf\n}\n"
	if err := loads(t, good); err != nil {
		t.Fatalf("a good Corefile: %v", err)
	}
	for _, bad := range []string{
		strings.Replace(good, "forward", "frobnicate", 1),                                  // no such directive
		strings.Replace(good, "clusterset.local\n", "clusterset.local {\n bogus\n }\n", 1), // not an option of ours
		strings.Replace(good, "pods insecure", "pods sometimes", 1),                        // the kubernetes plugin's parsing
	} {
		if err := loads(t, bad); err == nil {
			t.Errorf("loads:\n%s", bad)
		}
	}
}
