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
	"context"
	"flag"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
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
	digs, err := digCommands(port, objs)
	if err != nil {
		return fmt.Errorf("%s: %w", testdata, err)
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
`, port, id.Name, id.Kubeconfig, indent(dns.Corefile), digs, env.KubectlPath(), admin)

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
// The names come from the plugin's own answers to the objects (cache.Static),
// so the list cannot drift from what CoreDNS serves.
func digCommands(port int, objs []*unstructured.Unstructured) (string, error) {
	const zone = "clusterset.local"
	in := make([]runtime.Object, len(objs))
	for i, o := range objs {
		in[i] = o
	}
	st, err := cache.NewStatic([]string{zone + "."}, 5, in...)
	if err != nil {
		return "", err
	}
	var svcs []*cache.Service
	st.Each(func(s *cache.Service) bool { svcs = append(svcs, s); return true })
	slices.SortFunc(svcs, func(a, b *cache.Service) int {
		return strings.Compare(a.Namespace()+"/"+a.Name(), b.Namespace()+"/"+b.Name())
	})

	var qs [][2]string
	add := func(name, qtype, why string) { qs = append(qs, [2]string{name + " " + qtype, why}) }
	seen := map[string]bool{}
	once := func(kind string) bool {
		if seen[kind] {
			return false
		}
		seen[kind] = true
		return true
	}
	add(zone, "SOA", "the apex")
	add(zone, "NS", "the apex")
	add("dns-version."+zone, "TXT", "schema version")
	for _, s := range svcs {
		svc := fmt.Sprintf("%s.%s.svc.%s", s.Name(), s.Namespace(), zone)
		if once("namespace") {
			add(s.Namespace()+".svc."+zone, "A", "a namespace: NODATA")
		}
		var port string
		if ps := s.Ports(); len(ps) > 0 {
			port = ps[0].Sub()
		}
		if z := s.Zone(0); z != nil {
			if !once("headless") {
				continue
			}
			add(svc, "A", "headless: ready endpoints of every cluster, no plain EndpointSlice's")
			if port != "" {
				add(port+"."+svc, "SRV", "headless SRV: one per ready endpoint")
			}
			add(svc, "SRV", "all named ports")
			for _, sub := range slices.Sorted(maps.Keys(z.Sub)) {
				if strings.HasPrefix(sub, "_") {
					continue // a port's SRV name
				}
				host, cluster, _ := strings.Cut(sub, ".")
				qtype, rrs := "A", z.Sub[sub].A
				if len(rrs) == 0 {
					qtype, rrs = "AAAA", z.Sub[sub].AAAA
				}
				how := "its hostname"
				if len(rrs) > 0 && host == cache.AddressLabel(addressOf(rrs[0])) {
					how = "its address"
				}
				if strings.Contains(cluster, ".") {
					how += ", dotted cluster ID"
				}
				if once("endpoint " + qtype + how) {
					add(sub+"."+svc, qtype, "one endpoint of cluster "+cluster+", named by "+how)
				}
				if once("cluster") {
					add(cluster+"."+svc, "A", "a cluster: NODATA")
				}
			}
			continue
		}
		v4 := slices.ContainsFunc(s.IPs(), netip.Addr.Is4)
		v6 := slices.ContainsFunc(s.IPs(), netip.Addr.Is6)
		switch {
		case v4 && v6 && once("dual"):
			add(svc, "AAAA", "dual-stack ClusterSetIP")
		case v4 && !v6 && once("v4"):
			add(svc, "A", "ClusterSetIP")
			add(svc, "AAAA", "IPv4 only: NODATA")
			if port != "" {
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
	return b.String(), nil
}

// addressOf is the address of an A or AAAA record.
func addressOf(rr dns.RR) netip.Addr {
	var b []byte
	switch r := rr.(type) {
	case *dns.A:
		b = r.A
	case *dns.AAAA:
		b = r.AAAA
	}
	ip, _ := netip.AddrFromSlice(b)
	return ip.Unmap()
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
