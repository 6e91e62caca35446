// Command bench measures the project's CoreDNS against stock CoreDNS v1.15.0
// and the whoami floor, each against a real kube-apiserver: the QPS of three
// query mixes, run side by side in alternating rounds, with every server
// pinned to one CPU (GOMAXPROCS=1) and dnsperf pinned to another. With -scale
// it also measures memory and time to ready at larger numbers of imports,
// and how fast a change written to the API server shows in DNS answers.
//
// Run it through hack/bench.sh, which builds the binaries it needs;
// docs/benchmarks.md explains the method and shows a run. It lives in the
// test/e2e module, beside the harness it shares with the e2e tests; stock
// CoreDNS v1.15.0 is pinned by the nested module hack/stock, which
// hack/stock.sh builds.
//
// Files: main.go (the flags and the run: QPS rounds, then -scale or -soak),
// server.go (one CoreDNS process, pinned, run by the e2e harness, and its
// Go heap from the harness's scrape), fixture.go (the objects, built by the
// harness, written to the control planes), check.go (a dig per mix and
// server before measuring), dnsperf.go (the query files and dnsperf's runs,
// parsed), proc.go (the other processes' share of the CPUs, from the
// harness's procfs readings), scale.go (-scale: memory, time to ready and
// propagation of a write to the answers, timed by the harness's
// AnswerWatcher), replicas.go (replicas started together against one API
// server), soak.go (-soak: the long churn and the check of every answer at
// its end), report.go (the tables, as Markdown) and charts.go (the SVG
// charts, with gonum/plot).
package main

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

type config struct {
	repo, out            string
	ours, stock          string
	imports              int
	namespaces           int
	clusters, endpoints  int
	rounds               int
	duration             time.Duration
	serverCPU, loadCPU   string
	clients, outstanding int
	queryLines           int
	seed                 uint64
	qps                  bool
	scale                bool
	scaleImports         []int // increasing
	settle               time.Duration
	loadedFor            time.Duration
	propRate             int
	propDuration         time.Duration
	markdown             string
	charts               string
	propESRate           int
	replicas             int
	stockStorage         string
	quiet                float64
	quietWait            time.Duration
	soak                 int // writes of -soak, 0: off
	soakServices         int
	soakWriters          int
	soakEvery            int
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
	scaleImports := flag.String("scale-imports", "10000,100000", "comma-separated numbers of ClusterSetIP imports at which -scale measures memory and time to ready; propagation at the largest")
	flag.DurationVar(&c.settle, "settle", 5*time.Second, "wait after ready before reading memory again (-scale)")
	flag.DurationVar(&c.loadedFor, "loaded-for", 60*time.Second, "dnsperf A queries for this long at the largest number of imports, then read memory again (-scale; 0: not measured)")
	flag.IntVar(&c.propRate, "prop-rate", 100, "ServiceImport writes per second for the propagation measurement (-scale)")
	flag.IntVar(&c.propESRate, "prop-es-rate", 100, "EndpointSlice writes per second for the propagation measurement, beside the ServiceImport writes (-scale)")
	flag.IntVar(&c.replicas, "replicas", 20, "replicas of each server started together at the largest -scale-imports, to measure the API server's load (0: none)")
	flag.DurationVar(&c.propDuration, "prop-duration", 20*time.Second, "how long to write for the propagation measurement (-scale)")
	flag.Float64Var(&c.quiet, "quiet", 0.2, "before each run, wait until others use at most this share of the servers' CPU ...")
	flag.DurationVar(&c.quietWait, "quiet-wait", 5*time.Second, "... but no longer than this")
	flag.BoolVar(&withPprof, "pprof", false, "add the pprof plugin to every server and save a CPU profile of each server's runs of round 1")
	flag.StringVar(&c.stockStorage, "stock-storage", "v1alpha1", "storage version of the ServiceImport CRD in stock's control plane")
	flag.IntVar(&c.soak, "soak", 0, "run the long churn alone instead: this many ServiceImport and EndpointSlice writes against one replica of ours, sampling its memory, goroutines and descriptors, then checking every answer (0: off)")
	flag.IntVar(&c.soakServices, "soak-services", 3000, "services of -soak's working set (a multiple of 10), with two EndpointSlices each")
	flag.IntVar(&c.soakWriters, "soak-writers", 16, "concurrent writers of -soak")
	flag.IntVar(&c.soakEvery, "soak-every", 100000, "-soak samples after every this many writes")
	flag.StringVar(&c.markdown, "markdown", "", "also write the results as Markdown to this file (default <out>/results.md)")
	flag.StringVar(&c.charts, "charts", "", "write the charts (SVG) into this directory; the Markdown embeds them (default <out>)")
	flag.Parse()
	var err error
	if c.scaleImports, err = parseSizes(*scaleImports, c.imports); err != nil {
		fmt.Fprintln(os.Stderr, "bench: -scale-imports:", err)
		os.Exit(2)
	}
	if err := run(c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// parseSizes parses a comma-separated list of import counts, each at least
// the QPS fixture's (the imports are only ever added to), into increasing
// order without repeats.
func parseSizes(list string, least int) ([]int, error) {
	var sizes []int
	for f := range strings.SplitSeq(list, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil {
			return nil, err
		}
		if n < least || n <= 0 {
			return nil, fmt.Errorf("%d is fewer than the %d imports of the fixture (-imports)", n, least)
		}
		if n > 1<<20 {
			return nil, fmt.Errorf("%d: at most %d imports have distinct addresses", n, 1<<20)
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
	if c.soak > 0 {
		return runSoak(ctx, c)
	}
	rep := &report{cfg: c, started: time.Now()}
	rep.machine()

	// Two control planes, so that each server lists exactly its own objects:
	// the v1alpha2 fixture for ours, the same names in v1alpha1 for stock.
	// Both install deploy/crds' CRD: ours with v1alpha2 alone, so that it
	// watches one version as stock does, stock with v1alpha1 as the storage
	// version.
	logf("starting two control planes (etcd and kube-apiserver from %s)", filepath.Join(c.repo, ".cache", "bin"))
	fx := fixture{namespaces: c.namespaces, clusters: c.clusters, endpoints: c.endpoints}
	cls, stopPlanes, err := startPlanes(ctx, c.repo, fx,
		plane{"ours (v1alpha2)", v1alpha2, "v1alpha2", true}, plane{"stock (v1alpha1)", v1alpha1, c.stockStorage, false})
	defer stopPlanes()
	if err != nil {
		return err
	}
	oursCl, stockCl := cls[0], cls[1]
	logf("control planes up: %s (v1alpha2 objects, for ours), %s (v1alpha1 objects, for stock)",
		oursCl.env.APIServerURL(), stockCl.env.APIServerURL())
	setupCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := loadFixture(setupCtx, cls, c.imports); err != nil {
		return err
	}
	starters, err := c.starters(setupCtx, oursCl.env, stockCl.env)
	if err != nil {
		return err
	}
	if c.qps {
		if err := runQPS(ctx, c, rep, fx, starters); err != nil {
			return err
		}
	}
	if c.scale {
		if err := runScale(ctx, c, rep, fx, starters, oursCl, stockCl); err != nil {
			return err
		}
	}
	rep.finished = time.Now()
	return c.writeResults(rep)
}

// prepare checks the tools and binaries and settles the output paths.
func (c *config) prepare() error {
	if c.repo == "" {
		var err error
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
		if *b == "" {
			return fmt.Errorf("-ours and -stock are required")
		}
		if _, err := os.Stat(*b); err != nil {
			return err
		}
		var err error
		if *b, err = filepath.Abs(*b); err != nil {
			return err
		}
	}
	if c.out == "" {
		c.out = filepath.Join(c.repo, ".cache", "bench", "run-"+time.Now().Format("20060102-150405"))
	}
	c.markdown = cmp.Or(c.markdown, filepath.Join(c.out, "results.md"))
	// Absolute, so that the Markdown's links to the charts can be made
	// relative to it.
	var err error
	if c.charts, err = filepath.Abs(cmp.Or(c.charts, c.out)); err != nil {
		return err
	}
	return errors.Join(os.MkdirAll(c.out, 0o755), os.MkdirAll(c.charts, 0o755))
}

// plane is a control plane to start: its name, the ServiceImport version
// its objects are written in, and its CRD's storage version (alone: the only
// one served).
type plane struct {
	name    string
	version version
	storage string
	alone   bool
}

// startPlanes starts the control planes at once, each with deploy/crds'
// ServiceImport CRD as its plane says, and unthrottled clients for each.
// stop stops them all, after an error too.
func startPlanes(ctx context.Context, repo string, fx fixture, planes ...plane) (cls []*cluster, stop func(), err error) {
	envs := make([]*harness.Env, len(planes))
	stop = func() {
		for _, e := range envs {
			if e != nil {
				_ = e.Stop()
			}
		}
	}
	err = parallel(ctx, len(planes), len(planes), func(ctx context.Context, k int) error {
		crd, err := serviceImportCRD(repo, planes[k].storage, planes[k].alone)
		if err != nil {
			return err
		}
		envs[k], err = harness.Start(harness.Options{Repo: repo, CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
		return err
	})
	for k, p := range planes {
		if err != nil {
			break
		}
		var cl *cluster
		cl, err = newCluster(p.name, p.version, envs[k], fx)
		cls = append(cls, cl)
	}
	return cls, stop, err
}

// starters start the floor, stock and ours on their control planes. Ours
// runs as its least-privilege identity (deploy/rbac.yaml); stock needs
// Services, EndpointSlices and Namespaces as well: the admin. A starter's
// suffix names the server's files; metrics adds the prometheus plugin (the
// scale servers, for their Go heap).
func (c *config) starters(ctx context.Context, ours, stock *harness.Env) (map[string]starter, error) {
	id, err := ours.PluginIdentity(ctx)
	if err != nil {
		return nil, err
	}
	adminKubeconfig := filepath.Join(stock.TempDir(), "admin.kubeconfig")
	if err := stock.WriteAdminKubeconfig(adminKubeconfig); err != nil {
		return nil, err
	}
	plugins := map[string]string{
		"floor": "whoami",
		"stock": fmt.Sprintf("kubernetes %s {\n\tkubeconfig %s\n\tmulticluster %s\n}\n", zone, adminKubeconfig, zone),
		"ours":  harness.MulticlusterBlock(id.Kubeconfig),
	}
	labels := map[string]string{"floor": "floor: stock whoami", "stock": "stock v1.15.0 kubernetes", "ours": "ours multicluster"}
	starters := map[string]starter{}
	for name, plugin := range plugins {
		bin := c.stock
		if name == "ours" {
			bin = c.ours
		}
		starters[name] = func(sfx string, metrics bool) (*server, error) {
			return startServer(name+sfx, labels[name], bin, c.out, c.serverCPU, plugin, metrics)
		}
	}
	return starters, nil
}

// writeResults prints the report, draws its charts and writes it as
// Markdown, with links to the charts.
func (c *config) writeResults(rep *report) error {
	text := rep.String()
	fmt.Println()
	fmt.Print(text)
	charts, err := rep.charts(c.charts)
	if err != nil {
		return err
	}
	md := rep.Markdown()
	for _, name := range charts {
		rel, err := filepath.Rel(filepath.Dir(c.markdown), filepath.Join(c.charts, name))
		if err != nil {
			rel = filepath.Join(c.charts, name)
		}
		md += fmt.Sprintf("\n![%s](%s)\n", strings.TrimSuffix(name, ".svg"), filepath.ToSlash(rel))
	}
	if err := os.WriteFile(c.markdown, []byte(md), 0o644); err != nil {
		return err
	}
	logf("results written to %s, charts %v to %s; logs, Corefiles and query files in %s", c.markdown, charts, c.charts, c.out)
	return nil
}

// serviceImportCRD is deploy/crds' ServiceImport CRD, which serves v1alpha1,
// v1beta1 and v1alpha2 with conversion strategy None, with version the
// storage version (the only one served when alone is set). Stock's control
// plane needs v1alpha1 there: the API server prunes every object against the
// storage version's schema, so a v1alpha1 object stored as v1alpha2 loses its
// spec.
func serviceImportCRD(repo, version string, alone bool) (*apiextensionsv1.CustomResourceDefinition, error) {
	crd, err := harness.ServiceImportCRD(repo, "deploy/crds")
	if err != nil {
		return nil, err
	}
	if alone {
		return crd, harness.KeepVersions(crd, version)
	}
	return crd, harness.SetStorage(crd, version)
}

// runQPS starts the floor, stock and ours one after another (each one's
// start-up alone on its CPU), checks their answers, and runs the mixes in
// alternating rounds.
func runQPS(ctx context.Context, c config, rep *report, fx fixture, starters map[string]starter) error {
	mixes, err := writeMixes(c.out, fx, c.imports, c.queryLines, c.seed)
	if err != nil {
		return err
	}
	rep.mixes = mixes
	var servers []*server
	defer func() {
		for _, s := range servers {
			s.Stop()
		}
	}()
	for _, name := range []string{"floor", "stock", "ours"} {
		s, err := starters[name]("", false)
		if err != nil {
			return err
		}
		servers = append(servers, s)
		logf("%-5s ready in %.2fs on 127.0.0.1:%d (pid %d, VmRSS %d MiB, RssAnon %d MiB)", s.Name, s.ReadyIn.Seconds(), s.Port, s.PID(), s.AtReady.RSS>>10, s.AtReady.Anon>>10)
		if name != "floor" {
			rep.footprints = append(rep.footprints, footprint{Server: s.Name, Label: s.Label, Imports: c.imports,
				ReadyIn: s.ReadyIn, AtReady: s.AtReady, Others: -1})
		}
	}
	rep.servers = servers
	floor, stock, ours := servers[0], servers[1], servers[2]
	time.Sleep(c.settle)
	for k, s := range []*server{stock, ours} {
		f := &rep.footprints[len(rep.footprints)-2+k]
		f.Settled, _ = s.Memory()
	}

	// Every server must answer each mix correctly before it is measured.
	for _, s := range servers {
		lines, err := checkServer(s, mixes, fx)
		if err != nil {
			return fmt.Errorf("check before measuring: %w", err)
		}
		for _, l := range lines {
			logf("check: %s", l)
		}
		rep.checks = append(rep.checks, lines...)
	}

	// While measuring, the servers have their CPU to themselves: dnsperf,
	// this program and both control planes go to the other one.
	if err := pinChildren(c.loadCPU, "etcd", "kube-apiserver"); err != nil {
		return err
	}
	defer func() { _ = pinChildren(allCPUs(), "etcd", "kube-apiserver") }()

	o := perfOpts{CPU: c.loadCPU, ServerCPU: c.serverCPU, Duration: c.duration, Clients: c.clients, Outstanding: c.outstanding}
	runs := 0
	for _, m := range mixes {
		if m.Floor {
			runs++
		}
		runs += 2
	}
	logf("measuring: %d rounds × %d runs of %v (%.0f to %.0f minutes)", c.rounds, runs, c.duration,
		(float64(c.rounds*runs)*(c.duration.Seconds()+1.5))/60, (float64(c.rounds*runs)*(c.duration.Seconds()+1.5+c.quietWait.Seconds()))/60)
	for round := 1; round <= c.rounds; round++ {
		for _, m := range mixes {
			for _, s := range []*server{floor, stock, ours} {
				if s == floor && !m.Floor {
					continue
				}
				if ctx.Err() != nil {
					return ctx.Err()
				}
				r, err := measureRun(ctx, c, o, round, m, s)
				if err != nil {
					return err
				}
				rep.results = append(rep.results, r)
			}
		}
	}
	return nil
}

// measureRun waits for the server's CPU to be quiet and runs dnsperf on
// it once, with a CPU profile in round 1 under -pprof.
func measureRun(ctx context.Context, c config, o perfOpts, round int, m mix, s *server) (perfResult, error) {
	waited := waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
	logPath := filepath.Join(c.out, fmt.Sprintf("dnsperf-r%d-%s-%s.txt", round, m.Key, s.Name))
	profiled := make(chan error, 1)
	if withPprof && round == 1 && o.Duration >= 4*time.Second {
		path := filepath.Join(c.out, fmt.Sprintf("cpu-%s-%s.pprof", m.Key, s.Name))
		go func() {
			time.Sleep(time.Second)
			profiled <- s.profile(o.Duration-3*time.Second, path)
		}()
	} else {
		profiled <- nil
	}
	r, err := runDnsperf(ctx, s, m, o, logPath)
	if perr := <-profiled; perr != nil {
		logf("profile of %s, %s: %v", s.Name, m.Key, perr)
	}
	if err != nil {
		return r, fmt.Errorf("round %d, %s, %s: %w", round, m.Key, s.Name, err)
	}
	r.Round, r.Waited = round, waited
	logf("round %d %-8s %-5s %7.0f qps, %7.0f per CPU-second; lost %d, non-NOERROR %d, latency %.1fms; server CPU %.0f%%, others on its CPU %.0f%%; load %s, waited %.1fs",
		round, m.Key, s.Name, r.QPS, r.PerCPU(), r.Lost, r.NonNoError(), r.AvgLatency*1000, r.ServerCPU*100, r.OtherCPU*100, r.LoadAvg, r.Waited.Seconds())
	time.Sleep(time.Second) // let the last responses drain
	return r, nil
}

// starter starts the floor, stock or ours.
type starter func(suffix string, metrics bool) (*server, error)

// runScale loads each number of -scale-imports in turn, adding to the
// imports already there, and at each starts stock, then ours, one at a time
// and alone: time to ready, memory and Go heap. At the largest number it
// also measures, with each server, the propagation of API writes to its
// answers.
func runScale(ctx context.Context, c config, rep *report, fx fixture, starters map[string]starter, oursCl, stockCl *cluster) error {
	for n, size := range c.scaleImports {
		largest := n == len(c.scaleImports)-1
		if added := size - min(oursCl.loaded, stockCl.loaded); added > 0 {
			if err := scaleLoad(ctx, c, rep, size, added, oursCl, stockCl); err != nil {
				return err
			}
		}
		var scaleMix mix
		if largest {
			var err error
			if scaleMix, err = prepareChurn(ctx, c, fx, size, oursCl, stockCl); err != nil {
				return err
			}
		}
		for _, k := range []struct {
			name string
			cl   *cluster
		}{{"stock", stockCl}, {"ours", oursCl}} {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
			sfx := fmt.Sprintf("-%d", size)
			s, f, err := measureFootprint(func() (*server, error) { return starters[k.name](sfx, true) }, fx, size, c.settle)
			if err != nil {
				return err
			}
			rep.footprints = append(rep.footprints, f)
			logf("scale: %-5s %d imports: ready in %.2fs (others took %s of the CPUs), VmRSS %d MiB at ready, %d MiB after %v (RssAnon %d MiB), peak %d MiB; Go heap in use %.0f MiB, heap sys %.0f MiB, alloc %.0f MiB, live %.0f MiB",
				k.name, size, f.ReadyIn.Seconds(), pct(f.Others), f.AtReady.RSS>>10, f.Settled.RSS>>10, c.settle, f.Settled.Anon>>10, f.Settled.HWM>>10,
				mibOf(f.Heap.HeapInuse), mibOf(f.Heap.HeapSys), mibOf(f.Heap.Alloc), mibOf(f.Heap.Live))
			if !largest {
				s.Stop()
				continue
			}
			if c.loadedFor > 0 {
				o := perfOpts{CPU: c.loadCPU, ServerCPU: c.serverCPU, Duration: c.loadedFor, Clients: c.clients, Outstanding: c.outstanding}
				if err := measureLoaded(ctx, s, scaleMix, o, filepath.Join(c.out, fmt.Sprintf("dnsperf-scale-loaded-%s.txt", s.Name)), &rep.footprints[len(rep.footprints)-1]); err != nil {
					s.Stop()
					return fmt.Errorf("memory under load, %s: %w", k.name, err)
				}
				f := rep.footprints[len(rep.footprints)-1]
				logf("scale: %-5s after %v of dnsperf (%.0f QPS): RssAnon %d MiB, Go heap in use %.0f MiB, live %.0f MiB",
					k.name, c.loadedFor, f.LoadedQPS, f.Loaded.Anon>>10, mibOf(f.LoadedHeap.HeapInuse), mibOf(f.LoadedHeap.Live))
			}
			quiet, p, err := measureChurn(ctx, c, k.cl, s, scaleMix)
			s.Stop()
			if err != nil {
				return fmt.Errorf("propagation, %s: %w", k.name, err)
			}
			rep.props = append(rep.props, quiet, p)
			logf("scale: %-5s propagation alone: p50 %.1fms p99 %.1fms (watch event to answer p50 %.1fms p99 %.1fms)", k.name, ms(quiet.P50), ms(quiet.P99), ms(quiet.AfterEventP50), ms(quiet.AfterEventP99))
			logf("scale: %-5s propagation of %d ServiceImport writes at %.0f/s and %d EndpointSlice writes at %.0f/s: p50 %.1fms p90 %.1fms p99 %.1fms max %.1fms (API ack p50 %.1fms p99 %.1fms; ack to answer p50 %.1fms p99 %.1fms; watch event to answer p50 %.1fms p99 %.1fms); %d seen; others took %s of the CPUs; A QPS idle %.0f, while writing %.0f",
				k.name, p.Writes, p.Achieved, p.ESWrites, p.ESAchieved, ms(p.P50), ms(p.P90), ms(p.P99), ms(p.Max), ms(p.AckP50), ms(p.AckP99), ms(p.AfterAckP50), ms(p.AfterAckP99), ms(p.AfterEventP50), ms(p.AfterEventP99), p.Seen, pct(p.Others), p.Idle.QPS, p.Busy.QPS)
		}
		if largest && c.replicas > 0 {
			for _, k := range []struct {
				name string
				cl   *cluster
			}{{"stock", stockCl}, {"ours", oursCl}} {
				waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
				st := starters[k.name]
				r, err := measureReplicas(ctx, k.cl, func(sfx string, metrics bool) (*server, error) { return st(fmt.Sprintf("-%d", size)+sfx, metrics) },
					k.name, k.name, c.replicas)
				if err != nil {
					// Reported, not fatal: the rest of the run stands.
					r.Err = err.Error()
					logf("scale: %d replicas of %s: %v", c.replicas, k.name, err)
				}
				rep.replicas = append(rep.replicas, r)
				logf("scale: %s", r)
			}
		}
	}
	return nil
}

// measureChurn measures, with server s at the largest number of imports, the
// propagation of writes to its answers: ServiceImports and EndpointSlices
// written at -prop-rate and -prop-es-rate a second, first alone and then
// again while dnsperf asks A queries, and its A-query throughput alone and
// during those writes. The control planes share dnsperf's CPU, as in the QPS
// runs: on two CPUs, dnsperf at full speed and the API server serving 200
// writes a second slow each other, which is why the propagation is measured
// alone too, with the control planes on both CPUs.
func measureChurn(ctx context.Context, c config, cl *cluster, s *server, m mix) (quiet, busy propagation, err error) {
	pctx, cancel := context.WithTimeout(ctx, 2*c.propDuration+4*time.Minute)
	defer cancel()
	// Alone, the control planes have both CPUs, as in propagation runs
	// before the dnsperf runs were added.
	if quiet, err = measurePropagation(pctx, cl, s, c.propRate, c.propESRate, c.propDuration, nil); err != nil {
		return quiet, busy, err
	}
	if err := pinChildren(c.loadCPU, "etcd", "kube-apiserver"); err != nil {
		return quiet, busy, err
	}
	defer func() { _ = pinChildren(allCPUs(), "etcd", "kube-apiserver") }()
	o := perfOpts{CPU: c.loadCPU, ServerCPU: c.serverCPU, Duration: c.duration, Clients: c.clients, Outstanding: c.outstanding}
	waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
	idle, err := runDnsperf(ctx, s, m, o, filepath.Join(c.out, fmt.Sprintf("dnsperf-scale-idle-%s.txt", s.Name)))
	if err != nil {
		return quiet, busy, err
	}
	var during perfResult
	busy, err = measurePropagation(pctx, cl, s, c.propRate, c.propESRate, c.propDuration, func(ctx context.Context) error {
		var err error
		during, err = runDnsperf(ctx, s, m, o, filepath.Join(c.out, fmt.Sprintf("dnsperf-scale-writes-%s.txt", s.Name)))
		return err
	})
	busy.Label += ", during dnsperf"
	busy.Idle, busy.Busy = idle, during
	return quiet, busy, err
}

// prepareChurn creates the churn imports in both control planes (when
// EndpointSlices are to be written) and writes the query file of A queries
// over size imports.
func prepareChurn(ctx context.Context, c config, fx fixture, size int, oursCl, stockCl *cluster) (mix, error) {
	if c.propESRate > 0 {
		if err := parallel(ctx, 2, 2, func(ctx context.Context, k int) error {
			return []*cluster{oursCl, stockCl}[k].createChurnHeadless(ctx)
		}); err != nil {
			return mix{}, fmt.Errorf("churn imports: %w", err)
		}
	}
	dir := filepath.Join(c.out, "scale")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return mix{}, err
	}
	mixes, err := writeMixes(dir, fx, size, c.queryLines, c.seed)
	if err != nil {
		return mix{}, err
	}
	return mixes[0], nil
}

// scaleLoad adds imports to both control planes at once until each has size,
// and waits (bounded) for the servers' CPU to be quiet again.
func scaleLoad(ctx context.Context, c config, rep *report, size, added int, oursCl, stockCl *cluster) error {
	// Creating a ServiceImport takes about 4 ms of CPU here (API server,
	// etcd and client; both planes share 2 CPUs, about 260 creates per
	// second each): the bound is generous.
	within := 10*time.Minute + time.Duration(added)*20*time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, within)
	defer cancel()
	start := time.Now()
	logf("scale: adding %d ClusterSetIP imports to each control plane (32 clients each; at most %v)", added, within.Round(time.Minute))
	err := parallel(ctx, 2, 2, func(ctx context.Context, k int) error {
		cl := []*cluster{oursCl, stockCl}[k]
		if err := cl.createNamespaces(ctx); err != nil {
			return fmt.Errorf("%s: namespaces: %w", cl.name, err)
		}
		if err := cl.createImports(ctx, size, 32); err != nil {
			return fmt.Errorf("%s: %w", cl.name, err)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("loading %d imports: %w", size, err)
	}
	l := load{Imports: size, Added: added, Took: time.Since(start)}
	rep.loads = append(rep.loads, l)
	logf("scale: %s", l)
	// The API servers may still be busy with what was written.
	waitQuiet(ctx, c.serverCPU, c.quiet, 30*time.Second)
	return nil
}

// pct renders a share of the CPUs, "-" when unknown (negative).
func pct(share float64) string {
	if share < 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", share*100)
}

func mibOf(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// allCPUs is the CPU list of every online CPU, to undo pinning.
func allCPUs() string {
	data, err := os.ReadFile("/sys/devices/system/cpu/online")
	if err != nil {
		return "0-1"
	}
	return strings.TrimSpace(string(data))
}
