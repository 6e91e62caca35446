package main

import (
	"github.com/clustersetdns/multicluster/test/e2e/harness"

	"text/tabwriter"

	"github.com/prometheus/procfs"

	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strings"
	"time"
)

// report gathers what was measured and renders it.
type report struct {
	cfg               config
	started, finished time.Time
	host              []string

	mixes      []mix
	servers    []*server
	checks     []string
	results    []perfResult
	footprints []footprint
	loads      []load
	props      []propagation
	replicas   []replicaStart
}

// load is one step of -scale's loading: imports in each control plane after
// it, how many it added to each, and how long that took.
type load struct {
	Imports, Added int
	Took           time.Duration
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
	perfVersion := "dnsperf"
	for line := range strings.Lines(string(perf)) {
		if strings.HasPrefix(line, "Version") {
			perfVersion = "dnsperf " + strings.TrimSpace(strings.TrimPrefix(line, "Version"))
		}
	}
	r.host = []string{
		fmt.Sprintf("%d CPUs (%s), Linux %s, %s, %s", runtime.NumCPU(), model, strings.TrimSpace(string(kernel)), runtime.Version(), perfVersion),
		"load average at start: " + harness.LoadAvg(),
	}
}

// stat is the median of a metric over a server's runs of a mix, with the
// lowest and highest value.
func (r *report) stat(server, mixKey string, metric func(perfResult) float64) (med, lo, hi float64, n int) {
	var v []float64
	for _, x := range r.results {
		if x.Server == server && x.Mix == mixKey {
			v = append(v, metric(x))
		}
	}
	if len(v) == 0 {
		return 0, 0, 0, 0
	}
	return median(v), slices.Min(v), slices.Max(v), len(v)
}

// median of v (the mean of the middle two for an even count); it sorts v.
func median(v []float64) float64 {
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

func qpsOf(x perfResult) float64    { return x.QPS }
func perCPUOf(x perfResult) float64 { return x.PerCPU() }

// totals sums lost and non-NOERROR responses, and averages the CPU shares.
func (r *report) totals(server, mixKey string) (lost, nonNoError, sent int, serverCPU, otherCPU float64, respBytes int) {
	n := 0
	for _, x := range r.results {
		if x.Server == server && x.Mix == mixKey {
			lost += x.Lost
			nonNoError += x.NonNoError()
			sent += x.Sent
			serverCPU += x.ServerCPU
			otherCPU += x.OtherCPU
			respBytes = x.RespBytes
			n++
		}
	}
	if n > 0 {
		serverCPU /= float64(n)
		otherCPU /= float64(n)
	}
	return
}

type target struct {
	ratio float64
	ok    bool
	want  float64
}

func (t target) String() string {
	if t.ratio == 0 {
		return "-"
	}
	verdict := "met"
	if !t.ok {
		verdict = "MISSED"
	}
	return fmt.Sprintf("%.2f (target ≥%.2g: %s)", t.ratio, t.want, verdict)
}

func ratio(a, b, want float64) target {
	if a == 0 || b == 0 {
		return target{}
	}
	return target{ratio: a / b, ok: a/b >= want, want: want}
}

// rows are a summary table of a metric: per mix the medians and the ratios.
func (r *report) rows(metric func(perfResult) float64) [][]string {
	var rows [][]string
	for _, m := range r.mixes {
		f, flo, fhi, _ := r.stat("floor", m.Key, metric)
		s, slo, shi, _ := r.stat("stock", m.Key, metric)
		o, olo, ohi, _ := r.stat("ours", m.Key, metric)
		want := 1.5
		if m.Key == "headless" {
			want = 3
		}
		vsFloor := "-"
		if m.Floor {
			vsFloor = ratio(o, f, 0.85).String()
		}
		cell := func(med, lo, hi float64) string {
			if med == 0 {
				return "-"
			}
			return fmt.Sprintf("%.0f (%.0f–%.0f)", med, lo, hi)
		}
		rows = append(rows, []string{m.Label, cell(f, flo, fhi), cell(s, slo, shi), cell(o, olo, ohi),
			ratio(o, s, want).String(), r.pairedRatio("ours", "stock", m.Key, metric), vsFloor, r.pairedRatio("ours", "floor", m.Key, metric)})
	}
	return rows
}

var header = []string{"mix", "floor: whoami", "stock v1.15.0", "ours", "ours/stock (of medians)", "ours/stock (median of rounds)", "ours/floor (of medians)", "ours/floor (median of rounds)"}

// pairedRatio is the median over rounds of a/b within the round, with the
// lowest and highest: the servers of one round ran within a minute of each
// other, so this follows a machine whose speed drifts between rounds.
func (r *report) pairedRatio(a, b, mixKey string, metric func(perfResult) float64) string {
	byRound := map[int][2]float64{}
	for _, x := range r.results {
		if x.Mix != mixKey {
			continue
		}
		v := byRound[x.Round]
		switch x.Server {
		case a:
			v[0] = metric(x)
		case b:
			v[1] = metric(x)
		}
		byRound[x.Round] = v
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
	med := median(ratios)
	return fmt.Sprintf("%.2f (%.2f–%.2f)", med, ratios[0], ratios[len(ratios)-1])
}

func (r *report) runLine() string {
	c := r.cfg
	return fmt.Sprintf("%d alternating rounds of %v per server and mix; servers GOMAXPROCS=1 on CPU %s, dnsperf -c %d -q %d -T 1 -t 5 -b 1024 -e on CPU %s",
		c.rounds, c.duration, c.serverCPU, c.clients, c.outstanding, c.loadCPU)
}

const (
	qpsTitle    = "QPS: median (lowest–highest) of the rounds"
	perCPUTitle = "QPS per second of server CPU time (QPS / the server's CPU share during the run): median (lowest–highest); robust to other processes taking part of the server's CPU"
)

// section is one table of the report: its title (none for a table that
// follows the one before), a sentence before it, its rows (the first the
// header), and lines after it.
type section struct {
	title, intro string
	rows         [][]string
	notes        []string
	warnings     []string
}

// sections are the report's tables, in order; the terminal and Markdown
// render the same ones, and everyRun adds the table of every run.
func (r *report) sections(everyRun bool) []section {
	var out []section
	if len(r.results) > 0 {
		out = append(out,
			section{title: qpsTitle, intro: r.runLine(), rows: append([][]string{header}, r.rows(qpsOf)...)},
			section{title: perCPUTitle, rows: append([][]string{header}, r.rows(perCPUOf)...)},
			section{title: "per server and mix, over all rounds", rows: r.detailRows(), warnings: r.warnings()})
		if everyRun {
			rows := [][]string{{"round", "mix", "server", "QPS", "per CPU-second", "server CPU", "others on its CPU", "lost", "non-NOERROR", "avg latency"}}
			for _, x := range r.results {
				rows = append(rows, []string{fmt.Sprint(x.Round), x.Mix, x.Server, fmt.Sprintf("%.0f", x.QPS), fmt.Sprintf("%.0f", x.PerCPU()),
					fmt.Sprintf("%.0f%%", x.ServerCPU*100), fmt.Sprintf("%.0f%%", x.OtherCPU*100), fmt.Sprint(x.Lost),
					fmt.Sprint(x.NonNoError()), fmt.Sprintf("%.1f ms", x.AvgLatency*1000)})
			}
			out = append(out, section{title: "every run", rows: rows})
		}
	}
	if len(r.footprints) > 0 {
		var loads []string
		for _, l := range r.loads {
			loads = append(loads, l.String())
		}
		out = append(out, section{title: footprintTitle, rows: r.footprintRows()})
		if rows := r.footprintRatioRows(); len(rows) > 1 {
			out = append(out, section{title: ratioTitle, rows: rows})
		}
		out[len(out)-1].notes = loads
	}
	if len(r.props) > 0 {
		out = append(out, section{title: r.propTitle(), rows: r.propRows()})
		if rows := r.churnRows(); len(rows) > 1 {
			out = append(out, section{title: churnTitle, rows: rows})
		}
	}
	if len(r.replicas) > 0 {
		out = append(out, section{title: replicasTitle, rows: r.replicaRows()})
	}
	return out
}

// String renders the report as plain text for the terminal.
func (r *report) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "== bench: %s, %.0fs\n", r.started.Format(time.RFC3339), r.finished.Sub(r.started).Seconds())
	for _, h := range r.host {
		fmt.Fprintf(&b, "   %s\n", h)
	}
	for _, s := range r.sections(false) {
		if s.intro != "" {
			fmt.Fprintf(&b, "\n%s\n", s.intro)
		}
		fmt.Fprintf(&b, "\n%s:\n", s.title)
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		for _, row := range s.rows {
			fmt.Fprintln(tw, "  "+strings.Join(row, "\t"))
		}
		tw.Flush()
		for _, w := range s.warnings {
			fmt.Fprintf(&b, "  WARNING: %s\n", w)
		}
		for _, n := range s.notes {
			fmt.Fprintf(&b, "  %s\n", n)
		}
	}
	return b.String()
}

// Markdown renders the report for docs/benchmarks.md.
func (r *report) Markdown() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Run of %s (%.0f s in all) on this machine: %s; %s.\n", r.started.Format("2006-01-02 15:04 MST"),
		r.finished.Sub(r.started).Seconds(), r.host[0], r.host[1])
	for _, s := range r.sections(true) {
		if s.intro != "" {
			fmt.Fprintf(&b, "\n%s.\n", capitalize(s.intro))
		}
		fmt.Fprintf(&b, "\n%s:\n\n", capitalize(s.title))
		for i, row := range s.rows {
			b.WriteString("| " + strings.Join(row, " | ") + " |\n")
			if i == 0 {
				b.WriteString("|" + strings.Repeat("---|", len(row)) + "\n")
			}
		}
		for _, w := range s.warnings {
			fmt.Fprintf(&b, "\n**Warning:** %s\n", w)
		}
		for _, n := range s.notes {
			fmt.Fprintf(&b, "\n%s.\n", capitalize(n))
		}
	}
	return b.String()
}

func capitalize(s string) string { return strings.ToUpper(s[:1]) + s[1:] }

func (r *report) detailRows() [][]string {
	rows := [][]string{{"mix", "server", "runs", "queries sent", "lost", "non-NOERROR", "avg response", "server CPU (mean)", "others on its CPU (mean)"}}
	for _, m := range r.mixes {
		for _, s := range []string{"floor", "stock", "ours"} {
			_, _, _, n := r.stat(s, m.Key, qpsOf)
			if n == 0 {
				continue
			}
			lost, bad, sent, sc, oc, size := r.totals(s, m.Key)
			rows = append(rows, []string{m.Key, s, fmt.Sprint(n), fmt.Sprint(sent), fmt.Sprint(lost), fmt.Sprint(bad),
				fmt.Sprintf("%d B", size), fmt.Sprintf("%.0f%%", sc*100), fmt.Sprintf("%.0f%%", oc*100)})
		}
	}
	return rows
}

// warnings name runs whose answers were not all NOERROR where they must be.
func (r *report) warnings() []string {
	var out []string
	for _, x := range r.results {
		if bad := x.NonNoError(); bad > 0 && (x.Mix == "a" || x.Mix == "srv" || x.Server == "floor") {
			out = append(out, fmt.Sprintf("round %d, %s, %s: %d responses were not NOERROR (%v)", x.Round, x.Mix, x.Server, bad, x.Rcodes))
		}
	}
	return out
}

const (
	footprintTitle = "start-up and memory, one server at a time on its CPU (compare RssAnon and the Go heap: VmRSS counts the binary's pages in the page cache; others' CPU: the share of all CPUs that processes other than the bench, its control planes and the server took)"
	ratioTitle     = "ours/stock, memory after settling"
)

func (l load) String() string {
	return fmt.Sprintf("loading: %d ClusterSetIP imports in each control plane, %d added to each in %.0fs (%.0f per second per plane)",
		l.Imports, l.Added, l.Took.Seconds(), float64(l.Added)/l.Took.Seconds())
}

func mib(kb int) string {
	if kb == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f MiB", float64(kb)/1024)
}

func mibBytes(b int64) string {
	if b == 0 {
		return "-"
	}
	return fmt.Sprintf("%.1f MiB", mibOf(b))
}

// perImport is a heap's size divided by the number of imports, the
// process's own start-up share included.
func perImport(b int64, imports int) string {
	if b == 0 || imports == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f B", float64(b)/float64(imports))
}

func (r *report) footprintRows() [][]string {
	rows := [][]string{{"server", "imports", "time to ready", "VmRSS at ready", "VmRSS settled", "RssAnon settled", "VmHWM",
		"Go heap in use settled", "Go heap sys settled", "Go alloc settled", "Go live heap (after a GC)", "live heap per import", "others' CPU until ready",
		"RssAnon after dnsperf", "Go heap in use after dnsperf", "Go live heap after dnsperf"}}
	for _, f := range r.footprints {
		loaded := []string{"-", "-", "-"}
		if f.LoadedFor > 0 {
			loaded = []string{fmt.Sprintf("%s (%v, %.0f QPS)", mib(f.Loaded.Anon), f.LoadedFor, f.LoadedQPS),
				mibBytes(f.LoadedHeap.HeapInuse), mibBytes(f.LoadedHeap.Live)}
		}
		rows = append(rows, append([]string{f.Label, fmt.Sprint(f.Imports), fmt.Sprintf("%.2fs", f.ReadyIn.Seconds()),
			mib(f.AtReady.RSS), mib(f.Settled.RSS), mib(f.Settled.Anon), mib(f.Settled.HWM),
			mibBytes(f.Heap.HeapInuse), mibBytes(f.Heap.HeapSys), mibBytes(f.Heap.Alloc), mibBytes(f.Heap.Live), perImport(f.Heap.Live, f.Imports), pct(f.Others)}, loaded...))
	}
	return rows
}

// footprintRatioRows are ours/stock per number of imports, of the figures
// that do not depend on the page cache.
func (r *report) footprintRatioRows() [][]string {
	rows := [][]string{{"imports", "RssAnon ours/stock", "Go heap in use ours/stock", "Go live heap ours/stock", "time to ready ours/stock",
		"RssAnon after dnsperf ours/stock", "Go live heap after dnsperf ours/stock"}}
	div := func(a, b float64) string {
		if a == 0 || b == 0 {
			return "-"
		}
		return fmt.Sprintf("%.2f", a/b)
	}
	for _, s := range r.footprints {
		if s.Server != "stock" && !strings.HasPrefix(s.Server, "stock-") {
			continue
		}
		for _, o := range r.footprints {
			if o.Imports != s.Imports || o.Server != "ours"+strings.TrimPrefix(s.Server, "stock") {
				continue
			}
			rows = append(rows, []string{fmt.Sprint(s.Imports),
				div(float64(o.Settled.Anon), float64(s.Settled.Anon)),
				div(float64(o.Heap.HeapInuse), float64(s.Heap.HeapInuse)),
				div(float64(o.Heap.Live), float64(s.Heap.Live)),
				div(o.ReadyIn.Seconds(), s.ReadyIn.Seconds()),
				div(float64(o.Loaded.Anon), float64(s.Loaded.Anon)),
				div(float64(o.LoadedHeap.Live), float64(s.LoadedHeap.Live))})
		}
	}
	return rows
}

func (r *report) propTitle() string {
	return fmt.Sprintf("propagation at %d imports: API write (merge patch of one import's ips, or of one churn import's EndpointSlice) to the first DNS answer with the new address",
		r.props[0].Imports)
}

func (r *report) propRows() [][]string {
	rows := [][]string{{"server", "imports", "writes (ServiceImport + EndpointSlice)", "rate", "seen", "p50", "p90", "p99", "max", "API ack p50", "API ack p99", "ack to answer p50", "ack to answer p99",
		"to the bench's watch p50", "to the bench's watch p99", "watch event to answer p50", "watch event to answer p99", "others' CPU"}}
	for _, p := range r.props {
		rows = append(rows, []string{p.Label, fmt.Sprint(p.Imports), fmt.Sprintf("%d + %d", p.Writes, p.ESWrites), fmt.Sprintf("%.0f/s + %.0f/s", p.Achieved, p.ESAchieved),
			fmt.Sprint(p.Seen), fmt.Sprintf("%.1f ms", ms(p.P50)), fmt.Sprintf("%.1f ms", ms(p.P90)),
			fmt.Sprintf("%.1f ms", ms(p.P99)), fmt.Sprintf("%.1f ms", ms(p.Max)), fmt.Sprintf("%.1f ms", ms(p.AckP50)),
			fmt.Sprintf("%.1f ms", ms(p.AckP99)), fmt.Sprintf("%.1f ms", ms(p.AfterAckP50)), fmt.Sprintf("%.1f ms", ms(p.AfterAckP99)),
			fmt.Sprintf("%.1f ms", ms(p.EventP50)), fmt.Sprintf("%.1f ms", ms(p.EventP99)),
			fmt.Sprintf("%.1f ms", ms(p.AfterEventP50)), fmt.Sprintf("%.1f ms", ms(p.AfterEventP99)), pct(p.Others)})
	}
	return rows
}

const (
	churnTitle    = "serving while the cluster changes: A queries (random over every import) from the same server alone and while the writes above are sent; dnsperf shares its CPU with the control planes, which serve the writes"
	replicasTitle = "replicas started together against one API server (each GOMAXPROCS=1, all on the servers' CPU): time until the last is ready, and the kube-apiserver's CPU time and VmRSS (sampled every 100 ms) meanwhile"
)

func (r *report) churnRows() [][]string {
	rows := [][]string{{"server", "imports", "QPS alone", "QPS while writing", "while writing / alone", "per CPU-second: while writing / alone", "write to answer p99, no queries", "write to answer p99, during dnsperf",
		"watch event to answer p99, no queries", "watch event to answer p99, during dnsperf", "writes answered"}}
	for _, p := range r.props {
		if p.Idle.QPS == 0 {
			continue
		}
		alone, aloneEvent := "-", "-"
		for _, q := range r.props {
			if q.Server == p.Server && q.Idle.QPS == 0 {
				alone, aloneEvent = fmt.Sprintf("%.1f ms", ms(q.P99)), fmt.Sprintf("%.1f ms", ms(q.AfterEventP99))
			}
		}
		div := func(a, b float64) string {
			if b == 0 {
				return "-"
			}
			return fmt.Sprintf("%.2f", a/b)
		}
		rows = append(rows, []string{p.Label, fmt.Sprint(p.Imports), fmt.Sprintf("%.0f", p.Idle.QPS), fmt.Sprintf("%.0f", p.Busy.QPS),
			div(p.Busy.QPS, p.Idle.QPS), div(p.Busy.PerCPU(), p.Idle.PerCPU()), alone, fmt.Sprintf("%.1f ms", ms(p.P99)),
			aloneEvent, fmt.Sprintf("%.1f ms", ms(p.AfterEventP99)),
			fmt.Sprintf("%d of %d", p.Seen, p.Writes+p.ESWrites)})
	}
	return rows
}

func (r *report) replicaRows() [][]string {
	rows := [][]string{{"server", "replicas", "imports", "all ready in", "kube-apiserver CPU", "kube-apiserver VmRSS before", "peak", "growth"}}
	for _, x := range r.replicas {
		if x.Err != "" {
			rows = append(rows, []string{x.Label, fmt.Sprint(x.Replicas), fmt.Sprint(x.Imports), "failed: " + strings.SplitN(x.Err, "\n", 2)[0], "-", mib(x.APIBefore), mib(x.APIPeak), "-"})
			continue
		}
		rows = append(rows, []string{x.Label, fmt.Sprint(x.Replicas), fmt.Sprint(x.Imports), fmt.Sprintf("%.1f s", x.AllReady.Seconds()),
			fmt.Sprintf("%.1f CPU-s", x.APICPU), mib(x.APIBefore), mib(x.APIPeak), mib(x.APIPeak - x.APIBefore)})
	}
	return rows
}
