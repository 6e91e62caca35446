package e2e

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// Shared by every test: one control plane with the objects of testdata/
// (never changed by a test; tests that change objects use namespaces of
// their own), one CoreDNS binary, and the plugin's least-privilege identity.
var (
	env     *harness.Env
	coredns string
	plugin  *harness.Identity
)

func TestMain(m *testing.M) {
	flag.Parse()
	os.Exit(run(m))
}

func run(m *testing.M) int {
	repo, err := harness.RepoRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	if coredns, err = harness.BuildCoreDNS(repo, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}

	start := time.Now()
	if env, err = harness.Start(harness.Options{Repo: repo}); err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer func() {
		if err := env.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: stopping the control plane:", err)
		}
	}()
	stopWatchdog := watchdog()
	defer stopWatchdog()
	fmt.Printf("e2e: etcd and kube-apiserver up at %s in %.1fs\n", env.APIServerURL(), time.Since(start).Seconds())

	ctx, cancel := harness.Context(time.Minute)
	defer cancel()
	if plugin, err = env.PluginIdentity(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "e2e: plugin identity:", err)
		return 1
	}
	objs, err := contract.ReadObjects(filepath.Join(repo, "testdata"))
	if err == nil {
		err = env.ApplyAll(ctx, objs)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: loading testdata:", err)
		return 1
	}
	return m.Run()
}

// watchdog stops the control plane shortly before go test's -timeout kills
// the binary (which would skip the deferred Stop and leave etcd and
// kube-apiserver running); CoreDNS processes die with the binary.
func watchdog() (stop func()) {
	f := flag.Lookup("test.timeout")
	if f == nil {
		return func() {}
	}
	d, ok := f.Value.(flag.Getter).Get().(time.Duration)
	if !ok || d <= 0 {
		return func() {}
	}
	margin := min(time.Minute, d/10)
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		select {
		case <-ctx.Done():
		case <-time.After(d - margin - time.Since(processStart)):
			fmt.Fprintf(os.Stderr, "e2e: -timeout %v is near: stopping the control plane\n", d)
			_ = env.Stop()
			os.Exit(3)
		}
	}()
	return cancel
}

var processStart = time.Now()
