// Command devenv runs the plugin against a real kube-apiserver on this
// machine: it starts etcd and kube-apiserver on 127.0.0.1, loads the objects
// of testdata/, builds the project's CoreDNS and serves clusterset.local on
// 127.0.0.1:1053 as the plugin's least-privilege identity, prints dig
// commands to try, and runs until interrupted (Ctrl-C or SIGTERM).
//
// From the repository: hack/run.sh, which first builds kube-apiserver, etcd
// and kubectl (hack/realenv/build.sh).
package main

import (
	"github.com/clustersetdns/multicluster/internal/contract"

	"context"
	"flag"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

func main() {
	port := flag.Int("port", 1053, "DNS port on 127.0.0.1 (UDP and TCP)")
	ttl := flag.Int("ttl", 0, "the plugin's ttl option; its default when 0")
	testdata := flag.String("testdata", "", "directory of YAML objects to load (default <repo>/testdata)")
	verbose := flag.Bool("v", false, "show etcd's and kube-apiserver's output")
	flag.Parse()
	if err := run(*port, *ttl, *testdata, *verbose); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

func run(port, ttl int, testdata string, verbose bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	repo, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if testdata == "" {
		testdata = filepath.Join(repo, "testdata")
	}
	objs, err := contract.ReadObjects(testdata)
	if err != nil {
		return err
	}
	if err := portFree(port); err != nil {
		return err
	}

	bin, err := harness.BuildCoreDNS(repo, os.Stdout)
	if err != nil {
		return err
	}

	fmt.Println("devenv: starting etcd and kube-apiserver on 127.0.0.1")
	opts := harness.Options{Repo: repo}
	if verbose {
		opts.Output = os.Stderr
	}
	start := time.Now()
	env, err := harness.Start(opts)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("devenv: stopping etcd and kube-apiserver")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devenv:", err)
		}
	}()
	fmt.Printf("devenv: kube-apiserver at %s, ready in %.1fs\n", env.APIServerURL(), time.Since(start).Seconds())

	apiCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	id, err := env.PluginIdentity(apiCtx)
	if err != nil {
		return err
	}
	if err := env.ApplyAll(apiCtx, objs); err != nil {
		return err
	}
	fmt.Printf("devenv: loaded %d objects from %s\n", len(objs), testdata)
	admin := filepath.Join(env.TempDir(), "admin.kubeconfig")
	if err := env.WriteAdminKubeconfig(admin); err != nil {
		return err
	}

	var options []string
	if ttl > 0 {
		options = append(options, fmt.Sprintf("ttl %d", ttl))
	}
	dns, err := harness.StartCoreDNS(bin, harness.CoreDNSOptions{
		Port:    port,
		Plugins: harness.MulticlusterBlock(id.Kubeconfig, options...),
		Output:  prefixWriter{os.Stdout, "coredns: "},
	})
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("devenv: stopping CoreDNS")
		if err := dns.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devenv:", err)
		}
	}()

	fmt.Printf(`
devenv: CoreDNS serves clusterset.local on 127.0.0.1:%[1]d as user %[2]s
(kubeconfig %[3]s). Corefile:

%[4]s
Try:
%[5]s
Change objects as the admin:
  %[6]s --kubeconfig %[7]s get serviceimports,endpointslices -A
  %[6]s --kubeconfig %[7]s apply -f FILE.yaml

Ctrl-C stops everything.
`, port, id.Name, id.Kubeconfig, indent(dns.Corefile), digCommands(port, objs), env.KubectlPath(), admin)

	<-ctx.Done()
	fmt.Println()
	return nil
}

// portFree fails early, before the long part, when the port is taken.
func portFree(port int) error {
	addr := net.JoinHostPort("127.0.0.1", fmt.Sprint(port))
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (TCP): %w; choose another with -port", addr, err)
	}
	l.Close()
	u, err := net.ListenPacket("udp", addr)
	if err != nil {
		return fmt.Errorf("%s is taken (UDP): %w; choose another with -port", addr, err)
	}
	return u.Close()
}

// digCommands lists one dig command for each kind of name the objects give.
func digCommands(port int, objs []*unstructured.Unstructured) string {
	const zone = "clusterset.local"
	var qs [][2]string
	add := func(name, qtype, why string) { qs = append(qs, [2]string{name + " " + qtype, why}) }

	add(zone, "SOA", "the apex")
	add(zone, "NS", "the apex")
	add("dns-version."+zone, "TXT", "schema version")

	imports := map[string]*unstructured.Unstructured{}
	var slicesOf = map[string][]*unstructured.Unstructured{}
	nsSeen := false
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceImport":
			imports[o.GetNamespace()+"/"+o.GetName()] = o
		case "EndpointSlice":
			svc, ok := o.GetLabels()[mcsv1beta1.LabelServiceName]
			if !ok {
				continue // plain EndpointSlices never show
			}
			slicesOf[o.GetNamespace()+"/"+svc] = append(slicesOf[o.GetNamespace()+"/"+svc], o)
		}
	}
	keys := make([]string, 0, len(imports))
	for k := range imports {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	kinds := map[string]bool{}
	once := func(kind string) bool {
		if kinds[kind] {
			return false
		}
		kinds[kind] = true
		return true
	}
	for _, k := range keys {
		si := imports[k]
		svc := fmt.Sprintf("%s.%s.svc.%s", si.GetName(), si.GetNamespace(), zone)
		if !nsSeen {
			nsSeen = true
			add(si.GetNamespace()+".svc."+zone, "A", "a namespace: NODATA")
		}
		typ, _, _ := unstructured.NestedString(si.Object, importPath(si, "type")...)
		ips, _, _ := unstructured.NestedStringSlice(si.Object, importPath(si, "ips")...)
		if typ == "Headless" {
			if once("headless") {
				add(svc, "A", "headless: ready endpoints of every cluster, no plain EndpointSlice's")
				if port := namedPort(si); port != "" {
					add(port+"."+svc, "SRV", "headless SRV: one per ready endpoint")
				}
				add(svc, "SRV", "all named ports")
				for _, s := range slicesOf[k] {
					cluster := s.GetLabels()[mcsv1beta1.LabelSourceCluster]
					for _, ep := range readyEndpoints(s) {
						qtype := "A"
						if strings.Contains(ep.ip, ":") {
							qtype = "AAAA"
						}
						how := "its hostname"
						if !ep.hostname {
							how = "its address"
						}
						if strings.Contains(cluster, ".") {
							how += ", dotted cluster ID"
						}
						if once("endpoint " + qtype + how) {
							add(ep.label+"."+cluster+"."+svc, qtype, "one endpoint of cluster "+cluster+", named by "+how)
						}
					}
					if once("cluster") {
						add(cluster+"."+svc, "A", "a cluster: NODATA")
					}
				}
			}
			continue
		}
		v4 := slices.ContainsFunc(ips, func(ip string) bool { return !strings.Contains(ip, ":") })
		v6 := slices.ContainsFunc(ips, func(ip string) bool { return strings.Contains(ip, ":") })
		switch {
		case v4 && v6 && once("dual"):
			add(svc, "AAAA", "dual-stack ClusterSetIP")
		case v4 && !v6 && once("v4"):
			add(svc, "A", "ClusterSetIP")
			add(svc, "AAAA", "IPv4 only: NODATA")
			if port := namedPort(si); port != "" {
				add(port+"."+svc, "SRV", "ClusterSetIP SRV")
			}
		case v6 && !v4 && once("v6"):
			add(svc, "AAAA", "IPv6-only ClusterSetIP")
		}
	}
	add("nosuch.svc."+zone, "A", "NXDOMAIN")

	var b strings.Builder
	for _, q := range qs {
		fmt.Fprintf(&b, "  dig @127.0.0.1 -p %d +norec %-58s # %s\n", port, q[0], q[1])
	}
	return b.String()
}

// importPath is where a ServiceImport keeps field: under spec in the
// v1beta1 and v1alpha1 shape, at the object root in v1alpha2's.
func importPath(si *unstructured.Unstructured, field string) []string {
	if si.GroupVersionKind().Version == "v1alpha2" {
		return []string{field}
	}
	return []string{"spec", field}
}

// namedPort is the SRV label pair of the first named port: _name._proto.
func namedPort(si *unstructured.Unstructured) string {
	ports, _, _ := unstructured.NestedSlice(si.Object, importPath(si, "ports")...)
	for _, p := range ports {
		m, _ := p.(map[string]any)
		name, _ := m["name"].(string)
		proto, _ := m["protocol"].(string)
		if proto == "" {
			proto = "TCP"
		}
		if name != "" {
			return "_" + name + "._" + strings.ToLower(proto)
		}
	}
	return ""
}

type endpoint struct {
	label, ip string
	hostname  bool
}

// readyEndpoints are a slice's ready endpoints with their DNS labels.
func readyEndpoints(s *unstructured.Unstructured) []endpoint {
	var out []endpoint
	eps, _, _ := unstructured.NestedSlice(s.Object, "endpoints")
	for _, e := range eps {
		m, _ := e.(map[string]any)
		if ready, found, _ := unstructured.NestedBool(m, "conditions", "ready"); found && !ready {
			continue
		}
		addrs, _, _ := unstructured.NestedStringSlice(m, "addresses")
		if len(addrs) == 0 {
			continue
		}
		if h, _ := m["hostname"].(string); h != "" {
			out = append(out, endpoint{label: h, ip: addrs[0], hostname: true})
			continue
		}
		out = append(out, endpoint{label: strings.NewReplacer(".", "-", ":", "-").Replace(addrs[0]), ip: addrs[0]})
	}
	return out
}

func indent(s string) string {
	var b strings.Builder
	for line := range strings.Lines(s) {
		b.WriteString("    " + line)
	}
	return b.String()
}

// prefixWriter prefixes each line; CoreDNS writes whole lines.
type prefixWriter struct {
	w      *os.File
	prefix string
}

func (p prefixWriter) Write(b []byte) (int, error) {
	for line := range strings.Lines(string(b)) {
		if _, err := fmt.Fprint(p.w, p.prefix+line); err != nil {
			return 0, err
		}
	}
	return len(b), nil
}
