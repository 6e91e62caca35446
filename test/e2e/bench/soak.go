package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"image/color"
	"math"
	"math/rand/v2"
	"net/netip"
	"slices"
	"time"

	"github.com/miekg/dns"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	mcsv1beta1 "sigs.k8s.io/mcs-api/pkg/apis/v1beta1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// soakSample is the server after a forced GC, once Updates writes were made.
type soakSample struct {
	Updates int
	Elapsed time.Duration // from the first write, pauses included
	Rate    float64       // writes per second since the sample before
	Values  [6]float64    // soakFigures
}

// soakFigures name the figures of a sample, which must not grow: VmRSS and
// RssAnon from /proc/PID/status, go_memstats_heap_inuse_bytes and
// go_memstats_alloc_bytes (after the GC: the live heap) in MiB, then
// go_goroutines and process_open_fds.
var soakFigures = []string{"VmRSS (MiB)", "RssAnon (MiB)", "Go heap in use (MiB)", "Go live heap (MiB)", "goroutines", "open fds"}

// soakTolerance is how far a figure at the end may be from its value after
// the first -soak-every writes.
const soakTolerance = 0.05

// soakRun is what the long churn measured: its samples, the writes that
// failed, and the answers checked at its end, those that differed and how
// long the check polled.
type soakRun struct {
	samples         []soakSample
	failed, checked int
	bad             []string
	took            time.Duration
}

// runSoak is the long churn: one replica of ours on a control plane of its
// own, while writers create, change and delete the ServiceImports and
// EndpointSlices of a bounded working set; after every -soak-every writes
// they pause and the server is sampled; at the end every service's A answer
// is compared with what the API server holds.
func runSoak(ctx context.Context, c config, rep *report) error {
	cls, err := c.startPlanes(ctx, fixture{namespaces: 10}, []string{"soak"}, cache.V1alpha2)
	defer stopPlanes(cls)
	if err != nil {
		return err
	}
	cl := cls[0]
	if err := cl.createNamespaces(ctx); err != nil {
		return err
	}
	ws := make([]*soakWriter, c.soakWriters)
	for w := range ws {
		ws[w] = &soakWriter{cl: cl, rng: rand.New(rand.NewPCG(c.seed, uint64(w))), services: c.soakServices,
			headless: map[int]bool{}, objs: map[int]*discoveryv1.EndpointSlice{}}
		for i := w; i < 2*c.soakServices; i += c.soakWriters {
			if i < c.soakServices {
				ws[w].imports = append(ws[w].imports, i)
			}
			ws[w].slices = append(ws[w].slices, i)
		}
	}
	// all has every writer do its share of n.
	all := func(f func(*soakWriter, context.Context, int) error, n int) error {
		return parallel(ctx, len(ws), len(ws), func(ctx context.Context, w int) error {
			return f(ws[w], ctx, n/len(ws)+min(1, max(0, n%len(ws)-w)))
		})
	}
	t0 := time.Now()
	if err := all((*soakWriter).load, 0); err != nil {
		return err
	}
	logf("soak: %d ServiceImports and %d EndpointSlices created in %.1fs", c.soakServices, 2*c.soakServices, time.Since(t0).Seconds())
	id, err := cl.env.PluginIdentity(ctx)
	if err != nil {
		return err
	}
	s, err := c.startServer(side{"ours", "ours multicluster", c.ours, harness.MulticlusterBlock(id.Kubeconfig), cl, nil}, "-soak", true)
	if err != nil {
		return err
	}
	defer s.Stop()
	run := &soakRun{}
	rep.soak = run
	// Sample, then -soak-every writes, until -soak writes were made; each
	// sample -settle after the writes stopped, after a garbage collection.
	start := time.Now()
	for done, step, writing := 0, 0, time.Duration(0); ; {
		time.Sleep(c.settle)
		err := s.collectGarbage()
		r, rerr := s.read()
		if err := errors.Join(err, rerr); err != nil {
			return err
		}
		run.samples = append(run.samples, soakSample{Updates: done, Elapsed: time.Since(start), Rate: float64(step) / max(writing.Seconds(), 1e-9),
			Values: [6]float64{float64(r.RSS) / 1024, float64(r.Anon) / 1024, mibOf(r.Heap.HeapInuse), mibOf(r.Live.Alloc), float64(r.Live.Goroutines), float64(r.Live.FDs)}})
		logf("soak: %s", line(run.samples[len(run.samples)-1], soakCols()))
		if done >= c.soak {
			break
		}
		step = min(c.soakEvery, c.soak-done)
		t := time.Now()
		if err := all((*soakWriter).run, step); err != nil {
			return err
		}
		writing, done = time.Since(t), done+step
	}
	if err := run.check(ctx, cl, s, c.soakServices); err != nil {
		return err
	}
	run.failed = sum(ws, func(w *soakWriter) int { return w.failed })
	if err := rep.write(); err != nil || len(run.bad) == 0 {
		return err
	}
	return fmt.Errorf("soak: %d of %d answers differ from what the API server holds", len(run.bad), run.checked)
}

func soakCols() []column[soakSample] {
	cols := []column[soakSample]{{"writes", func(s soakSample) string { return fmt.Sprint(s.Updates) }},
		{"elapsed", func(s soakSample) string { return fmt.Sprintf("%.0fs", s.Elapsed.Seconds()) }},
		{"writes/s", func(s soakSample) string { return fmt.Sprintf("%.0f", s.Rate) }}}
	for k, name := range soakFigures {
		cols = append(cols, column[soakSample]{name, func(s soakSample) string { return fmt.Sprintf("%.1f", s.Values[k]) }})
	}
	return cols
}

func (r *report) soakTables() []table {
	c, run := r.cfg, r.soak
	first, last := run.samples[1], run.samples[len(run.samples)-1]
	samples := tableOf("", run.samples, soakCols())
	samples.intro = fmt.Sprintf("long churn: %d writes by %d writers over %d ServiceImports and %d EndpointSlices in 10 namespaces, seed %d; one replica of ours (GOMAXPROCS=1, CPU %s). Each sample %v after the writes paused, after a forced GC; %d writes failed and were not counted",
		c.soak, c.soakWriters, c.soakServices, 2*c.soakServices, c.seed, c.serverCPU, c.settle, run.failed)
	change := soakVerdicts(first, last)
	verdicts := tableOf(fmt.Sprintf("at the end against after %d writes (within %.0f%%: PASS)", first.Updates, soakTolerance*100), []int{0, 1, 2, 3, 4, 5}, []column[int]{
		{"figure", func(k int) string { return soakFigures[k] }},
		{fmt.Sprintf("after %d", first.Updates), func(k int) string { return fmt.Sprintf("%.1f", first.Values[k]) }},
		{"at the end", func(k int) string { return fmt.Sprintf("%.1f", last.Values[k]) }},
		{"change", func(k int) string { return fmt.Sprintf("%+.1f%%", 100*change[k]) }},
		{"verdict", func(k int) string { return cond(math.Abs(change[k]) <= soakTolerance, "PASS", "FAIL") }}})
	verdicts.notes = append([]string{fmt.Sprintf("answers at the end: %d names asked, %d differ from what the API server holds (%.1fs of polling)",
		run.checked, len(run.bad), run.took.Seconds())}, run.bad[:min(5, len(run.bad))]...)
	return []table{samples, verdicts}
}

// soakWriter writes its own share of the working set, so that it knows
// what every object of its share holds: imports i and EndpointSlices j of
// i, j ≡ writer (mod writers). Import i is svc-<i> in ns-<i mod 10>;
// EndpointSlice j is es-<j> in import j mod services' namespace, labelled
// with that import's name when created, with any import's of the namespace
// after a move.
type soakWriter struct {
	cl       *cluster
	rng      *rand.Rand
	services int
	imports  []int
	slices   []int
	headless map[int]bool                       // the imports that exist: whether headless
	objs     map[int]*discoveryv1.EndpointSlice // EndpointSlices as last written; nil: none
	failed   int
}

func (w *soakWriter) load(ctx context.Context, _ int) error {
	for k, ids := range [][]int{w.imports, w.slices} {
		for _, i := range ids {
			for ok := false; !ok; {
				var err error
				if ok, err = w.write(ctx, k == 1, i); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// run makes n successful writes: three in ten to an import.
func (w *soakWriter) run(ctx context.Context, n int) error {
	for n > 0 {
		slice := w.rng.IntN(10) >= 3
		ids := cond(slice, w.slices, w.imports)
		ok, err := w.write(ctx, slice, ids[w.rng.IntN(len(ids))])
		if err != nil {
			return err
		}
		n -= cond(ok, 1, 0)
	}
	return nil
}

// write makes one write to EndpointSlice i (slice) or import i: a create if
// it does not exist, else a delete or a change. A write that fails is not
// counted (ok false), and the object is deleted, so that the writer knows
// again what it holds.
func (w *soakWriter) write(ctx context.Context, slice bool, i int) (ok bool, err error) {
	f := cond(slice, w.writeSlice, w.writeImport)
	if err = retryTransient(ctx, func(ctx context.Context) error { return f(ctx, i) }); err == nil || ctx.Err() != nil {
		return err == nil, err
	}
	if w.failed++; w.failed > 1000 {
		return false, fmt.Errorf("soak: more than 1000 writes of one writer failed, the last: %w", err)
	}
	logf("soak: a write failed, deleting the object: %v", err)
	ns := w.cl.fx.namespace(i % w.services)
	return false, retryTransient(ctx, func(ctx context.Context) error {
		var err error
		if slice {
			delete(w.objs, i)
			err = w.cl.kube.DiscoveryV1().EndpointSlices(ns).Delete(ctx, fmt.Sprintf("es-%05d", i), metav1.DeleteOptions{})
		} else {
			delete(w.headless, i)
			err = w.cl.imports.Namespace(ns).Delete(ctx, importName(i), metav1.DeleteOptions{})
		}
		return cond(apierrors.IsNotFound(err), nil, err)
	})
}

// writeImport creates import i (a third of them headless), or deletes it
// (one time in four), or merge-patches its ips, its ports or a label.
func (w *soakWriter) writeImport(ctx context.Context, i int) error {
	ns, name := w.cl.fx.namespace(i), importName(i)
	res := w.cl.imports.Namespace(ns)
	headless, exists := w.headless[i]
	if !exists {
		headless = w.rng.IntN(3) == 0
		ips := []string{w.addr(96)}
		u := serviceImport(cache.V1alpha2, ns, name, cond(headless, "Headless", "ClusterSetIP"), cond(headless, nil, ips), 1+w.rng.IntN(3))
		u.Object["ports"] = importPorts(w.ports()) // ours reads v1alpha2: ports at the root
		_, err := res.Create(ctx, u, metav1.CreateOptions{})
		if err == nil {
			w.headless[i] = headless
		}
		return err
	}
	if w.rng.IntN(4) == 0 {
		err := res.Delete(ctx, name, metav1.DeleteOptions{})
		if err == nil {
			delete(w.headless, i)
		}
		return err
	}
	patch := map[string]any{"metadata": map[string]any{"labels": map[string]string{"tier": fmt.Sprint("t", w.rng.IntN(1000))}}}
	switch k := w.rng.IntN(3); {
	case k == 0 && !headless:
		patch = map[string]any{"ips": []string{w.addr(96)}}
	case k == 1:
		patch = map[string]any{"ports": importPorts(w.ports())}
	}
	body, err := json.Marshal(patch)
	if err == nil {
		_, err = res.Patch(ctx, name, types.MergePatchType, body, metav1.PatchOptions{})
	}
	return err
}

// writeSlice creates EndpointSlice j, or deletes it (one time in five), or
// updates it with one change: an endpoint added or removed, a ready
// condition flipped, a hostname set or cleared, new ports, or the slice
// moved to another service or cluster.
func (w *soakWriter) writeSlice(ctx context.Context, j int) error {
	home := j % w.services
	api := w.cl.kube.DiscoveryV1().EndpointSlices(w.cl.fx.namespace(home))
	es, err := w.objs[j], error(nil)
	switch {
	case es == nil:
		es = slice(w.cl.fx.namespace(home), fmt.Sprintf("es-%05d", j), importName(home), w.rng.IntN(4))
		es.Ports = harness.SlicePorts(w.ports())
		for range 1 + w.rng.IntN(6) {
			es.Endpoints = append(es.Endpoints, w.endpoint())
		}
		es, err = api.Create(ctx, es, metav1.CreateOptions{})
	case w.rng.IntN(5) == 0:
		es, err = nil, api.Delete(ctx, es.Name, metav1.DeleteOptions{})
	default:
		es = es.DeepCopy()
		e, k := es.Endpoints, w.rng.IntN(len(es.Endpoints))
		switch op := w.rng.IntN(7); {
		case op == 0 && len(e) < 16, op == 1 && len(e) == 1:
			es.Endpoints = append(e, w.endpoint())
		case op <= 1:
			es.Endpoints = slices.Delete(e, k, k+1)
		case op == 2:
			if r := e[k].Conditions.Ready; r == nil || *r {
				e[k].Conditions.Ready = ptr.To(false)
			} else if e[k].Conditions.Ready = ptr.To(true); w.rng.IntN(2) == 0 {
				e[k].Conditions.Ready = nil
			}
		case op == 3 && e[k].Hostname == nil:
			e[k].Hostname = ptr.To(fmt.Sprint("host-", w.rng.IntN(100)))
		case op == 3:
			e[k].Hostname = nil
		case op == 4:
			es.Ports = harness.SlicePorts(w.ports())
		case op == 5: // to another service of the namespace
			for was := es.Labels[mcsv1beta1.LabelServiceName]; es.Labels[mcsv1beta1.LabelServiceName] == was; {
				es.Labels[mcsv1beta1.LabelServiceName] = importName(home%10 + 10*w.rng.IntN(w.services/10))
			}
		default:
			for was := es.Labels[mcsv1beta1.LabelSourceCluster]; es.Labels[mcsv1beta1.LabelSourceCluster] == was; {
				es.Labels[mcsv1beta1.LabelSourceCluster] = clusterID(w.rng.IntN(4))
			}
		}
		es, err = api.Update(ctx, es, metav1.UpdateOptions{})
	}
	if err == nil {
		w.objs[j] = es
	}
	return err
}

// addr is a random IPv4 address in 10.<first..first+15>.0.0.
func (w *soakWriter) addr(first int) string {
	return fmt.Sprintf("10.%d.%d.%d", first+w.rng.IntN(16), w.rng.IntN(256), 1+w.rng.IntN(254))
}

// endpoint is one endpoint of a random address, ready five times in eight,
// not ready two, unknown (nil) one; a third have a hostname.
func (w *soakWriter) endpoint() discoveryv1.Endpoint {
	e := discoveryv1.Endpoint{Addresses: []string{w.addr(128)}, Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(w.rng.IntN(8) > 2)}}
	if w.rng.IntN(8) == 0 {
		e.Conditions.Ready = nil
	}
	if w.rng.IntN(3) == 0 {
		e.Hostname = ptr.To(fmt.Sprint("host-", w.rng.IntN(100)))
	}
	return e
}

var soakPortNames = []string{"http", "grpc", "metrics", "admin", "dns"}

// ports are one to three TCP ports of distinct names and random numbers.
func (w *soakWriter) ports() []corev1.ServicePort {
	var ps []corev1.ServicePort
	for _, k := range w.rng.Perm(len(soakPortNames))[:1+w.rng.IntN(3)] {
		ps = append(ps, harness.TCP(soakPortNames[k], int32(1+w.rng.IntN(65535))))
	}
	return ps
}

func importPorts(ps []corev1.ServicePort) any {
	return harness.Import{Ports: ps}.Object(cache.V1alpha2).Object["ports"]
}

// expectedA is the A answer of every import's name, by name: a ClusterSetIP
// import's IPv4 addresses, a headless import's ready IPv4 endpoint addresses
// (a nil ready counts as ready) in every EndpointSlice of its namespace
// labelled with its name and a source cluster it lists (any, if it lists
// none: the README's "listed clusters"); sorted, without repeats; none:
// NXDOMAIN. The imports (v1alpha2, the root shape) are read with
// apimachinery's converter, not the plugin's decoder that the soak checks.
func expectedA(imports []unstructured.Unstructured, ess []discoveryv1.EndpointSlice) (map[string][]string, error) {
	type key struct{ ns, name, cluster string }
	ready := map[key][]string{}
	for _, es := range ess {
		k := key{es.Namespace, es.Labels[mcsv1beta1.LabelServiceName], es.Labels[mcsv1beta1.LabelSourceCluster]}
		for _, e := range es.Endpoints {
			if es.AddressType == discoveryv1.AddressTypeIPv4 && k.cluster != "" && (e.Conditions.Ready == nil || *e.Conditions.Ready) {
				ready[k] = append(ready[k], e.Addresses...)
			}
		}
	}
	want := map[string][]string{}
	for _, u := range imports {
		var im struct {
			Type     string              `json:"type"`
			IPs      []string            `json:"ips"`
			Clusters []map[string]string `json:"clusters"`
		}
		if err := runtime.DefaultUnstructuredConverter.FromUnstructured(u.Object, &im); err != nil {
			return nil, fmt.Errorf("ServiceImport %s/%s: %w", u.GetNamespace(), u.GetName(), err)
		}
		addrs := slices.DeleteFunc(im.IPs, func(ip string) bool {
			a, err := netip.ParseAddr(ip)
			return im.Type == "Headless" || err != nil || !a.Is4()
		})
		for k, a := range ready {
			listed := slices.ContainsFunc(im.Clusters, func(c map[string]string) bool { return c["cluster"] == k.cluster })
			if im.Type == "Headless" && k.ns == u.GetNamespace() && k.name == u.GetName() && (listed || len(im.Clusters) == 0) {
				addrs = append(addrs, a...)
			}
		}
		if addrs = slices.Compact(slices.Sorted(slices.Values(addrs))); len(addrs) > 0 {
			want[fqdn(u.GetName(), u.GetNamespace())] = addrs
		}
	}
	return want, nil
}

// answerMismatch says how the A answer r to name differs from want (none:
// NXDOMAIN), by the contract's comparison of rcode and answer section; ""
// when it does not.
func answerMismatch(r *dns.Msg, name string, want []string) string {
	w := cond(len(want) == 0, contract.NXDOMAIN(), contract.Want{})
	for _, ip := range want {
		w.Answer = append(w.Answer, contract.A(name, ip))
	}
	if err := w.CheckAnswer(r); err != nil {
		return err.Error()
	}
	return ""
}

// check lists what the API server holds and asks s the A of every
// service's name, again every second until every answer is the expected
// one or two minutes have passed, and keeps the last pass's mismatches.
func (r *soakRun) check(ctx context.Context, cl *cluster, s *server, services int) error {
	list, err := cl.imports.List(ctx, metav1.ListOptions{})
	ess, eerr := cl.kube.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{LabelSelector: mcsv1beta1.LabelServiceName})
	if err = errors.Join(err, eerr); err != nil {
		return err
	}
	want, err := expectedA(list.Items, ess.Items)
	if err != nil {
		return err
	}
	r.checked = services
	logf("soak: the API server holds %d ServiceImports and %d EndpointSlices; %d of %d names should answer", len(list.Items), len(ess.Items), len(want), r.checked)
	for start := time.Now(); ; time.Sleep(time.Second) {
		r.bad = make([]string, r.checked)
		err := parallel(ctx, 8, r.checked, func(ctx context.Context, i int) error {
			name := cl.fx.name(i)
			if m, err := harness.Exchange(s.Addr(), name, dns.TypeA); err != nil {
				r.bad[i] = name + ": " + err.Error()
			} else if d := answerMismatch(m, name, want[name]); d != "" {
				r.bad[i] = name + ": " + d
			}
			return nil
		})
		r.bad, r.took = slices.DeleteFunc(r.bad, func(b string) bool { return b == "" }), time.Since(start)
		if err != nil || len(r.bad) == 0 || r.took > 2*time.Minute {
			return err
		}
	}
}

func soakVerdicts(first, last soakSample) (vs []float64) {
	for k := range first.Values {
		vs = append(vs, last.Values[k]/first.Values[k]-1)
	}
	return vs
}

// soakChart is every figure against the writes, as a percentage of its
// value after the first -soak-every writes, between grey lines at ±5%.
func (r *report) soakChart() (*plot.Plot, error) {
	samples := r.soak.samples
	ref, last := samples[1], float64(samples[len(samples)-1].Updates)/1000
	p := newPlot("One replica during the long churn, after a GC (grey: ±5%)", "writes (thousands)", fmt.Sprintf("%% of its value at %d writes", ref.Updates))
	p.Legend.Left = true
	grey := color.Gray{Y: 0xaa}
	err := errors.Join(addLine(p, "", grey, plotter.XYs{{X: 0, Y: 95}, {X: last, Y: 95}}), addLine(p, "", grey, plotter.XYs{{X: 0, Y: 105}, {X: last, Y: 105}}))
	colors := []color.Color{serverColor["ours"], serverColor["stock"], color.RGBA{0x75, 0x70, 0xb3, 0xff},
		color.RGBA{0xe7, 0x29, 0x8a, 0xff}, color.RGBA{0x66, 0xa6, 0x1e, 0xff}, color.RGBA{0xa6, 0x76, 0x1d, 0xff}}
	for k, name := range soakFigures {
		var pts plotter.XYs
		for _, s := range samples {
			pts = append(pts, plotter.XY{X: float64(s.Updates) / 1000, Y: 100 * s.Values[k] / ref.Values[k]})
		}
		err = errors.Join(err, addLine(p, name, colors[k], pts))
	}
	p.Y.Max = 2 * max(p.Y.Max, 110) // room for the legend above the lines
	return p, err
}
