package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestAPIServerRestart SIGKILLs kube-apiserver and starts it again on the
// same port and certificates, under steady queries, on a control plane of
// its own: twice, the second time with etcd compacted while it is down, so
// that the plugin's watches resume from a resourceVersion etcd no longer
// holds and get a real 410 Gone. Not one lookup may fail; a ServiceImport
// created right after /readyz answers within 2 seconds after the restart,
// and within 5 after the one that forces a relist. Not in parallel with
// other tests: it times an answer, which their CPU would lengthen (a full
// run saw 2.9s beside a migration test, 1.2 to 1.7s alone).
func TestAPIServerRestart(t *testing.T) {
	r := migStartWith(t, "restart", "restart", harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{migUpstreamCRD(t)}, Audit: true})
	r.begin("v1beta1", "v1beta1")
	r.probe()
	r.settle("steady queries before the restart")

	restart := func(label, fresh, ip string, within time.Duration, down func() error) {
		t.Helper()
		killed, ready, err := restartAPIServer(r.ctx, r.env, down)
		if err != nil {
			t.Fatal(err)
		}
		r.logf("%s: kube-apiserver SIGKILLed, ready again %.2fs later", label, ready.Sub(killed).Seconds())
		r.create(migImport("v1beta1", r.ns, fresh, "ClusterSetIP", ip))
		created := time.Now()
		name := fresh + "." + r.ns + ".svc.clusterset.local."
		harness.Eventually(t, 15*time.Second, func() error {
			res, err := r.dns.Dig(name, "A")
			if err != nil {
				return err
			}
			return (want{Answer: []string{a(name, ip)}}).Check(res.Msg(), defaultTTL)
		})
		seen := time.Since(created)
		r.p.expect(name, ip)
		r.logf("%s: a ServiceImport created right after readyz answered in %.2fs", label, seen.Seconds())
		if seen > within {
			t.Errorf("%s: a ServiceImport created right after readyz took %.2fs to answer, want at most %s", label, seen.Seconds(), within)
		}
		r.settle(label + ": steady queries after the restart")
	}

	restart("restart", "fresh1", "10.73.0.1", 2*time.Second, nil)

	before := time.Now()
	var revision int64
	// After a 410 the reflector relists only after client-go's backoff
	// (0.8 to 1.6s, not settable through a SharedIndexInformer); the
	// answers in use stay meanwhile.
	restart("restart with etcd compacted", "fresh2", "10.73.0.2", 5*time.Second, func() (err error) {
		revision, err = compactEtcd(r.ctx, r.env.EtcdURL)
		return err
	})
	// The plugin listed again: its watches could not resume.
	evs, err := r.env.AuditEvents(harness.PluginUser, before)
	if err != nil {
		t.Fatal(err)
	}
	lists := 0
	for _, ev := range evs {
		relist := ev.Verb == "list" || (ev.Verb == "watch" && strings.Contains(ev.RequestURI, "sendInitialEvents=true"))
		if relist && strings.Contains(ev.RequestURI, "/serviceimports") {
			lists++
		}
	}
	r.logf("etcd compacted at revision %d while kube-apiserver was down: the plugin listed ServiceImports %d times after the restart", revision, lists)
	if lists == 0 {
		t.Error("no ServiceImport list after etcd's compaction: the watch resumed, no 410 happened")
	}
	r.digAll()
	r.report()
	r.checkLog()
}

// restartAPIServer SIGKILLs e's kube-apiserver, as a crashed or OOM-killed
// one dies, waits until its port is closed, calls down (which may act on
// etcd meanwhile), then starts kube-apiserver again with the same binary,
// arguments, port and certificates, and waits until /readyz says ok. It
// returns when the old process died and when the new one was ready.
func restartAPIServer(ctx context.Context, e *harness.Env, down func() error) (killed, ready time.Time, err error) {
	start, err := e.Kill(ctx, "kube-apiserver")
	if err != nil {
		return killed, ready, err
	}
	killed = time.Now()
	if down != nil {
		if err := down(); err != nil {
			return killed, ready, err
		}
	}
	err = start(ctx, func(ctx context.Context) error {
		body, err := e.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) != "ok" {
			err = fmt.Errorf("/readyz: %s", body)
		}
		return err
	})
	if err != nil {
		return killed, ready, fmt.Errorf("kube-apiserver not ready again: %w", err)
	}
	return killed, time.Now(), nil
}

// compactEtcd writes a key straight to etcd at etcdURL, so that its revision
// moves past every resourceVersion a client has seen, and compacts etcd's
// history up to it: a watch from an older resourceVersion then gets 410
// Gone. It uses etcd's JSON gateway, so no etcd client is needed.
func compactEtcd(ctx context.Context, etcdURL string) (revision int64, err error) {
	b64 := base64.StdEncoding.EncodeToString
	var put struct{ Header struct{ Revision string } }
	if err := etcdPost(ctx, etcdURL+"/v3/kv/put", map[string]any{"key": b64([]byte("/e2e/compaction")), "value": b64([]byte(time.Now().String()))}, &put); err != nil {
		return 0, err
	}
	if revision, err = strconv.ParseInt(put.Header.Revision, 10, 64); err != nil {
		return 0, fmt.Errorf("etcd put: revision %q: %w", put.Header.Revision, err)
	}
	return revision, etcdPost(ctx, etcdURL+"/v3/kv/compaction", map[string]any{"revision": put.Header.Revision, "physical": true}, nil)
}

// etcdPost posts body as JSON to url, on etcd's JSON gateway, and decodes the
// answer into out when not nil.
func etcdPost(ctx context.Context, url string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(data))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("POST %s: %s: %s", url, resp.Status, answer)
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(answer, out)
}
