// Command devenv runs the plugin against a real kube-apiserver on this
// machine: it starts etcd and kube-apiserver on 127.0.0.1, loads the objects
// of testdata/, builds the project's CoreDNS and serves clusterset.local on
// 127.0.0.1:1053 as the plugin's least-privilege identity, prints dig
// commands to try, and runs until interrupted (Ctrl-C or SIGTERM).
//
// From the repository: hack/run.sh. It first serves the same objects from
// snapshot.go's server, which needs no API server, while it builds
// kube-apiserver, etcd and kubectl (hack/realenv/build.sh); it then runs
// devenv with -takeover, and CoreDNS takes the port over from that server
// without losing a query (takeOver).
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// options are devenv's flags.
type options struct {
	port, ttl int
	testdata  string
	verbose   bool
	takeover  int // the snapshot server's PID, or 0
}

func main() {
	var o options
	flag.IntVar(&o.port, "port", 1053, "DNS port on 127.0.0.1 (UDP and TCP)")
	flag.IntVar(&o.ttl, "ttl", 0, "the plugin's ttl option; its default when 0")
	flag.StringVar(&o.testdata, "testdata", "", "directory of YAML objects to load (default <repo>/testdata)")
	flag.BoolVar(&o.verbose, "v", false, "show etcd's and kube-apiserver's output")
	flag.IntVar(&o.takeover, "takeover", 0, "PID of hack/run.sh's snapshot server, which serves -port until CoreDNS takes it over; 0: the port must be free")
	flag.Parse()
	if err := run(o); err != nil {
		fmt.Fprintln(os.Stderr, "devenv:", err)
		os.Exit(1)
	}
}

func run(o options) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	repo, err := harness.RepoRoot()
	if err != nil {
		return err
	}
	if o.testdata == "" {
		o.testdata = filepath.Join(repo, "testdata")
	}
	objs, err := contract.ReadObjects(o.testdata)
	if err != nil {
		return err
	}
	st, err := answers(objs, 5) // the TTL does not change which names there are
	if err != nil {
		return fmt.Errorf("%s: %w", o.testdata, err)
	}
	digs := digCommands(o.port, st)
	snap, release, err := claimPort(o)
	if err != nil {
		return err
	}
	defer release()

	bin, err := harness.BuildCoreDNS(repo, os.Stdout)
	if err != nil {
		return err
	}
	env, id, admin, err := startAPI(ctx, o, repo, objs)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("devenv: stopping etcd and kube-apiserver")
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devenv:", err)
		}
	}()

	dns, err := startCoreDNS(bin, id, o)
	if err != nil {
		return err
	}
	defer func() {
		fmt.Println("devenv: stopping CoreDNS")
		if err := dns.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "devenv:", err)
		}
	}()
	if snap != nil {
		if err := takeOver(dns, snap); err != nil {
			return err
		}
	}

	fmt.Printf(`
devenv: now serving from CoreDNS + the plugin watching the real kube-apiserver:
clusterset.local on 127.0.0.1:%[1]d as user %[2]s
(kubeconfig %[3]s). Corefile:

%[4]s
Try:
%[5]s
Change objects as the admin:
  %[6]s --kubeconfig %[7]s get serviceimports,endpointslices -A
  %[6]s --kubeconfig %[7]s apply -f FILE.yaml

Ctrl-C stops everything.
`, o.port, id.Name, id.Kubeconfig, indent(dns.Corefile), digs, env.KubectlPath(), admin)

	<-ctx.Done()
	fmt.Println()
	return nil
}

// startAPI starts etcd and kube-apiserver from REALENV_BIN (hack/realenv's
// output, <repo>/.cache/bin when unset), provisions the plugin's identity,
// loads objs through the API (client-go: no kubectl needed) and writes an
// admin kubeconfig. On error, nothing is left running.
func startAPI(ctx context.Context, o options, repo string, objs []*unstructured.Unstructured) (*harness.Env, *harness.Identity, string, error) {
	fmt.Println("devenv: starting etcd and kube-apiserver on 127.0.0.1")
	opts := harness.Options{Repo: repo, BinDir: os.Getenv("REALENV_BIN")}
	if o.verbose {
		opts.Output = os.Stderr
	}
	start := time.Now()
	env, err := harness.Start(opts)
	if err != nil {
		return nil, nil, "", err
	}
	fmt.Printf("devenv: kube-apiserver at %s, ready in %.1fs\n", env.APIServerURL(), time.Since(start).Seconds())

	apiCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	id, err := env.PluginIdentity(apiCtx)
	if err == nil {
		err = env.ApplyAll(apiCtx, objs)
	}
	admin := filepath.Join(env.TempDir(), "admin.kubeconfig")
	if err == nil {
		fmt.Printf("devenv: loaded %d objects from %s\n", len(objs), o.testdata)
		err = env.WriteAdminKubeconfig(admin)
	}
	if err != nil {
		return nil, nil, "", errors.Join(err, env.Stop())
	}
	return env, id, admin, nil
}

// startCoreDNS starts the CoreDNS bin on o.port with the plugin watching the
// API server as id.
func startCoreDNS(bin string, id *harness.Identity, o options) (*harness.CoreDNS, error) {
	var plugin []string
	if o.ttl > 0 {
		plugin = append(plugin, fmt.Sprintf("ttl %d", o.ttl))
	}
	return harness.StartCoreDNS(bin, harness.CoreDNSOptions{
		Port:    o.port,
		Plugins: harness.MulticlusterBlock(id.Kubeconfig, plugin...),
		Output:  prefixWriter{os.Stdout, "coredns: "},
	})
}

// takeOver has the snapshot server (snap) hand the port over to c.
// Both bind it with SO_REUSEPORT, so the kernel shares its queries between
// them until the snapshot server steers them all to CoreDNS and leaves
// (snapshot.go's handOver). That must wait until CoreDNS's own sockets are
// bound: StartCoreDNS returns once the ready plugin says ready, which
// CoreDNS's startup reaches before it binds them; the version banner it
// prints after does say so.
func takeOver(c *harness.CoreDNS, snap *os.Process) error {
	err := harness.Poll(30*time.Second, func() error {
		if !strings.Contains(c.Output(), "CoreDNS-") {
			return errors.New("CoreDNS printed no version banner, which follows binding its port")
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := snap.Signal(syscall.SIGUSR1); err != nil {
		return fmt.Errorf("the snapshot server (pid %d): %w", snap.Pid, err)
	}
	// It is this process's child when hack/run.sh exec'd devenv; else its
	// exit shows as the signal failing.
	if _, err := snap.Wait(); err != nil {
		return harness.Poll(10*time.Second, func() error {
			if snap.Signal(syscall.Signal(0)) == nil {
				return fmt.Errorf("the snapshot server (pid %d) is still running", snap.Pid)
			}
			return nil
		})
	}
	return nil
}

// claimPort fails when o.port is taken, unless the snapshot server holds it
// (-takeover) for CoreDNS to take over: it then returns that process, and a
// release that stops it if it still runs. Should devenv fail before the
// handover, the snapshot server must not be left serving.
func claimPort(o options) (snap *os.Process, release func(), err error) {
	if o.takeover == 0 {
		return nil, func() {}, portFree(o.port)
	}
	if snap, err = os.FindProcess(o.takeover); err != nil {
		return nil, nil, err
	}
	fmt.Printf("devenv: the testdata snapshot (pid %d) serves 127.0.0.1:%d until CoreDNS takes over\n", o.takeover, o.port)
	return snap, func() {
		if snap.Signal(syscall.SIGTERM) == nil {
			_, _ = snap.Wait()
		}
	}, nil
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
