package harness

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/miekg/dns"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
)

// The tests' one rig: a CoreDNS with the plugin under steady lookups of
// every name a test expects (Prober), on a control plane, for a change or a
// fault to be played under (migrations between the shapes, outages,
// partitions, restarts, throttling), with the steps those share.

// Prober asks CoreDNS for every expected name's A records, over and over,
// and counts answers that are not exactly an expected set of addresses (one
// for a ClusterSetIP name, several for a headless one). Many queries a
// second need a DNS client library; dig checks the same names before and
// after (Rig.DigAll).
type Prober struct {
	addr    string
	mu      sync.Mutex
	want    map[string][][]string // name -> the sets of A addresses expected, each sorted
	total   atomic.Int64
	failed  atomic.Int64
	samples []string
}

// NewProber is a prober of CoreDNS at addr, expecting no name yet.
func NewProber(addr string) *Prober {
	return &Prober{addr: addr, want: map[string][][]string{}}
}

// Expect makes ips the one right answer for name.
func (p *Prober) Expect(name string, ips ...string) { p.ExpectAny(name, ips) }

// ExpectAny makes any of the sets of addresses a right answer for name:
// while a change is in flight, the answers before and after it.
func (p *Prober) ExpectAny(name string, sets ...[]string) {
	want := make([][]string, len(sets))
	for i, ips := range sets {
		want[i] = slices.Sorted(slices.Values(ips))
	}
	p.mu.Lock()
	p.want[name] = want
	p.mu.Unlock()
}

// Forget stops checking name, while a change to it is in flight.
func (p *Prober) Forget(name string) {
	p.mu.Lock()
	delete(p.want, name)
	p.mu.Unlock()
}

// Settled are the names with one right answer, and their addresses.
func (p *Prober) Settled() map[string][]string {
	p.mu.Lock()
	defer p.mu.Unlock()
	out := map[string][]string{}
	for name, sets := range p.want {
		if len(sets) == 1 {
			out[name] = sets[0]
		}
	}
	return out
}

// Counts are the lookups made so far, and how many of them failed.
func (p *Prober) Counts() (total, failed int64) { return p.total.Load(), p.failed.Load() }

// Start runs the prober until stop, which waits for it to end and may be
// called again.
func (p *Prober) Start(ctx context.Context) (stop func()) {
	pctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() { defer close(done); p.run(pctx) }()
	return func() { cancel(); <-done }
}

func (p *Prober) run(ctx context.Context) {
	for ctx.Err() == nil {
		p.mu.Lock()
		names := slices.Sorted(maps.Keys(p.want))
		p.mu.Unlock()
		for _, name := range names {
			if ctx.Err() != nil {
				return
			}
			r, err := Exchange(p.addr, name, dns.TypeA)
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

// Check fails t for each failed lookup's sample, for any failed lookup, and
// for fewer than atLeast lookups (the prober did not run); it returns the
// counts.
func (p *Prober) Check(t testing.TB, atLeast int64) (total, failed int64) {
	t.Helper()
	total, failed = p.Counts()
	p.mu.Lock()
	for _, s := range p.samples {
		t.Error(s)
	}
	p.mu.Unlock()
	if failed > 0 {
		t.Errorf("%d of %d lookups failed", failed, total)
	}
	if total < atLeast {
		t.Errorf("only %d lookups, want at least %d: the prober did not run", total, atLeast)
	}
	return total, failed
}

// Rig is one test's control plane, namespace, CoreDNS and prober.
type Rig struct {
	T     *testing.T
	Label string // starts the lines Logf writes, which closing notes quote
	Env   *Env
	Ctx   context.Context
	NS    string

	DNS        *CoreDNS
	Prober     *Prober
	CRDChanged time.Time // when the CRD was last written

	stopProbe  func()
	probeStart time.Time
	reported   bool
}

// StartRig starts a control plane of the test's own with opts and creates
// the namespace ns in it.
func StartRig(t *testing.T, label, ns string, opts Options) *Rig {
	t.Helper()
	start := time.Now()
	e, err := Start(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = e.Stop() })
	r := NewRig(t, label, e, ns)
	t.Logf("%s: control plane up in %.1fs", label, time.Since(start).Seconds())
	return r
}

// NewRig is a rig on the control plane e, in the namespace ns, which it
// creates.
func NewRig(t *testing.T, label string, e *Env, ns string) *Rig {
	t.Helper()
	ctx, cancel := Context(5 * time.Minute)
	t.Cleanup(cancel)
	if _, err := e.ApplyYAML(ctx, "apiVersion: v1\nkind: Namespace\nmetadata:\n  name: "+ns+"\n"); err != nil {
		t.Fatal(err)
	}
	return &Rig{T: t, Label: label, Env: e, Ctx: ctx, NS: ns}
}

// RunCoreDNS starts bin with opts and the prometheus plugin, and a prober
// of it that expects nothing yet.
func (r *Rig) RunCoreDNS(bin string, opts CoreDNSOptions) {
	r.T.Helper()
	opts.Metrics = true
	r.DNS = RunCoreDNS(r.T, bin, opts)
	r.Prober = NewProber(r.DNS.Addr())
}

// Create creates a ServiceImport.
func (r *Rig) Create(u *unstructured.Unstructured) {
	r.T.Helper()
	gvr := cache.ServiceImports(strings.TrimPrefix(u.GetAPIVersion(), cache.ServiceImportResource.Group+"/"))
	if _, err := r.Env.Dynamic.Resource(gvr).Namespace(u.GetNamespace()).Create(r.Ctx, u, metav1.CreateOptions{}); err != nil {
		r.T.Fatal(err)
	}
}

// CreateSlice creates an EndpointSlice.
func (r *Rig) CreateSlice(es *discoveryv1.EndpointSlice) {
	r.T.Helper()
	if _, err := r.Env.Clientset.DiscoveryV1().EndpointSlices(es.Namespace).Create(r.Ctx, es, metav1.CreateOptions{}); err != nil {
		r.T.Fatal(err)
	}
}

// ServiceName is the clusterset name of the rig's service svc.
func (r *Rig) ServiceName(svc string) string {
	return contract.N(svc + "." + r.NS)
}

// Answers waits until name answers exactly ips to dig, within 30 s, then
// has the prober check it too.
func (r *Rig) Answers(name string, ips ...string) {
	r.T.Helper()
	r.WaitA(30*time.Second, name, ips...)
	r.Prober.Expect(name, ips...)
}

// WaitA waits until name answers exactly ips to dig.
func (r *Rig) WaitA(within time.Duration, name string, ips ...string) {
	r.T.Helper()
	r.DNS.WaitAnswer(r.T, within, name, "A", aWant(name, ips))
}

// aWant is the answer of exactly ips to name A.
func aWant(name string, ips []string) contract.Want {
	var w contract.Want
	for _, ip := range ips {
		w.Answer = append(w.Answer, contract.A(name, ip))
	}
	return w
}

// Logf logs a line of the test, with the time since the probe started, to
// the test log and to stdout (which the closing note quotes).
func (r *Rig) Logf(format string, args ...any) {
	r.T.Helper()
	at := ""
	if !r.probeStart.IsZero() {
		at = fmt.Sprintf(" [%.1fs]", time.Since(r.probeStart).Seconds())
	}
	line := fmt.Sprintf("%s%s: %s", r.Label, at, fmt.Sprintf(format, args...))
	r.T.Log(line)
	fmt.Println(line)
}

// Probe starts querying every expected name continuously; Report ends it,
// and runs when the test ends if nothing did.
func (r *Rig) Probe() {
	r.stopProbe, r.probeStart = r.Prober.Start(r.Ctx), time.Now()
	r.T.Cleanup(func() {
		if !r.reported {
			r.Report()
		}
	})
}

// ProbeWindow is how long a test keeps querying after each step before the
// next: the plugin's discovery (every 2 s) acts on a CRD change within it,
// so the probe's lookups cover the transition. The probe fails the test on
// any failed lookup; the window only gives a failure the time to happen,
// and no assertion waits on it.
const ProbeWindow = 3 * time.Second

// Settle logs a step and keeps the probe querying through ProbeWindow
// after it.
func (r *Rig) Settle(what string) {
	r.T.Helper()
	r.Logf("%s", what)
	time.Sleep(ProbeWindow)
}

// Report stops the probe, logs its counts, and fails the test on any failed
// lookup or when it made fewer than 100.
func (r *Rig) Report() (total, failed int64) {
	r.T.Helper()
	r.reported = true
	r.stopProbe()
	total, failed = r.Prober.Check(r.T, 100)
	r.Logf("%d lookups, %d failed, in %.1fs", total, failed, time.Since(r.probeStart).Seconds())
	return total, failed
}

// CheckLog fails the test when CoreDNS panicked, and logs what the plugin
// logged beyond queries.
func (r *Rig) CheckLog() {
	r.T.Helper()
	out := r.DNS.Output()
	if strings.Contains(out, "panic") {
		r.T.Error("CoreDNS panicked")
	}
	for line := range strings.Lines(out) {
		if strings.Contains(line, "[ERROR]") || strings.Contains(line, "[WARNING]") || strings.Contains(line, "plugin/multicluster") {
			r.T.Logf("CoreDNS: %s", strings.TrimSpace(line))
		}
	}
}

// DigAll checks every name the prober expects one answer for with dig.
func (r *Rig) DigAll() {
	r.T.Helper()
	for name, ips := range r.Prober.Settled() {
		if err := r.DNS.CheckAnswer(name, "A", aWant(name, ips)); err != nil {
			r.T.Error(err)
		}
	}
}

// CRD reads the ServiceImport CRD.
func (r *Rig) CRD() *apiextensionsv1.CustomResourceDefinition {
	r.T.Helper()
	crd, err := r.Env.CRD(r.Ctx, cache.ServiceImportCRD)
	if err != nil {
		r.T.Fatal(err)
	}
	return crd
}

// UpdateCRD changes the ServiceImport CRD's spec with change.
func (r *Rig) UpdateCRD(change func(*apiextensionsv1.CustomResourceDefinition)) {
	r.T.Helper()
	if err := r.Env.UpdateCRD(r.Ctx, cache.ServiceImportCRD, false, change); err != nil {
		r.T.Fatal(err)
	}
	r.CRDChanged = time.Now()
}

// InstallCRD replaces the ServiceImport CRD's spec and labels with crd's.
func (r *Rig) InstallCRD(crd *apiextensionsv1.CustomResourceDefinition) {
	r.T.Helper()
	r.UpdateCRD(func(c *apiextensionsv1.CustomResourceDefinition) {
		c.Labels, c.Annotations, c.Spec = crd.Labels, crd.Annotations, crd.Spec
	})
}

// KeepStored makes version the CRD's only stored version.
func (r *Rig) KeepStored(version string) {
	r.T.Helper()
	if err := r.Env.UpdateCRD(r.Ctx, cache.ServiceImportCRD, true, func(crd *apiextensionsv1.CustomResourceDefinition) {
		crd.Status.StoredVersions = []string{version}
	}); err != nil {
		r.T.Fatal(err)
	}
}

// WaitServed waits until version is served, or is not.
func (r *Rig) WaitServed(version string, served bool) {
	r.T.Helper()
	Eventually(r.T, 30*time.Second, func() error {
		if is, err := r.Env.Serves(r.Ctx, cache.ServiceImports(version), r.NS); err != nil || is != served {
			return fmt.Errorf("%s served: %v (%v), want %v", version, is, err, served)
		}
		return nil
	})
}

// Rewrite reads every named ServiceImport through version and writes it
// back, changed by change, spread over the probe. The write must store it
// anew (a new resourceVersion), as a storage migration does.
func (r *Rig) Rewrite(version string, names []string, change func(u *unstructured.Unstructured)) {
	r.T.Helper()
	ri := r.Env.Dynamic.Resource(cache.ServiceImports(version)).Namespace(r.NS)
	for _, name := range names {
		u, err := ri.Get(r.Ctx, name, metav1.GetOptions{})
		if err != nil {
			r.T.Fatal(err)
		}
		before := u.GetResourceVersion()
		change(u)
		w, err := ri.Update(r.Ctx, u, metav1.UpdateOptions{})
		if err != nil {
			r.T.Fatalf("rewriting %s through %s: %v", name, version, err)
		}
		if w.GetResourceVersion() == before {
			r.T.Fatalf("rewriting %s through %s stored nothing (resourceVersion %s unchanged)", name, version, before)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// ChangeSeen changes ServiceImport name through version with change and
// returns how long until its name answered ip, and how long the API server
// took to accept the write.
func (r *Rig) ChangeSeen(version, name, ip string, change func(u *unstructured.Unstructured)) (seen, accepted time.Duration) {
	r.T.Helper()
	ri := r.Env.Dynamic.Resource(cache.ServiceImports(version)).Namespace(r.NS)
	u, err := ri.Get(r.Ctx, name, metav1.GetOptions{})
	if err != nil {
		r.T.Fatal(err)
	}
	change(u)
	dnsName := r.ServiceName(name)
	r.Prober.Forget(dnsName) // while the write is in flight either answer is right
	written := time.Now()
	if _, err := ri.Update(r.Ctx, u, metav1.UpdateOptions{}); err != nil {
		r.T.Fatal(err)
	}
	accepted = time.Since(written)
	w := &AnswerWatcher{Addr: r.DNS.Addr(), Sockets: 1}
	w.Add(0, Write{Name: dnsName, IP: ip, Sent: written})
	w.Close()
	if err := w.Run(r.Ctx); err != nil {
		r.T.Fatal(err)
	}
	seen, ok := w.Seen()[0]
	if !ok {
		r.T.Fatalf("%s A did not answer %s within 15s of the write", dnsName, ip)
	}
	r.Answers(dnsName, ip)
	return seen, accepted
}
