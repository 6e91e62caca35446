package e2e

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	mcscrd "sigs.k8s.io/mcs-api/config/crd"
	"sigs.k8s.io/yaml"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// What the migration tests between the shapes share: the CRDs, a control
// plane and a CoreDNS of each test's own (so that the tests run side by
// side), a prober of every name, and the steps of a migration. The control
// plane, CoreDNS, metrics and CRD writes are the harness's; what stays here
// are the steps, and the names other tests use (migRig, prober, migImport).

const migSIName = "serviceimports.multicluster.x-k8s.io"

// migSI is the ServiceImport resource in a version.
func migSI(version string) schema.GroupVersionResource {
	return cache.ServiceImports(version)
}

// migUpstreamCRD is sigs.k8s.io/mcs-api v0.5.2's ServiceImport CRD exactly as
// released: v1alpha1 served, v1beta1 served and the storage version.
func migUpstreamCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(mcscrd.ServiceImportCRD, crd); err != nil {
		t.Fatalf("mcs-api's ServiceImport CRD: %v", err)
	}
	if got := harness.ServedVersions(crd); !slices.Equal(got, []string{"v1alpha1", "v1beta1"}) || harness.StorageVersion(crd) != "v1beta1" {
		t.Fatalf("mcs-api's ServiceImport CRD serves %v with storage %s, want [v1alpha1 v1beta1] with storage v1beta1", got, harness.StorageVersion(crd))
	}
	return crd
}

// migUpstreamV1alpha1Only is upstream's CRD reduced to its v1alpha1 version,
// served and stored: what mcs-api releases before v0.5 installed.
func migUpstreamV1alpha1Only(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := migUpstreamCRD(t)
	if err := harness.KeepVersions(crd, "v1alpha1"); err != nil {
		t.Fatal(err)
	}
	return crd
}

// migReadCRD reads the ServiceImport CRD of <repo>/<dir>.
func migReadCRD(t testing.TB, dir string) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd, err := harness.ServiceImportCRD(env.Repo, dir)
	if err != nil {
		t.Fatal(err)
	}
	return crd
}

// migShippedCRD is deploy/crds' ServiceImport CRD: upstream's (v1alpha1,
// v1beta1 as storage) plus v1alpha2, served and not storage.
func migShippedCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := migReadCRD(t, "deploy/crds")
	migCheckVersions(t, "deploy/crds", crd, "v1beta1")
	return crd
}

// migV1alpha2StorageCRD is deploy/crds-v1alpha2-storage's ServiceImport CRD:
// the same versions as deploy/crds, v1alpha2 the storage version.
func migV1alpha2StorageCRD(t testing.TB) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	crd := migReadCRD(t, "deploy/crds-v1alpha2-storage")
	migCheckVersions(t, "deploy/crds-v1alpha2-storage", crd, "v1alpha2")
	return crd
}

// migCheckVersions fails the test unless crd serves upstream's versions, with
// upstream's schemas, and v1alpha2, and stores storage.
func migCheckVersions(t testing.TB, what string, crd *apiextensionsv1.CustomResourceDefinition, storage string) {
	t.Helper()
	if served := harness.ServedVersions(crd); !slices.Equal(served, []string{"v1alpha1", "v1alpha2", "v1beta1"}) || harness.StorageVersion(crd) != storage {
		t.Fatalf("%s serves %v with storage %s, want [v1alpha1 v1alpha2 v1beta1] with storage %s", what, served, harness.StorageVersion(crd), storage)
	}
	for _, up := range migUpstreamCRD(t).Spec.Versions {
		ours := harness.CRDVersion(crd, up.Name)
		if ours == nil || !apiequality.Semantic.DeepEqual(ours.Schema, up.Schema) {
			t.Fatalf("%s: version %s's schema differs from mcs-api v0.5.2's", what, up.Name)
		}
	}
}

// migPorts are the ports of every ServiceImport and EndpointSlice of these
// tests.
func migPorts(typ string) []corev1.ServicePort {
	if typ == "Headless" {
		return []corev1.ServicePort{harness.TCP("pg", 5432)}
	}
	return []corev1.ServicePort{harness.TCP("http", 80)}
}

// migImport is a ServiceImport in version's shape.
func migImport(version, ns, name, typ string, ips ...string) *unstructured.Unstructured {
	return harness.Import{Namespace: ns, Name: name, Type: typ, IPs: ips, Ports: migPorts(typ)}.Object(version)
}

// migSlice is a multi-cluster EndpointSlice of headless service name, from
// cluster.
func migSlice(ns, name, cluster string, eps ...discoveryv1.Endpoint) *discoveryv1.EndpointSlice {
	return harness.MCSSlice(ns, name+"-"+cluster, name, cluster, "mcs-controller.example.com", migPorts("Headless"), eps...)
}

// prober asks CoreDNS for every name's A records, over and over, and counts
// answers that are not exactly an expected set of addresses (one for a
// ClusterSetIP name, several for a headless one). Many queries a second need
// a DNS client library; dig checks the same names before and after.
type prober struct {
	addr    string
	mu      sync.Mutex
	want    map[string][][]string // name -> the sets of A addresses expected, each sorted
	total   atomic.Int64
	failed  atomic.Int64
	samples []string
}

func (p *prober) expect(name string, ips ...string) { p.expectAny(name, ips) }

// expectAny makes any of the sets of addresses a right answer for name:
// while a change is in flight, the answers before and after it.
func (p *prober) expectAny(name string, sets ...[]string) {
	want := make([][]string, len(sets))
	for i, ips := range sets {
		want[i] = slices.Clone(ips)
		slices.Sort(want[i])
	}
	p.mu.Lock()
	p.want[name] = want
	p.mu.Unlock()
}

// forget stops checking name, while a change to it is in flight.
func (p *prober) forget(name string) {
	p.mu.Lock()
	delete(p.want, name)
	p.mu.Unlock()
}

// start runs the prober until stop, which waits for it to end and may be
// called again.
func (p *prober) start(ctx context.Context) (stop func()) {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.run(pctx) }()
	return func() { cancel(); <-done }
}

func (p *prober) run(ctx context.Context) {
	for ctx.Err() == nil {
		p.mu.Lock()
		names := make([]string, 0, len(p.want))
		for n := range p.want {
			names = append(names, n)
		}
		p.mu.Unlock()
		slices.Sort(names)
		for _, name := range names {
			if ctx.Err() != nil {
				return
			}
			r, err := harness.Exchange(p.addr, name, dns.TypeA)
			// The name's answers are read after the lookup, so that a name
			// forgotten while it was in flight counts nothing.
			p.mu.Lock()
			want, ok := p.want[name]
			p.mu.Unlock()
			if !ok {
				continue
			}
			p.total.Add(1)
			var got []string
			if err == nil && r.Rcode == dns.RcodeSuccess {
				for _, rr := range r.Answer {
					if a, ok := rr.(*dns.A); ok {
						got = append(got, a.A.String())
					}
				}
				slices.Sort(got)
			}
			if err != nil || r.Rcode != dns.RcodeSuccess || len(got) != len(r.Answer) ||
				!slices.ContainsFunc(want, func(w []string) bool { return slices.Equal(got, w) }) {
				p.failed.Add(1)
				p.mu.Lock()
				if len(p.samples) < 10 {
					what := fmt.Sprint(err)
					if r != nil {
						what = fmt.Sprintf("%s %v", dns.RcodeToString[r.Rcode], r.Answer)
					}
					p.samples = append(p.samples, fmt.Sprintf("%s %s: want %v, got %s", time.Now().Format("15:04:05.000"), name, want, what))
				}
				p.mu.Unlock()
			}
		}
	}
}

// migRules are the RBAC rules a migration test's CoreDNS runs with. Every
// migration test runs with each (migEachRules): with deploy/rbac.yaml's the
// plugin watches the CRD and follows a version served at once; with the
// official coredns chart's it may not read the CRD, and learns of a version
// from discovery, asked every 30 s and at once when an object's data leaves
// the shape it reads. Not one lookup may fail either way.
type migRules int

const (
	rbacRules  migRules = iota // deploy/rbac.yaml's (harness.PluginIdentity)
	chartRules                 // exactly the official coredns chart's (chartClusterRole): no read of the CRD
)

func (m migRules) String() string {
	if m == chartRules {
		return "chart_rules"
	}
	return "rbac_yaml_rules"
}

// migEachRules runs test once with each set of rules, as parallel subtests.
func migEachRules(t *testing.T, test func(t *testing.T, rules migRules)) {
	for _, rules := range []migRules{rbacRules, chartRules} {
		t.Run(rules.String(), func(t *testing.T) {
			t.Parallel()
			test(t, rules)
		})
	}
}

// migStartRules is migStart for a CoreDNS that runs with rules.
func migStartRules(t *testing.T, rules migRules, label, ns string, crd *apiextensionsv1.CustomResourceDefinition) *migRig {
	t.Helper()
	if rules == chartRules {
		label += " (the coredns chart's rules)"
	}
	r := migStart(t, label, ns, crd)
	r.rules = rules
	return r
}

// migRig is one migration test's control plane, CoreDNS and prober.
type migRig struct {
	t     *testing.T
	label string   // names the migration in the lines the closing note quotes
	rules migRules // what runCoreDNS runs CoreDNS with
	env   *harness.Env
	ctx   context.Context
	ns    string

	dns        *harness.CoreDNS
	metricsURL string
	p          *prober
	stopProbe  func()
	probeStart time.Time
	reported   bool
	crdChanged time.Time // when the CRD was last written
}

// migStart starts a control plane of the test's own with crd installed and
// creates namespace ns in it.
func migStart(t *testing.T, label, ns string, crd *apiextensionsv1.CustomResourceDefinition) *migRig {
	t.Helper()
	return migStartWith(t, label, ns, harness.Options{CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
}

// migStartWith is migStart with the control plane's options.
func migStartWith(t *testing.T, label, ns string, opts harness.Options) *migRig {
	t.Helper()
	start := time.Now()
	menv, err := harness.Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = menv.Stop() })
	ctx, cancel := harness.Context(5 * time.Minute)
	t.Cleanup(cancel)
	r := &migRig{t: t, label: label, env: menv, ctx: ctx, ns: ns}
	if _, err := menv.ApplyYAML(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"); err != nil {
		t.Fatal(err)
	}
	t.Logf("migration: %s: control plane up in %.1fs", label, time.Since(start).Seconds())
	return r
}

// create creates a ServiceImport.
func (r *migRig) create(u *unstructured.Unstructured) {
	r.t.Helper()
	gvr := migSI(strings.TrimPrefix(u.GetAPIVersion(), "multicluster.x-k8s.io/"))
	if _, err := r.env.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(r.ctx, u, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// createSlice creates an EndpointSlice.
func (r *migRig) createSlice(es *discoveryv1.EndpointSlice) {
	r.t.Helper()
	if _, err := r.env.Clientset.DiscoveryV1().EndpointSlices(es.Namespace).Create(r.ctx, es, metav1.CreateOptions{}); err != nil {
		r.t.Fatal(err)
	}
}

// runCoreDNS starts CoreDNS with the multicluster plugin (as the plugin's
// least-privilege identity, or with the coredns chart's rules when the rig
// says so) and the prometheus plugin.
func (r *migRig) runCoreDNS(options ...string) {
	r.t.Helper()
	var id *harness.Identity
	var err error
	if r.rules == chartRules {
		id, err = r.env.Identity(r.ctx, chartUser, chartClusterRole())
	} else {
		id, err = r.env.PluginIdentity(r.ctx)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.runCoreDNSAs(id, options...)
}

// runCoreDNSAs is runCoreDNS as another identity.
func (r *migRig) runCoreDNSAs(id *harness.Identity, options ...string) {
	r.t.Helper()
	r.dns = harness.RunCoreDNS(r.t, coredns, harness.CoreDNSOptions{Metrics: true, Plugins: harness.MulticlusterBlock(id.Kubeconfig, options...)})
	r.metricsURL = r.dns.MetricsURL
	r.p = &prober{addr: r.dns.Addr(), want: map[string][][]string{}}
}

// answers waits until name answers exactly ips to dig, then has the prober
// check it too.
func (r *migRig) answers(name string, ips ...string) {
	r.t.Helper()
	var rrs []string
	for _, ip := range ips {
		rrs = append(rrs, a(name, ip))
	}
	eventually(r.t, r.dns, name, "A", want{Answer: rrs})
	r.p.expect(name, ips...)
}

// answeredFrom waits until coredns_multicluster_serviceimports says that
// every service is answered from version and none from the other versions,
// and logs the counts. In every set-up of these tests each version served is
// read, or its shape is read through another, so
// coredns_multicluster_unread_versions must stay 0 for each.
func (r *migRig) answeredFrom(version string) {
	r.t.Helper()
	versions := []string{"v1alpha1", "v1alpha2", "v1beta1"}
	counts := map[string]float64{version: migCount + 1}
	patience := 20 * time.Second
	if r.rules == chartRules {
		// Without the CRD's watch a version served, or no longer served,
		// is learnt from discovery, asked every 30 s.
		patience += 30 * time.Second
	}
	harness.Eventually(r.t, patience, func() error {
		var errs []error
		for _, v := range versions {
			got, err := harness.ScrapeGauge(r.metricsURL, "coredns_multicluster_serviceimports", "version", v)
			if err != nil {
				return err
			}
			if got != counts[v] {
				errs = append(errs, fmt.Errorf("serviceimports{version=%q} = %v, want %v", v, got, counts[v]))
			}
			if got, err := harness.ScrapeGauge(r.metricsURL, "coredns_multicluster_unread_versions", "version", v); err != nil || got != 0 {
				errs = append(errs, fmt.Errorf("unread_versions{version=%q} = %v (%v), want 0", v, got, err))
			}
		}
		return errors.Join(errs...)
	})
	var parts []string
	for _, v := range versions {
		parts = append(parts, fmt.Sprintf("%s=%v", v, counts[v]))
	}
	r.logf("coredns_multicluster_serviceimports %s", strings.Join(parts, " "))
}

// begin writes the objects through version, starts CoreDNS with options,
// and waits until every name answers and every service is answered from
// answered.
func (r *migRig) begin(version, answered string, options ...string) {
	r.t.Helper()
	r.populate(version)
	r.runCoreDNS(options...)
	r.expectAll()
	r.answeredFrom(answered)
}

// logf logs a line of the migration, with the time since the probe started,
// to the test log and to stdout (which the closing note quotes).
func (r *migRig) logf(format string, args ...any) {
	r.t.Helper()
	at := ""
	if !r.probeStart.IsZero() {
		at = fmt.Sprintf(" [%.1fs]", time.Since(r.probeStart).Seconds())
	}
	line := fmt.Sprintf("migration: %s%s: %s", r.label, at, fmt.Sprintf(format, args...))
	r.t.Log(line)
	fmt.Println(line)
}

// probe starts querying every expected name continuously.
func (r *migRig) probe() {
	r.stopProbe, r.probeStart = r.p.start(r.ctx), time.Now()
	r.t.Cleanup(func() {
		if !r.reported {
			r.report()
		}
	})
}

// settle logs a step of the migration and keeps the probe querying through
// probeWindow after it.
func (r *migRig) settle(what string) {
	r.t.Helper()
	r.logf("%s", what)
	time.Sleep(probeWindow)
}

// probeWindow is how long a migration test keeps querying after each step
// before the next: the plugin's discovery (every 2 s) acts on a CRD change
// within it, so the probe's lookups cover the transition. The probe fails
// the test on any failed lookup; the window only gives a failure the time
// to happen, and no assertion waits on it.
const probeWindow = 3 * time.Second

// report stops the probe and fails the test on any failed lookup.
func (r *migRig) report() {
	r.t.Helper()
	r.reported = true
	r.stopProbe()
	total, failed := r.p.total.Load(), r.p.failed.Load()
	r.logf("%d lookups during the migration, %d failed, in %.1fs", total, failed, time.Since(r.probeStart).Seconds())
	for _, s := range r.p.samples {
		r.t.Error(s)
	}
	if failed > 0 {
		r.t.Errorf("%d of %d lookups failed", failed, total)
	}
	if total < 100 {
		r.t.Errorf("only %d lookups: the probe did not run", total)
	}
}

// checkLog fails the test when CoreDNS panicked, and logs what the plugin
// logged beyond queries.
func (r *migRig) checkLog() {
	r.t.Helper()
	out := r.dns.Output()
	if strings.Contains(out, "panic") {
		r.t.Error("CoreDNS panicked")
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "[ERROR]") || strings.Contains(line, "[WARNING]") || strings.Contains(line, "plugin/multicluster") {
			r.t.Logf("CoreDNS: %s", strings.TrimSpace(line))
		}
	}
}

// crd reads the ServiceImport CRD.
func (r *migRig) crd() *apiextensionsv1.CustomResourceDefinition {
	r.t.Helper()
	crd, err := r.env.CRD(r.ctx, migSIName)
	if err != nil {
		r.t.Fatal(err)
	}
	return crd
}

// updateCRD changes the ServiceImport CRD's spec with change.
func (r *migRig) updateCRD(change func(*apiextensionsv1.CustomResourceDefinition)) {
	r.t.Helper()
	if err := r.env.UpdateCRD(r.ctx, migSIName, false, change); err != nil {
		r.t.Fatal(err)
	}
	r.crdChanged = time.Now()
}

// installCRD replaces the ServiceImport CRD's spec and labels with crd's.
func (r *migRig) installCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	r.t.Helper()
	r.updateCRD(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Labels, c.Annotations, c.Spec = crd.Labels, crd.Annotations, crd.Spec
	})
}

// waitServed waits until version is served, or is not.
func (r *migRig) waitServed(version string, served bool) {
	r.t.Helper()
	harness.Eventually(r.t, 30*time.Second, func() error {
		if is, err := r.env.Serves(r.ctx, migSI(version), r.ns); err != nil || is != served {
			return fmt.Errorf("%s served: %v (%v), want %v", version, is, err, served)
		}
		return nil
	})
}

// rewrite reads every named ServiceImport through version and writes it
// back, changed by change, spread over the probe. The write must store it
// anew (a new resourceVersion), as a storage migration does.
func (r *migRig) rewrite(version string, names []string, change func(u *unstructured.Unstructured)) {
	r.t.Helper()
	ri := r.env.Dynamic.Resource(migSI(version)).Namespace(r.ns)
	for _, name := range names {
		u, err := ri.Get(r.ctx, name, metav1.GetOptions{})
		if err != nil {
			r.t.Fatal(err)
		}
		before := u.GetResourceVersion()
		change(u)
		w, err := ri.Update(r.ctx, u, metav1.UpdateOptions{})
		if err != nil {
			r.t.Fatalf("rewriting %s through %s: %v", name, version, err)
		}
		if w.GetResourceVersion() == before {
			r.t.Fatalf("rewriting %s through %s stored nothing (resourceVersion %s unchanged)", name, version, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// changeSeen changes ServiceImport name through version with change and
// returns how long until its name answered ip, and how long the API server
// took to accept the write.
func (r *migRig) changeSeen(version, name, ip string, change func(u *unstructured.Unstructured)) (seen, accepted time.Duration) {
	r.t.Helper()
	ri := r.env.Dynamic.Resource(migSI(version)).Namespace(r.ns)
	u, err := ri.Get(r.ctx, name, metav1.GetOptions{})
	if err != nil {
		r.t.Fatal(err)
	}
	change(u)
	dnsName := name + "." + r.ns + ".svc.clusterset.local."
	r.p.forget(dnsName) // while the write is in flight either answer is right
	written := time.Now()
	if _, err := ri.Update(r.ctx, u, metav1.UpdateOptions{}); err != nil {
		r.t.Fatal(err)
	}
	accepted = time.Since(written)
	w := &harness.AnswerWatcher{Addr: r.dns.Addr(), Sockets: 1}
	w.Add(0, harness.Write{Name: dnsName, IP: ip, Sent: written})
	w.Close()
	if err := w.Run(r.ctx); err != nil {
		r.t.Fatal(err)
	}
	seen, ok := w.Seen()[0]
	if !ok {
		r.t.Fatalf("%s A did not answer %s within 15s of the write", dnsName, ip)
	}
	eventually(r.t, r.dns, dnsName, "A", want{Answer: []string{a(dnsName, ip)}})
	r.p.expect(dnsName, ip)
	return seen, accepted
}

// updatesAfter changes svc1, then svc0, through version with setIP, once
// the migration is over. The first change after the CRD's last change may
// wait for the plugin's watch to recover: the API server ends every watch of
// the resource about a second after a CRD update, resuming one fails with
// "too old resource version", and client-go's reflector relists only after
// its backoff (800ms, doubled on each failure within 2 minutes, with
// jitter). Its time is logged. The second change must show within 2
// seconds.
func (r *migRig) updatesAfter(version string, setIP func(u *unstructured.Unstructured, ip string)) {
	r.t.Helper()
	sinceCRD := time.Since(r.crdChanged)
	seen, accepted := r.changeSeen(version, "svc1", migIP(1, 1), func(u *unstructured.Unstructured) { setIP(u, migIP(1, 1)) })
	r.logf("the first update after the migration (%.1fs after the CRD's last change) answered in %.2fs (the API server took %.2fs to accept it)",
		sinceCRD.Seconds(), seen.Seconds(), accepted.Seconds())
	time.Sleep(500 * time.Millisecond)
	seen, accepted = r.changeSeen(version, "svc0", migIP(0, 1), func(u *unstructured.Unstructured) { setIP(u, migIP(0, 1)) })
	r.logf("the update after the migration answered in %.2fs (the API server took %.2fs to accept it)", seen.Seconds(), accepted.Seconds())
	if seen > 2*time.Second {
		r.t.Errorf("update took %v to show, want at most 2s", seen)
	}
	r.settle("svc1 and svc0 updated through " + version)
}

// keepOnly ends a migration to version: it becomes the only stored version,
// then the CRD's only version; each of gone stops being served, and every
// service is answered from version.
func (r *migRig) keepOnly(version string, gone ...string) {
	r.t.Helper()
	if err := r.env.UpdateCRD(r.ctx, migSIName, true, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Status.StoredVersions = []string{version}
	}); err != nil {
		r.t.Fatal(err)
	}
	r.updateCRD(func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Spec.Versions = []apiextensionsv1.CustomResourceDefinitionVersion{*harness.CRDVersion(crd, version)}
	})
	for _, v := range gone {
		r.waitServed(v, false)
	}
	r.settle(strings.Join(gone, " and ") + " dropped from storedVersions and from the CRD")
	r.answeredFrom(version)
}

// finish checks a migration's end: updates through version with setIP show
// (updatesAfter), the prober saw no failure, dig gets every name, each from
// version, and CoreDNS logged nothing unexpected.
func (r *migRig) finish(version string, setIP func(u *unstructured.Unstructured, ip string)) {
	r.t.Helper()
	r.updatesAfter(version, setIP)
	r.report()
	r.digAll()
	r.answeredFrom(version)
	r.checkLog()
}

// digAll checks every name the prober expects with dig.
func (r *migRig) digAll() {
	r.t.Helper()
	r.p.mu.Lock()
	wants := make(map[string][]string, len(r.p.want))
	for k, v := range r.p.want {
		if len(v) == 1 {
			wants[k] = v[0]
		}
	}
	r.p.mu.Unlock()
	for name, ips := range wants {
		var rrs []string
		for _, ip := range ips {
			rrs = append(rrs, a(name, ip))
		}
		expect(r.t, r.dns, defaultTTL, name, "A", want{Answer: rrs})
	}
}

// The ServiceImports of a migration test: migCount ClusterSetIP services
// svc<i> and the headless service db with endpoints in two clusters.
const migCount = 10

func migIP(i, gen int) string { return fmt.Sprintf("10.%d.0.%d", 70+gen, i+1) }

func migNames() []string {
	names := []string{"db"}
	for i := range migCount {
		names = append(names, fmt.Sprintf("svc%d", i))
	}
	return names
}

// populate creates the ServiceImports through version (spec/status
// shape) and db's EndpointSlices, waits until CoreDNS answers every name
// and has the prober check them.
func (r *migRig) populate(version string) {
	r.t.Helper()
	for i := range migCount {
		r.create(migImport(version, r.ns, fmt.Sprintf("svc%d", i), "ClusterSetIP", migIP(i, 0)))
	}
	r.create(migImport(version, r.ns, "db", "Headless"))
	r.createSlice(migSlice(r.ns, "db", "west",
		harness.Endpoint("10.1.0.11", "db-0", true),
		harness.Endpoint("10.1.0.12", "", true),
		harness.Endpoint("10.1.0.13", "db-2", false)))
	r.createSlice(migSlice(r.ns, "db", "east",
		harness.Endpoint("10.2.0.21", "db-0", true)))
}

// expectAll waits for every name of populate to answer.
func (r *migRig) expectAll() {
	r.t.Helper()
	for i := range migCount {
		r.answers(fmt.Sprintf("svc%d.%s.svc.clusterset.local.", i, r.ns), migIP(i, 0))
	}
	r.answers("db."+r.ns+".svc.clusterset.local.", "10.1.0.11", "10.1.0.12", "10.2.0.21")
	r.answers("db-0.west.db."+r.ns+".svc.clusterset.local.", "10.1.0.11")
	r.answers("db-0.east.db."+r.ns+".svc.clusterset.local.", "10.2.0.21")
}
