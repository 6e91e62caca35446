// Command bench measures the project's CoreDNS against stock CoreDNS v1.15.0
// and the whoami floor, each against a real kube-apiserver: the QPS of three
// query mixes, run side by side in alternating rounds, with every server
// pinned to one CPU (GOMAXPROCS=1) and dnsperf pinned to another. With -scale
// it also measures memory and time to ready at larger numbers of imports,
// and how fast a change written to the API server shows in DNS answers; with
// -soak, one replica of ours through a long churn of writes.
//
// Run it through hack/bench.sh, which builds the binaries it needs (stock
// CoreDNS v1.15.0 from the nested module hack/stock); docs/benchmarks.md
// explains the method and shows a run.
//
// Files: main.go (the control planes, the servers and their readings),
// fixture.go (the objects), dnsperf.go (the QPS rounds), scale.go (-scale,
// propagation included), incluster.go (-in-cluster), soak.go (-soak) and
// report.go (tables and charts).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/clustersetdns/multicluster/cache"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

type config struct {
	repo, out, ours, stock           string
	imports, namespaces              int
	clusters, endpoints              int
	rounds                           int
	duration, settle, loadedFor      time.Duration
	serverCPU, loadCPU               string
	clients, outstanding, queryLines int
	seed                             uint64
	qps, scale, inCluster            bool
	scaleImports                     []int // increasing
	propRate, propESRate, replicas   int
	starts                           int
	propDuration, quietWait          time.Duration
	markdown, charts, stockStorage   string
	pprof                            bool
	quiet                            float64
	soak, soakServices               int // writes of -soak, 0: off
	soakWriters, soakEvery           int
}

func main() {
	var c config
	flag.StringVar(&c.repo, "repo", "", "the plugin's checkout (default: found from the working directory)")
	flag.StringVar(&c.out, "out", "", "directory for Corefiles, query files, logs and results (default <repo>/.cache/bench/run-<time>)")
	flag.StringVar(&c.ours, "ours", "", "the project's CoreDNS binary (built from ./cmd/coredns)")
	flag.StringVar(&c.stock, "stock", "", "stock CoreDNS v1.15.0 binary")
	flag.IntVar(&c.imports, "imports", 2000, "ClusterSetIP ServiceImports in the QPS fixture")
	flag.IntVar(&c.namespaces, "namespaces", 20, "namespaces the imports are spread over")
	flag.IntVar(&c.clusters, "clusters", 3, "clusters of the headless import")
	flag.IntVar(&c.endpoints, "endpoints", 40, "ready endpoints per cluster of the headless import")
	flag.IntVar(&c.rounds, "rounds", 5, "alternating rounds (floor, stock, ours) per mix")
	flag.DurationVar(&c.duration, "duration", 10*time.Second, "length of one dnsperf run")
	flag.StringVar(&c.serverCPU, "server-cpu", "1", "CPU the DNS servers are pinned to (taskset -c)")
	flag.StringVar(&c.loadCPU, "load-cpu", "0", "CPU dnsperf, this program and the control planes are pinned to while measuring")
	flag.IntVar(&c.clients, "clients", 4, "dnsperf -c: client sockets")
	flag.IntVar(&c.outstanding, "outstanding", 200, "dnsperf -q: queries in flight")
	flag.IntVar(&c.queryLines, "query-lines", 50000, "lines of each random query file")
	flag.Uint64Var(&c.seed, "seed", 1645, "seed of the random query files")
	flag.BoolVar(&c.qps, "qps", true, "measure QPS")
	flag.BoolVar(&c.scale, "scale", false, "also measure memory (RSS, Go heap) and time to ready at each -scale-imports, and propagation latency at the largest")
	flag.BoolVar(&c.inCluster, "in-cluster", false, "-scale measures, at each -scale-imports, only what stock's multicluster option and ours add to a server that also has `kubernetes cluster.local`, all four on stock's control plane (-stock-storage), -starts times in turn")
	scaleImports := flag.String("scale-imports", "10000,100000", "comma-separated numbers of ClusterSetIP imports at which -scale measures memory and time to ready; propagation at the largest")
	flag.DurationVar(&c.settle, "settle", 5*time.Second, "wait after ready before reading memory again (-scale)")
	flag.DurationVar(&c.loadedFor, "loaded-for", 60*time.Second, "dnsperf A queries for this long at the largest number of imports, then read memory again (-scale; 0: not measured)")
	flag.IntVar(&c.propRate, "prop-rate", 100, "ServiceImport writes per second for the propagation measurement (-scale)")
	flag.IntVar(&c.propESRate, "prop-es-rate", 100, "EndpointSlice writes per second for the propagation measurement, beside the ServiceImport writes (-scale)")
	flag.IntVar(&c.starts, "starts", 1, "at the largest -scale-imports, start stock and ours this many times in turn, each alone, read ours' imports as bytes in one LIST and one WatchList (the floors) as often, and give the medians (-scale; with -in-cluster: rounds of its four servers at every size)")
	flag.IntVar(&c.replicas, "replicas", 20, "replicas of each server started together at the largest -scale-imports, to measure the API server's load (0: none)")
	flag.DurationVar(&c.propDuration, "prop-duration", 20*time.Second, "how long to write for the propagation measurement (-scale)")
	flag.Float64Var(&c.quiet, "quiet", 0.2, "before each run, wait until others use at most this share of the servers' CPU ...")
	flag.DurationVar(&c.quietWait, "quiet-wait", 5*time.Second, "... but no longer than this")
	flag.BoolVar(&c.pprof, "pprof", false, "add the pprof plugin to every server and save a CPU profile of each server's runs of round 1 (-in-cluster: of each server's writes)")
	flag.StringVar(&c.stockStorage, "stock-storage", "v1alpha1", "storage version of the ServiceImport CRD in stock's control plane")
	flag.IntVar(&c.soak, "soak", 0, "run the long churn alone instead: this many ServiceImport and EndpointSlice writes against one replica of ours, sampling its memory, goroutines and descriptors, then checking every answer (0: off)")
	flag.IntVar(&c.soakServices, "soak-services", 3000, "services of -soak's working set (a multiple of 10), with two EndpointSlices each")
	flag.IntVar(&c.soakWriters, "soak-writers", 16, "concurrent writers of -soak")
	flag.IntVar(&c.soakEvery, "soak-every", 100000, "-soak samples after every this many writes")
	flag.StringVar(&c.markdown, "markdown", "", "also write the results as Markdown to this file (default <out>/results.md)")
	flag.StringVar(&c.charts, "charts", "", "write the charts (SVG) into this directory; the Markdown embeds them (default <out>)")
	flag.Parse()
	var err error
	if c.scaleImports, err = parseSizes(*scaleImports, c.imports); err == nil {
		err = run(c)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseSizes parses -scale-imports: each at least the QPS fixture's, as
// imports are only ever added.
func parseSizes(list string, least int) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		switch {
		case err != nil:
			return nil, fmt.Errorf("-scale-imports: %w", err)
		case n < least || n <= 0:
			return nil, fmt.Errorf("-scale-imports: %d is fewer than the %d imports of the fixture (-imports)", n, least)
		case n > 1<<20:
			return nil, fmt.Errorf("-scale-imports: %d: at most %d imports have distinct addresses", n, 1<<20)
		}
		sizes = append(sizes, n)
	}
	slices.Sort(sizes)
	return slices.Compact(sizes), nil
}

var begin = time.Now()

func logf(format string, args ...any) {
	fmt.Printf("[%5.0fs] %s\n", time.Since(begin).Seconds(), fmt.Sprintf(format, args...))
}

func run(c config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := c.prepare(); err != nil {
		return err
	}
	rep := &report{cfg: c, started: time.Now()}
	rep.machine()
	if c.soak > 0 {
		return runSoak(ctx, c, rep)
	}
	// Two control planes, so that each server lists exactly its own objects:
	// stock's stores v1alpha1, as the API server prunes every object to the
	// storage version's schema.
	logf("starting two control planes (etcd and kube-apiserver from %s)", filepath.Join(c.repo, ".cache", "bin"))
	fx := fixture{namespaces: c.namespaces, clusters: c.clusters, endpoints: c.endpoints}
	cls, err := c.startPlanes(ctx, fx, []string{"ours (v1alpha2)", "stock (v1alpha1)"}, cache.V1alpha2, cache.V1alpha1)
	defer stopPlanes(cls)
	if err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	start := time.Now()
	if err := parallel(setupCtx, 2, 2, func(ctx context.Context, k int) error { return cls[k].load(ctx, c.imports) }); err != nil {
		return err
	}
	logf("fixture: %d ClusterSetIP imports and 1 headless import (%d×%d endpoints) in each of 2 control planes in %.1fs",
		c.imports, fx.clusters, fx.endpoints, time.Since(start).Seconds())
	sides, err := c.sides(setupCtx, cls[0], cls[1])
	if err == nil && c.qps {
		err = runQPS(ctx, c, rep, fx, sides)
	}
	if err == nil && c.scale {
		err = runScale(ctx, c, rep, sides[1:])
	}
	if err != nil {
		return err
	}
	return rep.write()
}

func (c *config) prepare() error {
	var err error
	if c.repo == "" {
		if c.repo, err = harness.RepoRoot(); err != nil {
			return err
		}
	}
	for _, tool := range []string{"dnsperf", "dig", "taskset"} {
		if _, err := exec.LookPath(tool); err != nil {
			return fmt.Errorf("%s is not installed (hack/bench.sh installs it)", tool)
		}
	}
	for _, b := range []*string{&c.ours, &c.stock} {
		if _, err := os.Stat(*b); *b == "" || err != nil {
			return fmt.Errorf("-ours and -stock must name binaries: %q: %v", *b, err)
		}
		*b, _ = filepath.Abs(*b)
	}
	if c.inCluster && !c.scale {
		return errors.New("-in-cluster goes with -scale")
	}
	c.soakServices = max(20, c.soakServices/10*10)
	c.soakWriters, c.soakEvery = max(1, min(c.soakWriters, c.soakServices)), max(1, c.soakEvery)
	c.out = cmp.Or(c.out, filepath.Join(c.repo, ".cache", "bench", "run-"+time.Now().Format("20060102-150405")))
	c.markdown = cmp.Or(c.markdown, filepath.Join(c.out, "results.md"))
	c.charts, err = filepath.Abs(cmp.Or(c.charts, c.out)) // so that the Markdown's links can be relative
	return errors.Join(err, os.MkdirAll(c.out, 0o755), os.MkdirAll(c.charts, 0o755))
}

// startPlanes starts a control plane per ServiceImport version at once, with
// deploy/crds' CRD serving v1alpha2 alone, or storing -stock-storage.
func (c *config) startPlanes(ctx context.Context, fx fixture, names []string, versions ...string) ([]*cluster, error) {
	cls := make([]*cluster, len(versions))
	err := parallel(ctx, len(versions), len(versions), func(ctx context.Context, k int) error {
		crd, err := harness.ServiceImportCRD(c.repo, "deploy/crds")
		if err == nil && versions[k] == cache.V1alpha2 {
			err = harness.KeepVersions(crd, cache.V1alpha2)
		} else if err == nil {
			err = harness.SetStorage(crd, c.stockStorage)
		}
		var env *harness.Env
		if err == nil {
			env, err = harness.Start(harness.Options{Repo: c.repo, CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
		}
		if err != nil {
			return err
		}
		if cls[k], err = newCluster(names[k], versions[k], env, fx); err == nil {
			logf("control plane %s up at %s", names[k], env.APIServerURL())
		}
		return err
	})
	return cls, err
}

func stopPlanes(cls []*cluster) {
	for _, cl := range cls {
		if cl != nil {
			_ = cl.env.Stop()
		}
	}
}

type side struct {
	name, label, bin, plugin string
	cl                       *cluster
	zones                    []string // the server block's keys; clusterset.local when nil
}

// sides are the floor, stock and ours. Ours runs as its least-privilege
// identity (deploy/rbac.yaml); stock needs more: the admin.
func (c *config) sides(ctx context.Context, ours, stock *cluster) ([]side, error) {
	id, err := ours.env.PluginIdentity(ctx)
	if err != nil {
		return nil, err
	}
	admin := adminKubeconfig(stock)
	if err := stock.env.WriteAdminKubeconfig(admin); err != nil {
		return nil, err
	}
	return []side{{"floor", "floor: stock whoami", c.stock, "whoami", nil, nil},
		{"stock", "stock v1.15.0 kubernetes", c.stock, kubernetesBlock(admin, true, zone), stock, nil},
		{"ours", "ours multicluster", c.ours, harness.MulticlusterBlock(id.Kubeconfig), ours, nil}}, nil
}

// adminKubeconfig is where sides writes cl's admin kubeconfig, which stock's
// kubernetes plugin reads.
func adminKubeconfig(cl *cluster) string { return filepath.Join(cl.env.TempDir(), "admin.kubeconfig") }

// kubernetesBlock is a kubernetes plugin block for zones that reads through
// kubeconfig, with the multicluster option for clusterset.local if mcs.
func kubernetesBlock(kubeconfig string, mcs bool, zones ...string) string {
	b := fmt.Sprintf("kubernetes %s {\n\tkubeconfig %s\n", strings.Join(zones, " "), kubeconfig)
	if mcs {
		b += "\tmulticluster " + zone + "\n"
	}
	return b + "}\n"
}

type server struct {
	*harness.CoreDNS
	Name, Label string
	AtReady     mem // its memory right after ready
}

type mem = harness.Mem

// startServer runs sd's server, pinned to -server-cpu with GOMAXPROCS=1,
// with the prometheus plugin if metrics (the QPS servers run without: it
// counts every query), and waits until it is ready: at 100,000 imports, up
// to minutes on one CPU.
func (c *config) startServer(sd side, suffix string, metrics bool) (*server, error) {
	s := &server{Name: sd.name + suffix, Label: sd.label}
	logFile, err := os.Create(filepath.Join(c.out, s.Name+".log"))
	if err != nil {
		return nil, err
	}
	// Not closed: the harness copies the server's output into it until the
	// server ends; closed, the server's next line kills it with SIGPIPE.
	s.CoreDNS, err = harness.StartCoreDNS(sd.bin, harness.CoreDNSOptions{
		Plugins: sd.plugin, Zones: sd.zones, NoLog: true, Metrics: metrics, Pprof: c.pprof || metrics, ReadyWithin: 600 * time.Second,
		Wrap: []string{"taskset", "-c", c.serverCPU}, Env: []string{"GOMAXPROCS=1"}, Output: logFile,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", s.Name, err)
	}
	if err := os.WriteFile(filepath.Join(c.out, s.Name+".Corefile"), []byte(s.Corefile), 0o644); err != nil {
		s.Stop()
		return nil, err
	}
	s.AtReady, _ = s.Memory()
	return s, nil
}

func (s *server) pprof(path string, d time.Duration) ([]byte, error) {
	resp, err := (&http.Client{Timeout: d}).Get(s.PprofURL + path)
	if err != nil {
		return nil, fmt.Errorf("%s: pprof: %w", s.Name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s%s: %s", s.PprofURL, path, resp.Status)
	}
	return data, err
}

// collectGarbage has the server run runtime.GC, as pprof's heap?gc=1 does.
func (s *server) collectGarbage() error {
	_, err := s.pprof("/heap?gc=1", 60*time.Second)
	return err
}

// goMem is what the prometheus plugin exports of the Go runtime (bytes).
type goMem struct{ HeapInuse, HeapSys, Alloc, Goroutines, FDs int64 }

// reading is a server's memory, its Go heap, and its Go heap after a GC:
// Live.Alloc is what its live objects take.
type reading struct {
	mem
	Heap, Live goMem
}

func (s *server) Memory() (mem, error) { return harness.ProcMemory(s.PID()) }

func (s *server) read() (r reading, err error) {
	var errs [4]error
	r.mem, errs[0] = s.Memory()
	r.Heap, errs[1] = s.goMemory()
	errs[2] = s.collectGarbage()
	r.Live, errs[3] = s.goMemory()
	if err = errors.Join(errs[:]...); err != nil {
		err = fmt.Errorf("%s: %w", s.Name, err)
	}
	return r, err
}

func (s *server) goMemory() (m goMem, err error) {
	metrics, err := harness.Scrape(s.MetricsURL)
	for name, p := range map[string]*int64{"go_memstats_heap_inuse_bytes": &m.HeapInuse, "go_memstats_heap_sys_bytes": &m.HeapSys,
		"go_memstats_alloc_bytes": &m.Alloc, "go_goroutines": &m.Goroutines, "process_open_fds": &m.FDs} {
		var v float64
		if err == nil {
			v, err = metrics.Value(name)
		}
		*p = int64(v)
	}
	return m, err
}

// pinPlanes pins every thread of the control planes and of this process to
// cpus, "": every online CPU.
func pinPlanes(cpus string) error {
	if online, _ := os.ReadFile("/sys/devices/system/cpu/online"); cpus == "" {
		cpus = cmp.Or(strings.TrimSpace(string(online)), "0-1")
	}
	pids, err := harness.ChildrenNamed("etcd", "kube-apiserver")
	for _, pid := range append(pids, os.Getpid()) {
		if out, terr := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput(); terr != nil {
			err = errors.Join(err, fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, terr, out))
		}
	}
	return err
}

// cpuSpan measures how busy cpu ("": every CPU) was over a span, and the
// CPU time of pids meanwhile; read and seconds are harness.ReadCPUTime and
// harness.CPUSeconds but in tests.
type cpuSpan struct {
	cpu     string
	pids    []int
	at      harness.CPUTime
	own     float64 // CPU seconds of pids at the start
	read    func(cpu string) (harness.CPUTime, error)
	seconds func(pid int) (float64, error)
}

func newSpan(cpu string, pids ...int) *cpuSpan {
	s := &cpuSpan{cpu: cpu, pids: pids, read: harness.ReadCPUTime, seconds: harness.CPUSeconds}
	s.at, _ = s.read(cpu)
	s.own = s.secondsOf(pids)
	return s
}

// othersSpan is a span of every CPU, to tell what others than this program,
// its control planes and servers took.
func othersSpan(pids ...int) *cpuSpan {
	planes, _ := harness.ChildrenNamed("etcd", "kube-apiserver")
	return newSpan("", append(append([]int{os.Getpid()}, planes...), pids...)...)
}

// end ends the span: the CPU's busy and total time, and the CPU time of
// pids and of started (servers started within it, counted whole).
func (s *cpuSpan) end(started ...int) (busy, total, own float64, ok bool) {
	c, err := s.read(s.cpu)
	own = s.secondsOf(s.pids) - s.own + s.secondsOf(started)
	return c.Busy - s.at.Busy, c.Total - s.at.Total, own, err == nil && s.at.Total != 0 && c.Total != s.at.Total
}

// others ends the span: the share of the CPU that others than pids and
// started took, -1 if unknown.
func (s *cpuSpan) others(started ...int) float64 {
	busy, total, own, ok := s.end(started...)
	return cond(ok, max(0, (busy-own)/total), -1)
}

func (s *cpuSpan) secondsOf(pids []int) float64 {
	return sum(pids, func(pid int) float64 { t, _ := s.seconds(pid); return t })
}

// waitQuiet waits, at most within, until the busy share of -server-cpu over
// half a second is at most -quiet (the servers on it are idle between runs,
// so what is busy is someone else).
func (c *config) waitQuiet(ctx context.Context, within time.Duration) {
	for start := time.Now(); time.Since(start) < within && ctx.Err() == nil; {
		sp := newSpan(c.serverCPU)
		time.Sleep(500 * time.Millisecond)
		if busy, total, _, ok := sp.end(); !ok || busy/total <= c.quiet {
			return
		}
	}
}

// waitStart waits before a server's start whose time to ready is measured:
// at most a minute until the control planes (etcd and kube-apiserver) take
// at most a tenth of a CPU over a second, then as waitQuiet. A start is
// bounded by kube-apiserver's stream, and after 100,000 creates, or another
// server's writes and queries, kube-apiserver stays busy for many seconds
// on its own: a start then took 16 to 21 s, and 9 s once it was idle
// (2026-12-07).
func (c *config) waitStart(ctx context.Context) {
	for start := time.Now(); ctx.Err() == nil; {
		planes, _ := harness.ChildrenNamed("etcd", "kube-apiserver")
		sp := newSpan("", planes...)
		time.Sleep(time.Second)
		if _, _, own, ok := sp.end(); ok && own <= 0.1 {
			break
		} else if time.Since(start) >= time.Minute {
			logf("the control planes were still busy after a minute")
			break
		}
	}
	c.waitQuiet(ctx, c.quietWait)
}

// parallel calls f(ctx, 0..n-1) from at most workers goroutines, and none
// after the first error.
func parallel(ctx context.Context, workers, n int, f func(ctx context.Context, i int) error) error {
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for i := 0; i < n && ctx.Err() == nil; i++ {
		g.Go(func() error { return f(ctx, i) })
	}
	return g.Wait()
}

func cond[T any](c bool, a, b T) T {
	if c {
		return a
	}
	return b
}

func sum[R any, N int | float64](runs []R, f func(R) N) (n N) {
	for _, x := range runs {
		n += f(x)
	}
	return n
}
