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
// Files: main.go (the flags, the control planes and the QPS rounds),
// server.go (one CoreDNS process, pinned, run by the harness; its memory and
// Go heap, and the other processes' share of the CPUs), fixture.go (the
// objects, built by the harness, written to the control planes), dnsperf.go
// (the query files, a dig per mix and server before measuring, and
// dnsperf's runs, parsed), scale.go (-scale: memory, time to ready and
// replicas started together), propagation.go (-scale: a write to the
// answers, timed by the harness's AnswerWatcher), soak.go (-soak: the long
// churn and the check of every answer at its end), report.go (every table,
// declared as columns and rendered for the terminal and as Markdown) and
// charts.go (the SVG charts, with gonum/plot).
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
	repo, out, ours, stock           string
	imports, namespaces              int
	clusters, endpoints              int
	rounds                           int
	duration, settle, loadedFor      time.Duration
	serverCPU, loadCPU               string
	clients, outstanding, queryLines int
	seed                             uint64
	qps, scale                       bool
	scaleImports                     []int // increasing
	propRate, propESRate, replicas   int
	propDuration, quietWait          time.Duration
	markdown, charts, stockStorage   string
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
	if c.scaleImports, err = parseSizes(*scaleImports, c.imports); err == nil {
		err = run(c)
	}
	if err != nil {
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

// starter starts a server: the suffix names its files; metrics adds the
// prometheus plugin (the scale servers, for their Go heap).
type starter func(suffix string, metrics bool) (*server, error)

// side is stock or ours: its control plane and how to start it.
type side struct {
	name  string
	cl    *cluster
	start starter
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
	// the v1alpha2 fixture for ours, the same names in v1alpha1 for stock,
	// with v1alpha1 the storage version: the API server prunes every object
	// against the storage version's schema (the checks before measuring
	// would see stock answer nothing).
	logf("starting two control planes (etcd and kube-apiserver from %s)", filepath.Join(c.repo, ".cache", "bin"))
	fx := fixture{namespaces: c.namespaces, clusters: c.clusters, endpoints: c.endpoints}
	cls, stopPlanes, err := startPlanes(ctx, c.repo, fx, plane{"ours (v1alpha2)", v1alpha2, "v1alpha2", true},
		plane{"stock (v1alpha1)", v1alpha1, c.stockStorage, false})
	defer stopPlanes()
	if err != nil {
		return err
	}
	setupCtx, cancel := context.WithTimeout(ctx, 10*time.Minute)
	defer cancel()
	if err := loadFixture(setupCtx, cls, c.imports); err != nil {
		return err
	}
	floor, sides, err := c.starters(setupCtx, cls[0], cls[1])
	if err == nil && c.qps {
		err = runQPS(ctx, c, rep, fx, floor, sides)
	}
	if err == nil && c.scale {
		err = runScale(ctx, c, rep, fx, sides)
	}
	if err != nil {
		return err
	}
	return rep.write()
}

// prepare checks the tools and binaries and settles the output paths.
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
	c.out = cmp.Or(c.out, filepath.Join(c.repo, ".cache", "bench", "run-"+time.Now().Format("20060102-150405")))
	c.markdown = cmp.Or(c.markdown, filepath.Join(c.out, "results.md"))
	c.charts, err = filepath.Abs(cmp.Or(c.charts, c.out)) // so that the Markdown's links can be relative
	return errors.Join(err, os.MkdirAll(c.out, 0o755), os.MkdirAll(c.charts, 0o755))
}

// plane is a control plane to start: its name, the ServiceImport version
// its objects are written in, and deploy/crds' CRD with storage its storage
// version (alone: the only one served).
type plane struct {
	name    string
	version version
	storage string
	alone   bool
}

// startPlanes starts the control planes at once, with unthrottled clients
// for each; stop stops them all, after an error too.
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
		crd, err := harness.ServiceImportCRD(repo, "deploy/crds")
		if err == nil && planes[k].alone {
			err = harness.KeepVersions(crd, planes[k].storage)
		} else if err == nil {
			err = harness.SetStorage(crd, planes[k].storage)
		}
		if err == nil {
			envs[k], err = harness.Start(harness.Options{Repo: repo, CRDs: []*apiextensionsv1.CustomResourceDefinition{crd}})
		}
		return err
	})
	for k, p := range planes {
		if err != nil {
			break
		}
		var cl *cluster
		cl, err = newCluster(p.name, p.version, envs[k], fx)
		cls = append(cls, cl)
		logf("control plane %s up at %s", p.name, envs[k].APIServerURL())
	}
	return cls, stop, err
}

// starters start the floor, and stock and ours on their control planes.
// Ours runs as its least-privilege identity (deploy/rbac.yaml); stock needs
// Services, EndpointSlices and Namespaces as well: the admin.
func (c *config) starters(ctx context.Context, ours, stock *cluster) (starter, []side, error) {
	id, err := ours.env.PluginIdentity(ctx)
	if err != nil {
		return nil, nil, err
	}
	admin := filepath.Join(stock.env.TempDir(), "admin.kubeconfig")
	if err := stock.env.WriteAdminKubeconfig(admin); err != nil {
		return nil, nil, err
	}
	mk := func(name, label, bin, plugin string) starter {
		return func(sfx string, metrics bool) (*server, error) {
			return startServer(name+sfx, label, bin, c.out, c.serverCPU, plugin, metrics)
		}
	}
	return mk("floor", "floor: stock whoami", c.stock, "whoami"), []side{
		{"stock", stock, mk("stock", "stock v1.15.0 kubernetes", c.stock, fmt.Sprintf("kubernetes %s {\n\tkubeconfig %s\n\tmulticluster %s\n}\n", zone, admin, zone))},
		{"ours", ours, mk("ours", "ours multicluster", c.ours, harness.MulticlusterBlock(id.Kubeconfig))},
	}, nil
}

// runQPS starts the floor, stock and ours one after another (each one's
// start-up alone on its CPU), checks their answers, and runs the mixes in
// alternating rounds, with dnsperf, this program and both control planes on
// the other CPU.
func runQPS(ctx context.Context, c config, rep *report, fx fixture, floor starter, sides []side) error {
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
	for _, start := range []starter{floor, sides[0].start, sides[1].start} {
		s, err := start("", false)
		if err != nil {
			return err
		}
		servers = append(servers, s)
		logf("%-5s ready in %.2fs on %s (pid %d)", s.Name, s.ReadyIn.Seconds(), s.Addr(), s.PID())
	}
	time.Sleep(c.settle)
	for _, s := range servers[1:] {
		f := footprint{Server: s.Name, Label: s.Label, Imports: c.imports, ReadyIn: s.ReadyIn, AtReady: s.AtReady, Others: -1}
		f.Settled.mem, _ = s.Memory()
		rep.footprints = append(rep.footprints, f)
	}
	for _, s := range servers {
		if err := checkServer(s, mixes, fx); err != nil {
			return fmt.Errorf("check before measuring: %w", err)
		}
	}
	if err := pinPlanes(c.loadCPU); err != nil {
		return err
	}
	defer func() { _ = pinPlanes("") }()
	runs := sum(mixes, func(m mix) int { return cond(m.Floor, 3, 2) })
	logf("measuring: %d rounds × %d runs of %v (at least %.0f minutes)", c.rounds, runs, c.duration, float64(c.rounds*runs)*(c.duration.Seconds()+1.5)/60)
	for round := 1; round <= c.rounds; round++ {
		for _, m := range mixes {
			for _, s := range servers[cond(m.Floor, 0, 1):] {
				r, err := measureRun(ctx, c, round, m, s)
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
func measureRun(ctx context.Context, c config, round int, m mix, s *server) (perfResult, error) {
	waitQuiet(ctx, c.serverCPU, c.quiet, c.quietWait)
	profiled := make(chan error, 1)
	if withPprof && round == 1 && c.duration >= 4*time.Second {
		go func() {
			time.Sleep(time.Second)
			profiled <- s.profile(c.duration-3*time.Second, filepath.Join(c.out, fmt.Sprintf("cpu-%s-%s.pprof", m.Key, s.Name)))
		}()
	} else {
		profiled <- nil
	}
	r, err := runDnsperf(ctx, c, c.duration, s, m, fmt.Sprintf("r%d-%s-%s", round, m.Key, s.Name))
	if perr := <-profiled; perr != nil {
		logf("profile of %s, %s: %v", s.Name, m.Key, perr)
	}
	if err != nil {
		return r, fmt.Errorf("round %d, %s, %s: %w", round, m.Key, s.Name, err)
	}
	r.Round = round
	logf("%s", line(r, runCols))
	time.Sleep(time.Second) // let the last responses drain
	return r, nil
}
