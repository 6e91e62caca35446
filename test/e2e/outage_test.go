package e2e

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// cutter is a TCP proxy to the API server that a test can cut: while cut, it
// refuses connections and has reset every open one, as a dead kube-apiserver
// would.
type cutter struct {
	target string
	addr   string
	mu     sync.Mutex
	ln     net.Listener
	conns  map[net.Conn]struct{}
}

func newCutter(t *testing.T, target string) *cutter {
	t.Helper()
	c := &cutter{target: target, conns: map[net.Conn]struct{}{}}
	if err := c.listen("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	c.addr = c.ln.Addr().String()
	t.Cleanup(c.cut)
	return c
}

func (c *cutter) listen(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.ln = ln
	c.mu.Unlock()
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", c.target)
			if err != nil {
				in.Close()
				continue
			}
			c.mu.Lock()
			c.conns[in], c.conns[out] = struct{}{}, struct{}{}
			c.mu.Unlock()
			go func() { _, _ = io.Copy(out, in); out.Close() }()
			go func() { _, _ = io.Copy(in, out); in.Close() }()
		}
	}()
	return nil
}

// cut closes the listener and every connection.
func (c *cutter) cut() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.ln != nil {
		c.ln.Close()
		c.ln = nil
	}
	for conn := range c.conns {
		if tc, ok := conn.(*net.TCPConn); ok {
			_ = tc.SetLinger(0) // reset, as a killed process's sockets are
		}
		conn.Close()
		delete(c.conns, conn)
	}
}

// restore listens again on the same address.
func (c *cutter) restore(t *testing.T) {
	t.Helper()
	harness.Eventually(t, 10*time.Second, func() error { return c.listen(c.addr) })
}

// TestAPIOutage cuts the plugin off the API server for 12 seconds under
// steady queries: every known name keeps its answer; when the API server is
// back, the watches resume by themselves and a new ServiceImport resolves
// within 5 seconds.
func TestAPIOutage(t *testing.T) {
	ctx, cancel := harness.Context(3 * time.Minute)
	defer cancel()
	const ns = "outage"
	apply(t, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n")
	for i := range 5 {
		applyObjects(t, clusterSetIP(ns, fmt.Sprintf("svc%d", i), fmt.Sprintf("10.70.0.%d", i+1)))
	}

	proxy, kcPath := proxiedKubeconfig(t)
	dnsSrv := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{Plugins: harness.MulticlusterBlock(kcPath)})

	p := harness.NewProber(dnsSrv.Addr())
	for i := range 5 {
		name := fmt.Sprintf("svc%d.%s.svc.clusterset.local.", i, ns)
		eventually(t, dnsSrv, name, "A", want{Answer: []string{a(name, fmt.Sprintf("10.70.0.%d", i+1))}})
		p.Expect(name, fmt.Sprintf("10.70.0.%d", i+1))
	}
	stopProbe := p.Start(ctx)

	proxy.cut()
	cutAt := time.Now()
	// A change made during the outage must arrive once it is over.
	applyObjects(t, clusterSetIP(ns, "during", "10.70.1.1"))
	for time.Since(cutAt) < 12*time.Second {
		r := dig(t, dnsSrv, "svc0."+ns+".svc.clusterset.local.", "A")
		if err := (want{Answer: []string{a("svc0."+ns+".svc.clusterset.local.", "10.70.0.1")}}).Check(r.Msg(), defaultTTL); err != nil {
			t.Errorf("during the outage: %v\n%s", err, r)
		}
		time.Sleep(500 * time.Millisecond)
	}
	proxy.restore(t)
	back := time.Now()
	applyObjects(t, clusterSetIP(ns, "after", "10.70.2.1"))
	var seen time.Duration
	for _, name := range []string{"during", "after"} {
		fq := name + "." + ns + ".svc.clusterset.local."
		eventually(t, dnsSrv, fq, "A", want{Answer: []string{a(fq, map[string]string{"during": "10.70.1.1", "after": "10.70.2.1"}[name])}})
	}
	seen = time.Since(back)
	stopProbe()
	total, failed := p.Check(t, 1)
	msg := fmt.Sprintf("outage: %.0fs cut off, %d lookups, %d failed; new imports answered %.2fs after the API server came back",
		back.Sub(cutAt).Seconds(), total, failed, seen.Seconds())
	t.Log(msg)
	fmt.Println(msg)
	if seen > 5*time.Second {
		t.Errorf("new imports took %v after the outage, want at most 5s", seen)
	}
	if _, err := env.Dynamic.Resource(siV2).Namespace(ns).List(ctx, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
}

// proxiedKubeconfig writes the plugin's kubeconfig pointed at a cutter.
func proxiedKubeconfig(t *testing.T) (*cutter, string) {
	t.Helper()
	u, err := url.Parse(env.APIServerURL())
	if err != nil {
		t.Fatal(err)
	}
	proxy := newCutter(t, u.Host)
	kc, err := clientcmd.LoadFromFile(plugin.Kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	for _, cl := range kc.Clusters {
		cl.Server = "https://" + proxy.addr
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return proxy, path
}

// Started while the API server cannot be reached, CoreDNS still binds its
// port, answers SERVFAIL for the zone (never a cacheable NXDOMAIN) and is
// not ready; once the API server answers, it syncs by itself.
func TestStartWithoutAPIServer(t *testing.T) {
	proxy, kcPath := proxiedKubeconfig(t)
	proxy.cut()
	readyPort, err := harness.FreePort()
	if err != nil {
		t.Fatal(err)
	}
	started := time.Now()
	c := harness.RunCoreDNS(t, coredns, harness.CoreDNSOptions{
		Corefile: func(port int) string {
			return fmt.Sprintf("clusterset.local:%d {\nbind 127.0.0.1\nerrors\nready 127.0.0.1:%d\n%s}\n",
				port, readyPort, harness.MulticlusterBlock(kcPath, "startup_timeout 2s"))
		},
	})
	t.Logf("CoreDNS answered %.1fs after start with the API server unreachable", time.Since(started).Seconds())
	for _, q := range [][2]string{{n("web.demo"), "A"}, {n("nosuch.demo"), "A"}, {"dns-version." + apex, "TXT"}} {
		if r := dig(t, c, q[0], q[1]); r.Rcode != "SERVFAIL" {
			t.Errorf("%s %s before the first sync: %s, want SERVFAIL\n%s", q[0], q[1], r.Rcode, r)
		}
	}
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusOK {
		t.Error("ready before the first sync")
	}
	proxy.restore(t)
	eventually(t, c, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	harness.Eventually(t, 10*time.Second, func() error {
		resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort))
		if err != nil {
			return err
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("ready says %d", resp.StatusCode)
		}
		return nil
	})
}
