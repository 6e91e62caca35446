package main

import (
	"errors"
	"fmt"
	"image/color"
	"io"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/prometheus/procfs"
	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// report gathers what was measured and renders it: every table for the
// terminal and as Markdown, and the charts as SVG.
type report struct {
	cfg     config
	started time.Time
	host    []string

	mixes      []mix
	results    []perfResult
	footprints []footprint // stock's, then ours', at each number of imports
	loads      []string
	props      []propagation
	starts     []startsRow
	replicas   []replicaStart
	inCluster  []inCluster
	soak       *soakRun
}

type column[R any] struct {
	h string
	f func(R) string
}

// table is a sentence before it, its title (none: the table follows the
// sentence), its header and rows, and lines after it.
type table struct {
	mdOnly          bool
	intro, title    string
	head            []string
	rows            [][]string
	warnings, notes []string
}

func tableOf[R any](title string, rows []R, cols []column[R]) table {
	t := table{title: title}
	for _, c := range cols {
		t.head = append(t.head, c.h)
	}
	for _, r := range rows {
		t.rows = append(t.rows, cells(r, cols))
	}
	return t
}

func cells[R any](r R, cols []column[R]) []string {
	out := make([]string, len(cols))
	for k, c := range cols {
		out[k] = c.f(r)
	}
	return out
}

func line[R any](r R, cols []column[R]) string {
	var parts []string
	for k, v := range cells(r, cols) {
		parts = append(parts, cols[k].h+" "+v)
	}
	return strings.Join(parts, ", ")
}

func render(w io.Writer, tables []table, md bool) {
	para := func(s, end string) {
		if md {
			s = strings.ToUpper(s[:1]) + s[1:] + end
		}
		fmt.Fprintf(w, "\n%s\n", s)
	}
	for _, t := range tables {
		if t.mdOnly && !md {
			continue
		}
		if t.intro != "" {
			para(t.intro, ".")
		}
		if t.title != "" {
			para(t.title+":", "")
		}
		if md {
			fmt.Fprintf(w, "\n| %s |\n|%s\n", strings.Join(t.head, " | "), strings.Repeat("---|", len(t.head)))
			for _, r := range t.rows {
				fmt.Fprintf(w, "| %s |\n", strings.Join(r, " | "))
			}
		} else {
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, r := range append([][]string{t.head}, t.rows...) {
				fmt.Fprintln(tw, "  "+strings.Join(r, "\t"))
			}
			tw.Flush()
		}
		for _, s := range t.warnings {
			para(cond(md, "**Warning:** ", "  WARNING: ")+s, "")
		}
		for _, s := range t.notes {
			para(cond(md, "", "  ")+s, ".")
		}
	}
}

func (r *report) machine() {
	model := "unknown CPU"
	if fs, err := procfs.NewDefaultFS(); err == nil {
		if info, err := fs.CPUInfo(); err == nil && len(info) > 0 {
			model = info[0].ModelName
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	perf, _ := exec.Command("dnsperf", "-h").CombinedOutput()
	_, version, _ := strings.Cut(string(perf), "Version")
	version, _, _ = strings.Cut(version, "\n")
	r.host = []string{fmt.Sprintf("%d CPUs (%s), Linux %s, %s, dnsperf %s", runtime.NumCPU(), model, strings.TrimSpace(string(kernel)), runtime.Version(),
		strings.TrimSpace(version)), "load average at start: " + harness.LoadAvg()}
}

// write prints the report, draws its charts and writes it as Markdown, with
// links to the charts.
func (r *report) write() error {
	c, took := r.cfg, time.Since(r.started).Seconds()
	var text, md strings.Builder
	fmt.Fprintf(&text, "\n== bench: %s, %.0fs\n   %s\n", r.started.Format(time.RFC3339), took, strings.Join(r.host, "\n   "))
	tables := r.tables()
	sum := summary(tables)
	render(&text, append([]table{sum}, tables...), false)
	fmt.Print(text.String())
	fmt.Fprintf(&md, "Run of %s (%.0f s in all) on this machine: %s; %s.\n", r.started.Format("2006-01-02 15:04 MST"), took, r.host[0], r.host[1])
	render(&md, tables, true)
	charts, err := r.charts(c.charts)
	if err != nil {
		return err
	}
	for _, name := range charts {
		rel, err := filepath.Rel(filepath.Dir(c.markdown), filepath.Join(c.charts, name))
		if err != nil {
			rel = filepath.Join(c.charts, name)
		}
		fmt.Fprintf(&md, "\n![%s](%s)\n", strings.TrimSuffix(name, ".svg"), filepath.ToSlash(rel))
	}
	var smd strings.Builder
	render(&smd, []table{sum}, true)
	logf("results written to %s (the summary to %s), charts %v to %s; logs, Corefiles and query files in %s", c.markdown, summaryPath(c.markdown), charts, c.charts, c.out)
	return errors.Join(os.WriteFile(c.markdown, []byte(md.String()), 0o644), os.WriteFile(summaryPath(c.markdown), []byte(strings.TrimPrefix(smd.String(), "\n")), 0o644))
}

// summaryPath is where the summary goes beside the Markdown of the run.
func summaryPath(markdown string) string { return strings.TrimSuffix(markdown, ".md") + "-summary.md" }

// pick is a row of the summary: the cell under head (or the off-th column
// after it, where heads repeat) in the table whose title or first sentence
// starts with in, in the first row whose first cell starts with row ("": the
// last row, "*": every row). With vs, the cell of that row too, and their
// ratio; with, the cell under that head too, in brackets; most and least,
// the target of a cell that does not say its own.
type pick struct {
	figure, in, row, head string
	off                   int
	vs, with              string
	most, least           float64
}

var summaryPicks = []pick{
	{figure: "A queries per CPU-second, ours/stock", in: "QPS per second of server CPU", row: "A,", head: "ours/stock (of medians)"},
	{figure: "`_http._tcp` SRV queries per CPU-second, ours/stock", in: "QPS per second of server CPU", row: "SRV", head: "ours/stock (of medians)"},
	{figure: "headless A queries per CPU-second, ours/stock", in: "QPS per second of server CPU", row: "headless", head: "ours/stock (of medians)"},
	{figure: "A queries per CPU-second, ours/whoami floor", in: "QPS per second of server CPU", row: "A,", head: "ours/floor (of medians)"},
	{figure: "RssAnon after start-up, ours/stock", in: "ours/stock, memory", head: "RssAnon ours/stock", most: 0.4},
	{figure: "RssAnon after dnsperf, ours/stock", in: "ours/stock, memory", head: "RssAnon after dnsperf ours/stock", most: 0.4},
	{figure: "Go live heap, ours/stock", in: "ours/stock, memory", head: "Go live heap ours/stock"},
	{figure: "time to ready, one start, ours/stock", in: "ours/stock, memory", head: "time to ready ours/stock", most: 0.5},
	{figure: "time to ready, median of the starts, ours/stock", in: "time to ready at", row: "stock", head: "ours/this", most: 0.5},
	{figure: "time to ready, median of the starts, ours/the WatchList floor", in: "time to ready at", row: "the WatchList", head: "ours/this", most: 1.2},
	{figure: "time to ready, median of the starts, ours/the LIST floor", in: "time to ready at", row: "the LIST", head: "ours/this"},
	{figure: "replicas started together: kube-apiserver CPU, ours/stock", in: "replicas started together", row: "ours", head: "kube-apiserver CPU", vs: "stock", most: 0.5},
	{figure: "replicas started together: all ready, ours/stock", in: "replicas started together", row: "ours", head: "all ready in", vs: "stock"},
	{figure: "A throughput while writing / alone, ours", in: "serving while", row: "ours", head: "while writing / alone", least: 0.9},
	{figure: "A throughput while writing / alone, stock", in: "serving while", row: "stock", head: "while writing / alone"},
	{figure: "write to answer p99, no queries, ours (ms)", in: "propagation at", row: "ours", head: "p99", most: 100},
	{figure: "write to answer p99, no queries, stock (ms)", in: "propagation at", row: "stock", head: "p99"},
	{figure: "in the cluster's own CoreDNS, CPU to ready the stanza adds, ours/stock", in: "in the cluster's own", row: "*", head: "CPU to ready added, stock", off: 2},
	{figure: "in the cluster's own CoreDNS, RssAnon the stanza adds, ours/stock", in: "in the cluster's own", row: "*", head: "RssAnon added, stock", off: 2},
	{figure: "in the cluster's own CoreDNS, Go live heap the stanza adds, ours/stock", in: "in the cluster's own", row: "*", head: "Go live heap added, stock", off: 2},
	{figure: "in the cluster's own CoreDNS, CPU under writes the stanza adds, ours/stock", in: "in the cluster's own", row: "*", head: "CPU under writes added, stock", off: 2},
	{figure: "long churn, RssAnon: at the end against the first sample after writes", in: "at the end against", row: "RssAnon", head: "change", with: "verdict"},
	{figure: "long churn, Go live heap: at the end against the first sample after writes", in: "at the end against", row: "Go live heap", head: "change", with: "verdict"},
	{figure: "long churn, goroutines: at the end against the first sample after writes", in: "at the end against", row: "goroutines", head: "change", with: "verdict"},
	{figure: "long churn, open fds: at the end against the first sample after writes", in: "at the end against", row: "open fds", head: "change", with: "verdict"},
}

// summary is the run's figures in one table, each picked from the tables
// (summaryPicks); figures not measured are left out.
func summary(tables []table) table {
	sum := table{title: "summary", head: []string{"figure", "value"}}
	for _, p := range summaryPicks {
		i := slices.IndexFunc(tables, func(t table) bool { return strings.HasPrefix(t.title, p.in) || strings.HasPrefix(t.intro, p.in) })
		if i < 0 {
			continue
		}
		t := tables[i]
		col := slices.Index(t.head, p.head) + p.off
		find := func(prefix string) []string {
			if k := slices.IndexFunc(t.rows, func(r []string) bool { return strings.HasPrefix(r[0], prefix) }); k >= 0 {
				return t.rows[k]
			}
			return nil
		}
		var rows [][]string
		switch {
		case col < p.off || len(t.rows) == 0:
		case p.row == "*":
			rows = t.rows
		case p.row == "":
			rows = t.rows[len(t.rows)-1:]
		case find(p.row) != nil:
			rows = [][]string{find(p.row)}
		}
		for _, r := range rows {
			v, figure := r[col], p.figure
			if t.head[0] == "imports" {
				figure += ", " + r[0] + " imports"
			}
			x := lead(v)
			if vs := find(p.vs); p.vs != "" {
				if vs == nil {
					continue // nothing to compare with: no ratio, no target
				}
				x /= lead(vs[col])
				known := !math.IsNaN(x) && !math.IsInf(x, 0)
				v = cond(known, fmt.Sprintf("%.2f (", x), "") + v + " against " + vs[col] + cond(known, ")", "")
			}
			if with := slices.Index(t.head, p.with); p.with != "" && with >= 0 {
				v += " (" + r[with] + ")"
			}
			if (p.most > 0 || p.least > 0) && !strings.Contains(v, "target") && !math.IsNaN(x) && !math.IsInf(x, 0) {
				v += cond(p.most > 0, fmt.Sprintf(" (target ≤%g: %s)", p.most, cond(x <= p.most, "met", "MISSED")),
					fmt.Sprintf(" (target ≥%g: %s)", p.least, cond(x >= p.least, "met", "MISSED")))
			}
			sum.rows = append(sum.rows, []string{figure, v})
		}
	}
	return sum
}

// lead is the number a cell starts with, NaN if none.
func lead(cell string) float64 {
	f, _, _ := strings.Cut(cell, " ")
	x, err := strconv.ParseFloat(strings.TrimSuffix(f, "%"), 64)
	return cond(err == nil, x, math.NaN())
}

// tables are the report's tables, in order; the table of every run is the
// Markdown's alone.
func (r *report) tables() []table {
	var out []table
	if len(r.results) > 0 {
		c := r.cfg
		qps := tableOf("QPS: median (lowest–highest) of the rounds", r.mixes, r.summaryCols(qpsOf))
		qps.intro = fmt.Sprintf("%d alternating rounds of %v per server and mix; servers GOMAXPROCS=1 on CPU %s, dnsperf -c %d -q %d -T 1 -t 5 -b 1024 -e on CPU %s",
			c.rounds, c.duration, c.serverCPU, c.clients, c.outstanding, c.loadCPU)
		detail := tableOf("per server and mix, over all rounds", r.groups(), detailCols)
		detail.warnings = r.warnings()
		every := tableOf("every run", r.results, runCols)
		every.mdOnly = true
		out = append(out, qps, tableOf("QPS per second of server CPU time (QPS / the server's CPU share during the run): median (lowest–highest); robust to other processes taking part of the server's CPU",
			r.mixes, r.summaryCols(perfResult.PerCPU)), detail, every)
	}
	if len(r.footprints) > 0 {
		out = append(out, tableOf("start-up and memory, one server at a time on its CPU (compare RssAnon and the Go heap: VmRSS counts the binary's pages in the page cache; others' CPU: the share of all CPUs that processes other than the bench, its control planes and the server took)",
			r.footprints, footprintCols))
		if pairs := slices.Collect(slices.Chunk(r.footprints[:len(r.footprints)/2*2], 2)); len(pairs) > 0 {
			out = append(out, tableOf("ours/stock, memory after settling", pairs, ratioCols))
		}
		out[len(out)-1].notes = r.loads
	}
	if len(r.props) > 0 {
		out = append(out, tableOf(fmt.Sprintf("propagation at %d imports: API write (merge patch of one import's ips, or of one churn import's EndpointSlice) to the first DNS answer with the new address",
			r.props[0].Imports), r.props, propCols))
		if busy := slices.DeleteFunc(slices.Clone(r.props), func(p propagation) bool { return p.Idle.QPS == 0 }); len(busy) > 0 {
			out = append(out, tableOf("serving while the cluster changes: A queries (random over every import) from the same server alone and while the writes above are sent; dnsperf shares its CPU with the control planes, which serve the writes",
				busy, churnCols))
		}
	}
	if len(r.starts) > 0 {
		out = append(out, tableOf(fmt.Sprintf("time to ready at %d imports, %d starts of each in turn, each once the control planes are idle; the floors read ours' imports as bytes, in one LIST and in one WatchList",
			r.starts[0].Imports, r.cfg.starts), r.starts, startsCols))
	}
	if len(r.replicas) > 0 {
		out = append(out, tableOf("replicas started together against one API server (each GOMAXPROCS=1, all on the servers' CPU): time until the last is ready, and the kube-apiserver's CPU time and VmRSS (sampled every 100 ms) meanwhile",
			r.replicas, replicaCols))
	}
	if len(r.inCluster) > 0 {
		in := tableOf("in the cluster's own CoreDNS: what the MCS stanza adds to a server with `kubernetes cluster.local` (medians of the runs with it less those without; memory after settling; CPU from exec to ready, and while the propagation writes are sent, with no query)",
			r.inCluster, inClusterCols)
		in.notes = []string{"servers: " + strings.Join(inLabels[:], ", ") + ", one at a time on stock's control plane"}
		out = append(out, in)
	}
	if r.soak != nil {
		out = append(out, r.soakTables()...)
	}
	return out
}

func (r *report) runs(server, mixKey string) []perfResult {
	return slices.DeleteFunc(slices.Clone(r.results), func(x perfResult) bool { return x.Server != server || x.Mix != mixKey })
}

// stat is the median of a metric over a server's runs of a mix, with the
// lowest and highest value.
func (r *report) stat(server, mixKey string, metric func(perfResult) float64) (med, lo, hi float64, n int) {
	var v []float64
	for _, x := range r.runs(server, mixKey) {
		v = append(v, metric(x))
	}
	if len(v) == 0 {
		return 0, 0, 0, 0
	}
	return median(v), slices.Min(v), slices.Max(v), len(v)
}

// median of v, the mean of the middle two for an even count; v is left as
// it was.
func median(v []float64) float64 {
	v = slices.Sorted(slices.Values(v))
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func qpsOf(x perfResult) float64 { return x.QPS }

type target struct {
	ratio, want float64
	ok          bool
}

func (t target) String() string {
	if t.ratio == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f (target ≥%.2g: %s)", t.ratio, t.want, cond(t.ok, "met", "MISSED"))
}

func ratio(a, b, want float64) target {
	if a == 0 || b == 0 {
		return target{}
	}
	return target{ratio: a / b, ok: a/b >= want, want: want}
}

// summaryCols are a metric's table: per mix the medians and the ratios.
func (r *report) summaryCols(metric func(perfResult) float64) []column[mix] {
	cell := func(server string) func(mix) string {
		return func(m mix) string {
			med, lo, hi, _ := r.stat(server, m.Key, metric)
			return cond(med == 0, "-", fmt.Sprintf("%.0f (%.0f–%.0f)", med, lo, hi))
		}
	}
	of := func(b string, want func(mix) float64) func(mix) string {
		return func(m mix) string {
			x, _, _, _ := r.stat("ours", m.Key, metric)
			y, _, _, _ := r.stat(b, m.Key, metric)
			return cond(b == "floor" && !m.Floor, "-", ratio(x, y, want(m)).String())
		}
	}
	paired := func(b string) func(mix) string {
		return func(m mix) string { return r.pairedRatio("ours", b, m.Key, metric) }
	}
	return []column[mix]{{"mix", func(m mix) string { return m.Label }},
		{"floor: whoami", cell("floor")}, {"stock v1.15.0", cell("stock")}, {"ours", cell("ours")},
		{"ours/stock (of medians)", of("stock", func(m mix) float64 { return cond(m.Key == "headless", 3.0, 1.5) })},
		{"ours/stock (median of rounds)", paired("stock")},
		{"ours/floor (of medians)", of("floor", func(mix) float64 { return 0.85 })},
		{"ours/floor (median of rounds)", paired("floor")}}
}

// pairedRatio is the median over rounds of a/b within the round, with the
// lowest and highest: the servers of one round ran within a minute of each
// other, so this follows a machine whose speed drifts between rounds.
func (r *report) pairedRatio(a, b, mixKey string, metric func(perfResult) float64) string {
	byRound := map[int][2]float64{}
	for _, x := range r.results {
		if v, k := byRound[x.Round], slices.Index([]string{a, b}, x.Server); x.Mix == mixKey && k >= 0 {
			v[k] = metric(x)
			byRound[x.Round] = v
		}
	}
	var ratios []float64
	for _, v := range byRound {
		if v[0] > 0 && v[1] > 0 {
			ratios = append(ratios, v[0]/v[1])
		}
	}
	if len(ratios) == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f (%.2f–%.2f)", median(ratios), slices.Min(ratios), slices.Max(ratios))
}

func (r *report) groups() (out [][]perfResult) {
	for _, m := range r.mixes {
		for _, s := range []string{"floor", "stock", "ours"} {
			if runs := r.runs(s, m.Key); len(runs) > 0 {
				out = append(out, runs)
			}
		}
	}
	return out
}

func meanPct(f func(perfResult) float64) func([]perfResult) string {
	return func(g []perfResult) string { return pct(sum(g, f) / float64(len(g))) }
}

var detailCols = []column[[]perfResult]{
	{"mix", func(g []perfResult) string { return g[0].Mix }},
	{"server", func(g []perfResult) string { return g[0].Server }},
	{"runs", func(g []perfResult) string { return fmt.Sprint(len(g)) }},
	{"queries sent", func(g []perfResult) string { return fmt.Sprint(sum(g, func(x perfResult) int { return x.Sent })) }},
	{"lost", func(g []perfResult) string { return fmt.Sprint(sum(g, func(x perfResult) int { return x.Lost })) }},
	{"non-NOERROR", func(g []perfResult) string { return fmt.Sprint(sum(g, perfResult.NonNoError)) }},
	{"avg response", func(g []perfResult) string { return fmt.Sprintf("%d B", g[len(g)-1].RespBytes) }},
	{"server CPU (mean)", meanPct(func(x perfResult) float64 { return x.ServerCPU })},
	{"others on its CPU (mean)", meanPct(func(x perfResult) float64 { return x.OtherCPU })},
}

var runCols = []column[perfResult]{
	{"round", func(x perfResult) string { return fmt.Sprint(x.Round) }},
	{"mix", func(x perfResult) string { return x.Mix }},
	{"server", func(x perfResult) string { return x.Server }},
	{"QPS", func(x perfResult) string { return fmt.Sprintf("%.0f", x.QPS) }},
	{"per CPU-second", func(x perfResult) string { return fmt.Sprintf("%.0f", x.PerCPU()) }},
	{"server CPU", func(x perfResult) string { return pct(x.ServerCPU) }},
	{"others on its CPU", func(x perfResult) string { return pct(x.OtherCPU) }},
	{"lost", func(x perfResult) string { return fmt.Sprint(x.Lost) }},
	{"non-NOERROR", func(x perfResult) string { return fmt.Sprint(x.NonNoError()) }},
	{"avg latency", func(x perfResult) string { return fmt.Sprintf("%.1f ms", x.AvgLatency*1000) }},
}

// warnings name runs whose answers were not all NOERROR where they must be.
func (r *report) warnings() (out []string) {
	for _, x := range r.results {
		if bad := x.NonNoError(); bad > 0 && (x.Mix == "a" || x.Mix == "srv" || x.Server == "floor") {
			out = append(out, fmt.Sprintf("round %d, %s, %s: %d responses were not NOERROR (%v)", x.Round, x.Mix, x.Server, bad, x.Rcodes))
		}
	}
	return out
}

// The cells of the figures: "-" for a share of the CPUs not measured
// (negative), for no memory read (0), for a ratio without both figures.
func pct(share float64) string  { return cond(share < 0, "-", fmt.Sprintf("%.0f%%", share*100)) }
func mib(kb int) string         { return cond(kb == 0, "-", fmt.Sprintf("%.0f MiB", float64(kb)/1024)) }
func mibBytes(b int64) string   { return cond(b == 0, "-", fmt.Sprintf("%.1f MiB", mibOf(b))) }
func mibOf(bytes int64) float64 { return float64(bytes) / (1 << 20) }

func msec(d time.Duration) string {
	return fmt.Sprintf("%.1f ms", float64(d)/float64(time.Millisecond))
}

func div(a, b float64) string {
	return cond(a == 0 || b == 0 || math.IsNaN(a/b), "-", fmt.Sprintf("%.2f", a/b))
}

var footprintCols = []column[footprint]{
	{"server", func(f footprint) string { return f.Label }},
	{"imports", func(f footprint) string { return fmt.Sprint(f.Imports) }},
	{"time to ready", func(f footprint) string { return fmt.Sprintf("%.2fs", f.ReadyIn.Seconds()) }},
	{"VmRSS at ready", func(f footprint) string { return mib(f.AtReady.RSS) }},
	{"VmRSS settled", func(f footprint) string { return mib(f.Settled.RSS) }},
	{"RssAnon settled", func(f footprint) string { return mib(f.Settled.Anon) }},
	{"VmHWM", func(f footprint) string { return mib(f.Settled.HWM) }},
	{"Go heap in use settled", func(f footprint) string { return mibBytes(f.Settled.Heap.HeapInuse) }},
	{"Go heap sys settled", func(f footprint) string { return mibBytes(f.Settled.Heap.HeapSys) }},
	{"Go alloc settled", func(f footprint) string { return mibBytes(f.Settled.Heap.Alloc) }},
	{"Go live heap (after a GC)", func(f footprint) string { return mibBytes(f.Settled.Live.Alloc) }},
	{"live heap per import", func(f footprint) string {
		return cond(f.Settled.Live.Alloc == 0, "-", fmt.Sprintf("%.0f B", float64(f.Settled.Live.Alloc)/float64(f.Imports)))
	}},
	{"others' CPU until ready", func(f footprint) string { return pct(f.Others) }},
	{"RssAnon after dnsperf", func(f footprint) string {
		return cond(f.LoadedFor == 0, "-", fmt.Sprintf("%s (%v, %.0f QPS)", mib(f.Loaded.Anon), f.LoadedFor, f.LoadedQPS))
	}},
	{"Go heap in use after dnsperf", func(f footprint) string { return mibBytes(f.Loaded.Heap.HeapInuse) }},
	{"Go live heap after dnsperf", func(f footprint) string { return mibBytes(f.Loaded.Live.Alloc) }},
}

func oursOver(h string, f func(footprint) float64) column[[]footprint] {
	return column[[]footprint]{h, func(p []footprint) string { return div(f(p[1]), f(p[0])) }}
}

var ratioCols = []column[[]footprint]{
	{"imports", func(p []footprint) string { return fmt.Sprint(p[0].Imports) }},
	oursOver("RssAnon ours/stock", func(f footprint) float64 { return float64(f.Settled.Anon) }),
	oursOver("Go heap in use ours/stock", func(f footprint) float64 { return float64(f.Settled.Heap.HeapInuse) }),
	oursOver("Go live heap ours/stock", func(f footprint) float64 { return float64(f.Settled.Live.Alloc) }),
	oursOver("time to ready ours/stock", func(f footprint) float64 { return f.ReadyIn.Seconds() }),
	oursOver("RssAnon after dnsperf ours/stock", func(f footprint) float64 { return float64(f.Loaded.Anon) }),
	oursOver("Go live heap after dnsperf ours/stock", func(f footprint) float64 { return float64(f.Loaded.Live.Alloc) }),
}

// pr is a column of quantile q of a propagation's latencies of a kind, alone
// the same server's run without queries.
func pr(h, kind string, q float64, alone bool) column[propagation] {
	return column[propagation]{h, func(p propagation) string { return msec(cond(alone, p.Alone, p.Lat)[kind].q(q)) }}
}

var propCols = []column[propagation]{
	{"server", func(p propagation) string { return p.Label }},
	{"imports", func(p propagation) string { return fmt.Sprint(p.Imports) }},
	{"writes (ServiceImport + EndpointSlice)", func(p propagation) string { return fmt.Sprintf("%d + %d", p.Writes, p.ESWrites) }},
	{"rate", func(p propagation) string { return fmt.Sprintf("%.0f/s + %.0f/s", p.Achieved, p.ESAchieved) }},
	{"seen", func(p propagation) string { return fmt.Sprint(p.Seen) }},
	pr("p50", "answer", 0.5, false), pr("p90", "answer", 0.9, false), pr("p99", "answer", 0.99, false), pr("max", "answer", 1, false),
	pr("API ack p50", "ack", 0.5, false), pr("API ack p99", "ack", 0.99, false),
	pr("ack to answer p50", "after ack", 0.5, false), pr("ack to answer p99", "after ack", 0.99, false),
	pr("to the bench's watch p50", "event", 0.5, false), pr("to the bench's watch p99", "event", 0.99, false),
	pr("watch event to answer p50", "after event", 0.5, false), pr("watch event to answer p99", "after event", 0.99, false),
	{"others' CPU", func(p propagation) string { return pct(p.Others) }},
}

// churnCols are a propagation run during dnsperf beside the same server's
// run alone.
var churnCols = []column[propagation]{
	propCols[0], propCols[1],
	{"QPS alone", func(p propagation) string { return fmt.Sprintf("%.0f", p.Idle.QPS) }},
	{"QPS while writing", func(p propagation) string { return fmt.Sprintf("%.0f", p.Busy.QPS) }},
	{"while writing / alone", func(p propagation) string { return div(p.Busy.QPS, p.Idle.QPS) }},
	{"per CPU-second: while writing / alone", func(p propagation) string { return div(p.Busy.PerCPU(), p.Idle.PerCPU()) }},
	pr("write to answer p99, no queries", "answer", 0.99, true), pr("write to answer p99, during dnsperf", "answer", 0.99, false),
	pr("watch event to answer p99, no queries", "after event", 0.99, true), pr("watch event to answer p99, during dnsperf", "after event", 0.99, false),
	{"writes answered", func(p propagation) string { return fmt.Sprintf("%d of %d", p.Seen, p.Writes+p.ESWrites) }},
}

var replicaCols = []column[replicaStart]{
	{"server", func(x replicaStart) string { return x.Label }},
	{"replicas", func(x replicaStart) string { return fmt.Sprint(x.Replicas) }},
	{"imports", func(x replicaStart) string { return fmt.Sprint(x.Imports) }},
	{"all ready in", func(x replicaStart) string {
		return cond(x.Err != "", "failed: "+strings.SplitN(x.Err, "\n", 2)[0], fmt.Sprintf("%.1f s", x.AllReady.Seconds()))
	}},
	{"kube-apiserver CPU", func(x replicaStart) string { return cond(x.Err != "", "-", fmt.Sprintf("%.1f CPU-s", x.APICPU)) }},
	{"kube-apiserver VmRSS before", func(x replicaStart) string { return mib(x.APIBefore) }},
	{"peak", func(x replicaStart) string { return mib(x.APIPeak) }},
	{"growth", func(x replicaStart) string { return cond(x.Err != "", "-", mib(x.APIPeak-x.APIBefore)) }},
}

// The servers' colours, the same in every chart.
var serverColor = map[string]color.Color{"floor": color.RGBA{0x99, 0x99, 0x99, 0xff}, "stock": color.RGBA{0xd9, 0x5f, 0x02, 0xff}, "ours": color.RGBA{0x1b, 0x9e, 0x77, 0xff}}

// charts writes the charts into dir and returns their file names: qps.svg
// (median QPS per mix and server) when QPS was measured, memory.svg and
// ready.svg (RssAnon and time to ready against the number of imports) when
// footprints were, soak.svg after -soak.
func (r *report) charts(dir string) (written []string, err error) {
	for _, c := range []struct {
		name  string
		w     vg.Length
		drawn bool
		draw  func() (*plot.Plot, error)
	}{
		{"qps.svg", 16, len(r.results) > 0, r.qpsChart},
		{"memory.svg", 12, len(r.footprints) > 0, func() (*plot.Plot, error) {
			return r.footprintChart("Anonymous memory (RssAnon) after start-up", "MiB", func(f footprint) float64 { return float64(f.Settled.Anon) / 1024 })
		}},
		{"ready.svg", 12, len(r.footprints) > 0, func() (*plot.Plot, error) {
			return r.footprintChart("Time from start to ready", "seconds", func(f footprint) float64 { return f.ReadyIn.Seconds() })
		}},
		{"soak.svg", 16, r.soak != nil, r.soakChart},
	} {
		if !c.drawn {
			continue
		}
		p, err := c.draw()
		if err == nil {
			err = p.Save(c.w*vg.Centimeter, 9*vg.Centimeter, filepath.Join(dir, c.name))
		}
		if err != nil {
			return written, fmt.Errorf("chart %s: %w", c.name, err)
		}
		written = append(written, c.name)
	}
	return written, nil
}

func newPlot(title, x, y string) *plot.Plot {
	p := plot.New()
	p.Title.Text, p.X.Label.Text, p.Y.Label.Text, p.Y.Min = title, x, y, 0
	p.Legend.Top = true
	p.Add(plotter.NewGrid())
	return p
}

func (r *report) qpsChart() (*plot.Plot, error) {
	p := newPlot("Queries per second (median of rounds, one core)", "", "QPS")
	var names []string
	for _, m := range r.mixes {
		names = append(names, m.Label)
	}
	p.NominalX(names...)
	width := vg.Points(18)
	for i, s := range []string{"floor", "stock", "ours"} {
		values := make(plotter.Values, len(r.mixes))
		for j, m := range r.mixes {
			values[j], _, _, _ = r.stat(s, m.Key, qpsOf)
			p.Y.Max = max(p.Y.Max, 1.25*values[j]) // room for the legend above the bars
		}
		bars, err := plotter.NewBarChart(values, width)
		if err != nil {
			return nil, err
		}
		bars.Color, bars.LineStyle.Width, bars.Offset = serverColor[s], 0, vg.Length(i-1)*width
		p.Add(bars)
		p.Legend.Add(s, bars)
	}
	return p, nil
}

// footprintChart is a line of value against the number of imports for stock
// and one for ours.
func (r *report) footprintChart(title, unit string, value func(footprint) float64) (*plot.Plot, error) {
	p := newPlot(title, "ServiceImports", unit)
	p.Legend.Left = true
	for _, family := range []string{"stock", "ours"} {
		var pts plotter.XYs
		for _, f := range r.footprints {
			if strings.HasPrefix(f.Server, family) && value(f) > 0 {
				pts = append(pts, plotter.XY{X: float64(f.Imports), Y: value(f)})
			}
		}
		slices.SortFunc(pts, func(a, b plotter.XY) int { return int(a.X - b.X) })
		if err := addLine(p, family, serverColor[family], pts); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// addLine adds a line with points, but none without points, and to the
// legend if it has a name.
func addLine(p *plot.Plot, name string, c color.Color, pts plotter.XYs) error {
	if len(pts) == 0 {
		return nil
	}
	line, points, err := plotter.NewLinePoints(pts)
	if err != nil {
		return err
	}
	line.Color, points.Color = c, c
	p.Add(line, points)
	if name != "" {
		p.Legend.Add(name, line, points)
	}
	return nil
}
