package e2e

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestEtcdLoss SIGKILLs etcd behind a running kube-apiserver for 60 seconds
// under steady lookups, then starts it again on its data: no lookup of a
// known name fails, ready and synced stay up, the plugin logs nothing (its
// watches stay open on kube-apiserver's cache), and a ServiceImport written once etcd is back answers
// within 2 seconds of kube-apiserver taking the write. kube-apiserver
// itself takes writes again only once its etcd client has reconnected,
// which its gRPC backoff delays by seconds: that is reported, not asserted.
func TestEtcdLoss(t *testing.T) {
	t.Parallel()
	e, err := harness.Start(harness.Options{Repo: env.Repo})
	if err != nil {
		t.Fatal(err)
	}
	// Cleanups run last first: CoreDNS, started below, stops before this.
	t.Cleanup(func() {
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	ctx, cancel := harness.Context(5 * time.Minute)
	defer cancel()
	id, err := e.PluginIdentity(ctx)
	if err != nil {
		t.Fatal(err)
	}
	const ns = "etcdloss"
	r := startFaultRig(t, e, ns, id.Kubeconfig, harness.CoreDNSOptions{})

	start, err := e.Kill(ctx, "etcd")
	if err != nil {
		t.Fatal(err)
	}
	lost := time.Now()
	r.logged = len(r.DNS.Output())
	r.during(lost, partitionFor)
	if err := start(ctx, etcdHealthy(e.EtcdURL)); err != nil {
		t.Fatal(err)
	}
	back := time.Now()
	// kube-apiserver refuses writes until it has reconnected to etcd.
	harness.Eventually(t, time.Minute, func() error {
		_, err := e.Apply(ctx, clusterSetIP(ns, "after", "10.71.2.1"))
		return err
	})
	accepted := time.Now()
	took := r.answersSince(accepted, map[string]string{"after": "10.71.2.1"})
	r.logSince(lost)
	// The watches stay open on kube-apiserver's watch cache: the plugin
	// sees no outage at all.
	r.finish(fmt.Sprintf("etcd loss: %.0fs without etcd, kube-apiserver took writes again %.2fs after etcd was back", back.Sub(lost).Seconds(), accepted.Sub(back).Seconds()), took, 0)
	t.Logf("after etcd is back: %s", r.health())
}

// etcdHealthy is a check that etcd at etcdURL says it is healthy.
func etcdHealthy(etcdURL string) func(context.Context) error {
	return func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, etcdURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if body, _ := io.ReadAll(resp.Body); !bytes.Contains(body, []byte(`"health":"true"`)) {
			return fmt.Errorf("etcd /health: %s", body)
		}
		return nil
	}
}
