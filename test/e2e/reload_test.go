package e2e

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// goroutines reads the goroutine count from the pprof plugin.
func goroutines(pprofURL string) (int, error) {
	resp, err := http.Get(pprofURL + "/goroutine?debug=1")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	head := make([]byte, 100)
	n, _ := io.ReadFull(resp.Body, head)
	first, _, _ := strings.Cut(string(head[:n]), "\n")
	total, ok := strings.CutPrefix(first, "goroutine profile: total ")
	if !ok {
		return 0, fmt.Errorf("unexpected profile: %q", first)
	}
	return strconv.Atoi(strings.TrimSpace(total))
}

// Reloading the Corefile five times must not leak informers or goroutines:
// each reload stops the old plugin instance's informers.
func TestReloadLeaksNothing(t *testing.T) {
	dnsSrv := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Pprof: true,
		Plugins: "reload 2s 1s\n" + harness.MulticlusterBlock(plugin.Kubeconfig, "ttl 10")})
	pprofURL := dnsSrv.PprofURL
	const name = "web.demo.svc.clusterset.local."
	ttlIs := func(ttl uint32) func() error {
		return func() error {
			r, err := dnsSrv.Dig(name, "A")
			if err != nil {
				return err
			}
			if r.Rcode != "NOERROR" || len(r.Answer) == 0 || r.Answer[0].Header().Ttl != ttl {
				return fmt.Errorf("want ttl %d: %s", ttl, r)
			}
			return nil
		}
	}
	harness.Eventually(t, 30*time.Second, ttlIs(10))
	before := settledGoroutines(t, pprofURL)
	for i := 1; i <= 5; i++ {
		ttl := 10 + i
		conf := strings.Replace(dnsSrv.Corefile, "ttl 10", fmt.Sprintf("ttl %d", ttl), 1)
		if err := os.WriteFile(dnsSrv.ConfPath(), []byte(conf), 0o644); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, ttlIs(uint32(ttl)))
	}
	// The old instances' goroutines end soon after each reload: wait for them.
	after := goroutinesBackTo(t, pprofURL, before, "5 reloads")
	msg := fmt.Sprintf("reload: %d goroutines before, %d after 5 reloads", before, after)
	t.Log(msg)
	fmt.Println(msg)
}

// settledGoroutines is the goroutine count once start-up has settled: two
// counts a quarter of a second apart agree.
func settledGoroutines(t *testing.T, pprofURL string) (n int) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, func() error {
		a, err := goroutines(pprofURL)
		if err != nil {
			return err
		}
		time.Sleep(250 * time.Millisecond)
		b, err := goroutines(pprofURL)
		if err != nil {
			return err
		}
		if a != b {
			return fmt.Errorf("goroutines still changing: %d, then %d", a, b)
		}
		n = b
		return nil
	})
	return n
}

// goroutinesBackTo waits until the goroutine count is back within 5 of
// before, and returns it.
func goroutinesBackTo(t *testing.T, pprofURL string, before int, what string) (after int) {
	t.Helper()
	harness.Eventually(t, 20*time.Second, func() error {
		var err error
		if after, err = goroutines(pprofURL); err != nil {
			return err
		}
		if after > before+5 {
			return fmt.Errorf("%d goroutines after %s, %d before", after, what, before)
		}
		return nil
	})
	return after
}

// A reload that fails after the plugin's instance has started its watches
// (here, another server block's instance cannot read its kubeconfig when it
// starts) keeps the old instance serving, and stops the watches the failed
// one started: Caddy drops a failed instance without shutting it down.
func TestFailedReloadLeaksNothing(t *testing.T) {
	dnsSrv := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Pprof: true,
		Plugins: "reload 2s 1s\n" + harness.MulticlusterBlock(plugin.Kubeconfig)})
	const name = "web.demo.svc.clusterset.local."
	answers := func() error {
		r, err := dnsSrv.Dig(name, "A")
		if err != nil {
			return err
		}
		if r.Rcode != "NOERROR" || len(r.Answer) == 0 {
			return fmt.Errorf("want an answer: %s", r)
		}
		return nil
	}
	harness.Eventually(t, 30*time.Second, answers)
	before := settledGoroutines(t, dnsSrv.PprofURL)
	port, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 3; i++ {
		// Each Corefile differs in a token (the reload plugin compares
		// them without comments), so that each is tried.
		bad := fmt.Sprintf("%s\nother.local:%d {\n\tbind 127.0.0.1\n\tmulticluster {\n\t\tkubeconfig /nonexistent/kubeconfig\n\t\tttl %d\n\t}\n}\n",
			dnsSrv.Corefile, port, i)
		if err := os.WriteFile(dnsSrv.ConfPath(), []byte(bad), 0o644); err != nil {
			t.Fatal(err)
		}
		harness.Eventually(t, 30*time.Second, func() error {
			if got := strings.Count(dnsSrv.Output(), "Corefile changed but reload failed"); got < i {
				return fmt.Errorf("%d reloads failed, want %d:\n%s", got, i, dnsSrv.Output())
			}
			return nil
		})
		if err := answers(); err != nil {
			t.Fatalf("after failed reload %d: %v", i, err)
		}
	}
	after := goroutinesBackTo(t, dnsSrv.PprofURL, before, "3 failed reloads")
	t.Logf("failed reloads: %d goroutines before, %d after 3", before, after)
}
