package e2e

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	auditv1 "k8s.io/apiserver/pkg/apis/audit/v1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// TestAPIServerRestart SIGKILLs kube-apiserver and starts it again on the
// same port and certificates, under steady queries, on a control plane of
// its own: twice, the second time with etcd compacted while it is down, so
// that the plugin's watches resume from a resourceVersion etcd no longer
// holds and get a real 410 Gone. Not one lookup may fail, and a
// ServiceImport created right after /readyz answers. While the restarted
// kube-apiserver's authorizer catches up it refuses the plugin's requests
// (403): each refused request is asked again within refusalRetried (plus
// the refusal's own time in kube-apiserver), from the audit log. How long
// the new ServiceImport took is logged, not bounded: it is mostly
// kube-apiserver's start (its 429s and their Retry-After) and client-go's
// backoff before a relist, which a slower machine lengthens (1.3 to 3.0 s
// on one, more under CI). Not in parallel with other tests, so that the
// logged times mean something.
func TestAPIServerRestart(t *testing.T) {
	r := migStartWith(t, "restart", "restart", harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{migUpstreamCRD(t)}, Audit: true})
	r.begin("v1beta1", "v1beta1")
	r.Probe()
	r.Settle("steady queries before the restart")

	restart := func(label, fresh, ip string, down func() error) {
		t.Helper()
		killed, ready, err := restartAPIServer(r.Ctx, r.Env, down)
		if err != nil {
			t.Fatal(err)
		}
		r.Logf("%s: kube-apiserver SIGKILLed, ready again %.2fs later", label, ready.Sub(killed).Seconds())
		r.Create(migImport("v1beta1", r.NS, fresh, "ClusterSetIP", ip))
		created := time.Now()
		name := r.ServiceName(fresh)
		r.WaitA(15*time.Second, name, ip)
		seen := time.Since(created)
		r.Prober.Expect(name, ip)
		r.Logf("%s: a ServiceImport created right after readyz answered in %.2fs", label, seen.Seconds())
		refused, slowest, err := auditedRetries(r, killed)
		if err != nil {
			t.Errorf("%s: %v", label, err)
		} else {
			r.Logf("%s: %d of the plugin's requests refused (403) after the restart, each asked again at most %.2fs later (bound: %s plus the refusal's own time in kube-apiserver)", label, refused, slowest.Seconds(), refusalRetried)
		}
		r.Settle(label + ": steady queries after the restart")
	}

	restart("restart", "fresh1", "10.73.0.1", nil)

	before := time.Now()
	var revision int64
	// After a 410 the reflector relists only after client-go's backoff
	// (0.8 to 1.6s, not settable through a SharedIndexInformer); the
	// answers in use stay meanwhile.
	restart("restart with etcd compacted", "fresh2", "10.73.0.2", func() (err error) {
		revision, err = compactEtcd(r.Ctx, r.Env.EtcdURL)
		return err
	})
	// The plugin listed again: its watches could not resume.
	evs, err := r.Env.AuditEvents(harness.PluginUser, before)
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
	r.Logf("etcd compacted at revision %d while kube-apiserver was down: the plugin listed ServiceImports %d times after the restart", revision, lists)
	if lists == 0 {
		t.Error("no ServiceImport list after etcd's compaction: the watch resumed, no 410 happened")
	}
	r.DigAll()
	r.Report()
	r.CheckLog()
}

// refusalRetried bounds the wait between a refused request of the plugin
// and its next request for the same objects: the plugin retries a refusal
// likely to pass every 0.2 s; client-go's backoff (0.8 s at least), or the
// plugin's retry of a lasting refusal (5 s), would wait longer. The wait is
// read from kube-apiserver's audit log, so it also holds kube-apiserver's
// delay in taking the retry, which is large on a busy machine right after
// its start: the refused request's own time in kube-apiserver is allowed
// on top, as a measure of that delay.
const refusalRetried = time.Second

// auditedRetries reads the plugin's audit events since since until no
// refusal among them is still within its bound of the read with no retry
// yet, and checks them with retriedAfterRefusal.
func auditedRetries(r *migRig, since time.Time) (refused int, slowest time.Duration, err error) {
	if perr := harness.Poll(time.Minute, func() error {
		read := time.Now()
		evs, rerr := r.Env.AuditEvents(harness.PluginUser, since)
		if rerr != nil {
			return harness.Permanent(rerr)
		}
		var pending bool
		if refused, slowest, pending, err = retriedAfterRefusal(evs, read); pending {
			return errors.New("a refusal not retried yet, within its bound")
		}
		return nil
	}); perr != nil {
		r.T.Fatal(perr)
	}
	return refused, slowest, err
}

// retriedAfterRefusal checks, in the plugin's audit events as read at read,
// that every request refused with 403 was followed by a request for the
// same objects (auditTarget) within refusalRetried of the refusal, plus the
// time the refused request took in kube-apiserver. It returns how many were
// refused and the longest wait for a retry; pending when a refusal has no
// retry yet but its bound had not passed at read, so that the log must be
// read again.
func retriedAfterRefusal(evs []auditv1.Event, read time.Time) (refused int, slowest time.Duration, pending bool, err error) {
	slices.SortStableFunc(evs, func(a, b auditv1.Event) int {
		return a.RequestReceivedTimestamp.Time.Compare(b.RequestReceivedTimestamp.Time)
	})
	var errs []error
	for i, ev := range evs {
		if ev.ResponseStatus == nil || ev.ResponseStatus.Code != http.StatusForbidden {
			continue
		}
		refused++
		next, ok := nextRequest(evs, i)
		bound := refusalRetried + ev.StageTimestamp.Sub(ev.RequestReceivedTimestamp.Time)
		if !ok && read.Sub(ev.StageTimestamp.Time) <= bound {
			pending = true
			continue
		}
		if !ok {
			errs = append(errs, fmt.Errorf("%s %s refused at %s, never asked again", ev.Verb, ev.RequestURI, ev.StageTimestamp.Format(time.StampMilli)))
			continue
		}
		gap := next.RequestReceivedTimestamp.Sub(ev.StageTimestamp.Time)
		slowest = max(slowest, gap)
		if gap > bound {
			errs = append(errs, fmt.Errorf("%s %s refused at %s after %.2fs in kube-apiserver, asked again %.2fs later, want within %.2fs", ev.Verb, ev.RequestURI, ev.StageTimestamp.Format(time.StampMilli), bound.Seconds()-refusalRetried.Seconds(), gap.Seconds(), bound.Seconds()))
		}
	}
	return refused, slowest, pending, errors.Join(errs...)
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

// TestRetriedAfterRefusal holds retriedAfterRefusal to its rule, on events
// shaped as kube-apiserver's audit log writes them.
func TestRetriedAfterRefusal(t *testing.T) {
	at := time.Date(2026, 12, 6, 0, 0, 0, 0, time.UTC)
	ev := func(ms int, uri string, code int32) auditv1.Event {
		ts := metav1.NewMicroTime(at.Add(time.Duration(ms) * time.Millisecond))
		return auditv1.Event{Verb: "watch", RequestURI: uri, RequestReceivedTimestamp: ts, StageTimestamp: ts, ResponseStatus: &metav1.Status{Code: code}}
	}
	slow := func(ms, took int, uri string, code int32) auditv1.Event {
		e := ev(ms, uri, code)
		e.StageTimestamp = metav1.NewMicroTime(e.RequestReceivedTimestamp.Add(time.Duration(took) * time.Millisecond))
		return e
	}
	const si, eps = "/apis/multicluster.x-k8s.io/v1beta1/serviceimports?watch=true", "/apis/discovery.k8s.io/v1/endpointslices?watch=true"
	for _, c := range []struct {
		name    string
		evs     []auditv1.Event
		refused int
		fails   bool
		pending bool // read 500 ms after the last event
	}{
		{"retried", []auditv1.Event{ev(0, si, 403), ev(10, eps, 200), ev(200, si, 429), ev(1200, si, 200)}, 1, false, false},
		{"retried at the bound", []auditv1.Event{ev(0, si, 403), ev(1000, si+"&x=1", 200)}, 1, false, false},
		{"retried late for a quick refusal, in time for a slow one", []auditv1.Event{slow(0, 600, si, 403), ev(1800, si, 200)}, 1, false, false},
		{"retried late", []auditv1.Event{ev(0, si, 403), ev(10, eps, 200), ev(1001, si, 200)}, 1, true, false},
		{"another resource is no retry", []auditv1.Event{ev(0, si, 403), ev(100, eps, 200), ev(1500, eps, 200)}, 1, true, false},
		{"not retried yet, read within the bound", []auditv1.Event{ev(0, si, 200), ev(100, si, 403), ev(200, eps, 200)}, 1, false, true},
		{"out of order in the log", []auditv1.Event{ev(200, si, 200), ev(0, si, 403)}, 1, false, false},
		{"nothing refused", []auditv1.Event{ev(0, si, 200)}, 0, false, false},
	} {
		read := slices.MaxFunc(c.evs, func(a, b auditv1.Event) int { return a.StageTimestamp.Compare(b.StageTimestamp.Time) }).StageTimestamp.Add(500 * time.Millisecond)
		refused, _, pending, err := retriedAfterRefusal(c.evs, read)
		if refused != c.refused || (err != nil) != c.fails || pending != c.pending {
			t.Errorf("%s: %d refused, pending %v, error %v; want %d refused, pending %v, fails %v", c.name, refused, pending, err, c.refused, c.pending, c.fails)
		}
	}
}
