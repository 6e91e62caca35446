package e2e

import (
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
		killed, ready, err := r.env.RestartAPIServer(r.ctx, down)
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
		revision, err = r.env.CompactEtcd(r.ctx)
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
