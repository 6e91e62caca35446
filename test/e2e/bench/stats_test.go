package main

import (
	"errors"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// The statistics behind the published tables: medians with their range,
// ratios against a target, and nearest-rank percentiles.

func TestMedian(t *testing.T) {
	for _, tc := range []struct {
		v    []float64
		want float64
	}{
		{[]float64{7}, 7},
		{[]float64{3, 1, 2}, 2},
		{[]float64{4, 1, 3, 2}, 2.5}, // the mean of the middle two
		{[]float64{5, 5, 1, 9, 5}, 5},
	} {
		v := slices.Clone(tc.v)
		if got := median(v); got != tc.want || !slices.Equal(v, tc.v) {
			t.Errorf("median(%v) = %v, want %v; v after: %v", tc.v, got, tc.want, v)
		}
	}
}

func TestStat(t *testing.T) {
	r := &report{results: []perfResult{
		{Server: "ours", Mix: "A", QPS: 300},
		{Server: "ours", Mix: "A", QPS: 100},
		{Server: "ours", Mix: "A", QPS: 200},
		{Server: "stock", Mix: "A", QPS: 50},
		{Server: "ours", Mix: "SRV", QPS: 999},
	}}
	med, lo, hi, n := r.stat("ours", "A", qpsOf)
	if med != 200 || lo != 100 || hi != 300 || n != 3 {
		t.Errorf("ours A: median %v, range %v-%v, %d runs; want 200, 100-300, 3", med, lo, hi, n)
	}
	if med, lo, hi, n := r.stat("floor", "A", qpsOf); med != 0 || lo != 0 || hi != 0 || n != 0 {
		t.Errorf("no runs: %v %v %v %d, want zeros", med, lo, hi, n)
	}
}

// pairedRatio: per round the ratio of a's to b's result in the mix, where
// the round has both above 0; then their median, lowest and highest.
func TestPairedRatio(t *testing.T) {
	run := func(round int, server, mix string, qps float64) perfResult {
		return perfResult{Round: round, Server: server, Mix: mix, QPS: qps}
	}
	r := &report{results: []perfResult{
		run(1, "ours", "A", 300), run(1, "stock", "A", 200), run(1, "floor", "A", 50), // 300/200 = 1.5
		run(2, "ours", "A", 300), run(2, "stock", "A", 100), // 300/100 = 3
		run(3, "ours", "A", 100), run(3, "stock", "A", 100), // 100/100 = 1
		run(4, "stock", "A", 200), run(4, "ours", "A", 400), // 400/200 = 2
		run(5, "ours", "A", 500), run(5, "stock", "A", 0), // stock 0: no ratio
		run(6, "stock", "A", 100),                           // no ours: no ratio
		run(1, "ours", "B", 900), run(1, "stock", "B", 100), // another mix
	}}
	for _, tc := range []struct{ a, b, mix, want string }{
		// ratios 1.5, 3, 1, 2; sorted 1, 1.5, 2, 3: median (1.5+2)/2 = 1.75,
		// lowest 1, highest 3.
		{"ours", "stock", "A", "1.75 (1.00–3.00)"},
		// floor ran in round 1 only: 300/50 = 6.
		{"ours", "floor", "A", "6.00 (6.00–6.00)"},
		// B has one round: 900/100 = 9.
		{"ours", "stock", "B", "9.00 (9.00–9.00)"},
		// stock over ours in A: 1/1.5 = 0.667, 1/3 = 0.333, 1, 1/2 = 0.5;
		// sorted 0.333, 0.5, 0.667, 1: median (0.5+0.667)/2 = 0.583.
		{"stock", "ours", "A", "0.58 (0.33–1.00)"},
		{"ours", "stock", "C", "-"}, // no runs
	} {
		if got := r.pairedRatio(tc.a, tc.b, tc.mix, qpsOf); got != tc.want {
			t.Errorf("pairedRatio(%s, %s, %s) = %q, want %q", tc.a, tc.b, tc.mix, got, tc.want)
		}
	}
}

// share: over the span, all CPUs' busy time less the measured processes'
// CPU time (pids: the growth since the start; started: whole), as a share of
// all CPUs' time; -1 when either reading of the CPUs failed or no time
// passed, 0 rather than below.
func TestOthersShare(t *testing.T) {
	// pids 1 and 2 had 2 and 3 CPU seconds at the start (own 5); now 10 and
	// 7; pid 3, started within the span, 4.
	seconds := map[int]float64{1: 10, 2: 7, 3: 4}
	start := harness.CPUTime{Busy: 100, Total: 400}
	for _, tc := range []struct {
		name       string
		start, end harness.CPUTime
		err        error
		started    []int
		want       float64
	}{
		// own (10+7)-5 = 12: (300-100-12)/(800-400) = 188/400 = 0.47.
		{"span", start, harness.CPUTime{Busy: 300, Total: 800}, nil, nil, 0.47},
		// own 12+4 = 16: (200-16)/400 = 184/400 = 0.46.
		{"a server started", start, harness.CPUTime{Busy: 300, Total: 800}, nil, []int{3}, 0.46},
		// (110-100-12)/400 = -2/400: 0.
		{"below 0", start, harness.CPUTime{Busy: 110, Total: 800}, nil, nil, 0},
		{"no time passed", start, start, nil, nil, -1},
		{"end unread", start, harness.CPUTime{}, errors.New("no /proc"), nil, -1},
		{"start unread", harness.CPUTime{}, harness.CPUTime{Busy: 300, Total: 800}, nil, nil, -1},
	} {
		m := &cpuSpan{at: tc.start, own: 5, pids: []int{1, 2},
			read:    func(string) (harness.CPUTime, error) { return tc.end, tc.err },
			seconds: func(pid int) (float64, error) { return seconds[pid], nil }}
		if got := m.others(tc.started...); math.Abs(got-tc.want) > 1e-12 {
			t.Errorf("%s: others = %v, want %v", tc.name, got, tc.want)
		}
	}
}

// meanPct: the mean of a metric over a group's runs, in whole percent.
func TestMeanPct(t *testing.T) {
	other := meanPct(func(x perfResult) float64 { return x.OtherCPU })
	for _, tc := range []struct {
		v    []float64
		want string
	}{
		{[]float64{0.5}, "50%"},
		{[]float64{0.1, 0.2, 0.6}, "30%"},    // 0.9/3 = 0.3
		{[]float64{0.125, 0.13}, "13%"},      // 0.255/2 = 0.1275: 12.75% rounds to 13%
		{[]float64{0.004, 0.002}, "0%"},      // 0.006/2 = 0.003: 0.3%
		{[]float64{1, 0.9, 0.8, 0.7}, "85%"}, // 3.4/4 = 0.85
		{[]float64{-1, -1}, "-"},             // unknown
	} {
		var g []perfResult
		for _, v := range tc.v {
			g = append(g, perfResult{OtherCPU: v})
		}
		if got := other(g); got != tc.want {
			t.Errorf("meanPct(%v) = %q, want %q", tc.v, got, tc.want)
		}
	}
}

func TestRatio(t *testing.T) {
	for _, tc := range []struct {
		a, b, want float64
		ratio      float64
		ok         bool
		text       string
	}{
		{a: 150, b: 100, want: 1.5, ratio: 1.5, ok: true, text: "1.50 (target ≥1.5: met)"},
		{a: 149, b: 100, want: 1.5, ratio: 1.49, ok: false, text: "1.49 (target ≥1.5: MISSED)"},
		{a: 0, b: 100, want: 1.5, text: "-"}, // a server without a result: no ratio
		{a: 100, b: 0, want: 1.5, text: "-"},
	} {
		got := ratio(tc.a, tc.b, tc.want)
		if got.ratio != tc.ratio || got.ok != tc.ok || got.String() != tc.text {
			t.Errorf("ratio(%v, %v, %v) = %+v %q, want %v %v %q", tc.a, tc.b, tc.want, got, got, tc.ratio, tc.ok, tc.text)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ten []time.Duration // 1ms .. 10ms
	for i := 1; i <= 10; i++ {
		ten = append(ten, time.Duration(i)*time.Millisecond)
	}
	var hundred []time.Duration
	for i := 1; i <= 100; i++ {
		hundred = append(hundred, time.Duration(i))
	}
	for _, tc := range []struct {
		sorted []time.Duration
		q      float64
		want   time.Duration
	}{
		{nil, 0.5, 0},
		{ten, 0, time.Millisecond},
		{ten, 0.5, 5 * time.Millisecond},   // nearest rank: the 5th of 10
		{ten, 0.51, 6 * time.Millisecond},  // rank 5.1 rounds up
		{ten, 0.9, 9 * time.Millisecond},   // the 9th
		{ten, 0.99, 10 * time.Millisecond}, // rank 9.9: the 10th
		{ten, 1, 10 * time.Millisecond},
		{hundred, 0.99, 99},
		{hundred, 0.999, 100},
		{[]time.Duration{42}, 0.5, 42},
		{nil, 0.5, 0},
		{[]time.Duration{3, 1, 2}, 0.5, 2}, // sorted first
	} {
		if got := latencies(tc.sorted).q(tc.q); got != tc.want {
			t.Errorf("latencies(%d values).q(%v) = %v, want %v", len(tc.sorted), tc.q, got, tc.want)
		}
	}
}

// summarize: per-write latencies from sending to the answer, to the API
// server's ack and to the watch event, keyed stream<<20 | write.
func TestSummarize(t *testing.T) {
	ms := time.Millisecond
	streams := []writeStream{{n: 3}, {n: 2}}
	acks := map[int]time.Duration{0: 2 * ms, 1: 4 * ms, 2: 6 * ms, 1 << 20: 1 * ms}
	seen := map[int]time.Duration{0: 10 * ms, 1: 20 * ms, 1 << 20: 30 * ms}
	event := map[int]time.Duration{0: 5 * ms, 1 << 20: 10 * ms}
	var p propagation
	p.summarize(streams, [2]time.Duration{time.Second, 2 * time.Second}, acks, seen, event)
	if p.Writes != 3 || p.Seen != 3 || p.Achieved != 3 || p.ESWrites != 2 || p.ESAchieved != 1 {
		t.Errorf("summarize: counts %+v", p)
	}
	for _, tc := range []struct {
		kind string
		q    float64
		want time.Duration
	}{
		{"answer", 0.5, 20 * ms}, {"answer", 0.9, 30 * ms}, {"answer", 0.99, 30 * ms}, {"answer", 1, 30 * ms},
		{"ack", 0.5, 2 * ms}, {"ack", 0.99, 6 * ms},
		{"after ack", 0.5, 16 * ms}, {"after ack", 0.99, 29 * ms},
		{"event", 0.5, 5 * ms}, {"event", 0.99, 10 * ms},
		{"after event", 0.5, 5 * ms}, {"after event", 0.99, 20 * ms},
	} {
		if got := p.Lat[tc.kind].q(tc.q); got != tc.want {
			t.Errorf("summarize: %s q(%v) = %v, want %v", tc.kind, tc.q, got, tc.want)
		}
	}
}

// TestInClusterAdded: what a stanza adds is the median of the runs with it
// less the median of the runs without, and the ratio cell compares ours'
// with stock's against a "at most" target.
func TestInClusterAdded(t *testing.T) {
	runs := func(cpu ...float64) (out []inRun) {
		for _, c := range cpu {
			out = append(out, inRun{ReadyCPU: c})
		}
		return out
	}
	in := inCluster{Imports: 10, Runs: [4][]inRun{runs(0.1, 0.3, 0.2), runs(2.2, 1.2, 9), runs(0.2, 0.2, 0.5), runs(0.7, 1.2, 0.9)}}
	cpu := func(r inRun) float64 { return r.ReadyCPU }
	// stock: median 2.2 less 0.2; ours: 0.9 less 0.2.
	if s, o := in.added(0, cpu), in.added(2, cpu); math.Abs(s-2.0) > 1e-9 || math.Abs(o-0.7) > 1e-9 {
		t.Errorf("added: stock %v, ours %v; want 2.0 and 0.7", s, o)
	}
	cols := inAdded("CPU", "s", 0.5, cpu)
	for i, want := range []string{"2.00 s", "0.70 s", "0.35 (target ≤0.5: met)"} {
		if got := cols[i].f(in); got != want {
			t.Errorf("column %q: %q, want %q", cols[i].h, got, want)
		}
	}
	if got := inAdded("CPU", "s", 0.3, cpu)[2].f(in); got != "0.35 (target ≤0.3: MISSED)" {
		t.Errorf("ratio cell against 0.3: %q", got)
	}
	in.Runs[1] = runs(0.2) // stock's stanza added nothing: no ratio
	if got := cols[2].f(in); got != "-" {
		t.Errorf("ratio cell with nothing added by stock: %q, want -", got)
	}
}

// The summary picks its figures from the tables the report renders; the
// expected values are worked out by hand from the data below.
func TestSummary(t *testing.T) {
	ms := func(d ...time.Duration) latencies { return latencies(d) }
	ready := func(label string, times ...float64) startsRow {
		return startsRow{Label: label, Imports: 100000, Times: times, Ours: 5}
	}
	fp := func(server string, imports int, readyIn time.Duration, anon, live, loadedAnon int) footprint {
		f := footprint{Server: server, Imports: imports, ReadyIn: readyIn, LoadedFor: time.Minute}
		f.Settled.Anon, f.Settled.Live.Alloc, f.Loaded.Anon = anon<<10, int64(live)<<20, loadedAnon<<10
		return f
	}
	in := inCluster{Imports: 10000}
	for k, cpu := range []float64{0.1, 1.1, 0.1, 0.6} { // adds 1.0 for stock, 0.5 for ours
		in.Runs[k] = []inRun{{ReadyCPU: cpu, WriteCPU: 2 * cpu}}
	}
	r := &report{
		cfg: config{starts: 3},
		mixes: []mix{{Key: "a", Label: "A, random over 2000 ClusterSetIP names", Floor: true},
			{Key: "srv", Label: "SRV _http._tcp, random over 2000"}, {Key: "headless", Label: "headless A (3×40 endpoints)"}},
		results: []perfResult{
			{Server: "floor", Mix: "a", QPS: 100, ServerCPU: 1}, {Server: "stock", Mix: "a", QPS: 50, ServerCPU: 1}, {Server: "ours", Mix: "a", QPS: 90, ServerCPU: 1},
			{Server: "stock", Mix: "srv", QPS: 40, ServerCPU: 1}, {Server: "ours", Mix: "srv", QPS: 80, ServerCPU: 1},
			{Server: "stock", Mix: "headless", QPS: 10, ServerCPU: 1}, {Server: "ours", Mix: "headless", QPS: 35, ServerCPU: 1},
		},
		footprints: []footprint{fp("stock", 10000, time.Second, 20, 8, 0), fp("ours", 10000, time.Second, 20, 8, 0), // the last size's figures count
			fp("stock", 100000, 8*time.Second, 200, 80, 250), fp("ours", 100000, 6*time.Second, 60, 32, 75)},
		starts:   []startsRow{ready("stock", 8, 10, 9), ready("ours", 4, 5, 6), ready("the LIST floor", 4, 4, 4), ready("the WatchList floor", 5, 5, 5)},
		replicas: []replicaStart{{Label: "stock", AllReady: 200 * time.Second, APICPU: 100}, {Label: "ours", AllReady: 150 * time.Second, APICPU: 40}},
		props: []propagation{
			{Label: "stock v1.15.0 kubernetes", Lat: map[string]latencies{"answer": ms(180 * time.Millisecond)}},
			{Label: "stock v1.15.0 kubernetes, during dnsperf", Idle: perfResult{QPS: 100}, Busy: perfResult{QPS: 80}},
			{Label: "ours multicluster", Lat: map[string]latencies{"answer": ms(20 * time.Millisecond)}},
			{Label: "ours multicluster, during dnsperf", Idle: perfResult{QPS: 100}, Busy: perfResult{QPS: 85}},
		},
		inCluster: []inCluster{in},
		soak: &soakRun{samples: []soakSample{{}, {Updates: 1000, Values: [6]float64{80, 30, 22, 14, 52, 18}},
			{Updates: 2000, Values: [6]float64{84, 33.6, 22, 14.35, 52, 18}}}},
	}
	want := [][]string{
		{"A queries per CPU-second, ours/stock", "1.80 (target ≥1.5: met)"},
		{"`_http._tcp` SRV queries per CPU-second, ours/stock", "2.00 (target ≥1.5: met)"},
		{"headless A queries per CPU-second, ours/stock", "3.50 (target ≥3: met)"},
		{"A queries per CPU-second, ours/whoami floor", "0.90 (target ≥0.85: met)"},
		{"RssAnon after start-up, ours/stock, 100000 imports", "0.30 (target ≤0.4: met)"},
		{"RssAnon after dnsperf, ours/stock, 100000 imports", "0.30 (target ≤0.4: met)"},
		{"Go live heap, ours/stock, 100000 imports", "0.40"},
		{"time to ready, one start, ours/stock, 100000 imports", "0.75 (target ≤0.5: MISSED)"},
		{"time to ready, median of the starts, ours/stock", "0.56 (target ≤0.5: MISSED)"},
		{"time to ready, median of the starts, ours/the WatchList floor", "1.00 (target ≤1.2: met)"},
		{"time to ready, median of the starts, ours/the LIST floor", "1.25"},
		{"replicas started together: kube-apiserver CPU, ours/stock", "0.40 (40.0 CPU-s against 100.0 CPU-s) (target ≤0.5: met)"},
		{"replicas started together: all ready, ours/stock", "0.75 (150.0 s against 200.0 s)"},
		{"A throughput while writing / alone, ours", "0.85 (target ≥0.9: MISSED)"},
		{"A throughput while writing / alone, stock", "0.80"},
		{"write to answer p99, no queries, ours (ms)", "20.0 ms (target ≤100: met)"},
		{"write to answer p99, no queries, stock (ms)", "180.0 ms"},
		{"in the cluster's own CoreDNS, CPU to ready the stanza adds, ours/stock, 10000 imports", "0.50 (target ≤0.5: met)"},
		{"in the cluster's own CoreDNS, RssAnon the stanza adds, ours/stock, 10000 imports", "-"},
		{"in the cluster's own CoreDNS, Go live heap the stanza adds, ours/stock, 10000 imports", "-"},
		{"in the cluster's own CoreDNS, CPU under writes the stanza adds, ours/stock, 10000 imports", "0.50 (target ≤0.5: met)"},
		{"long churn, RssAnon: at the end against the first sample after writes", "+12.0% (FAIL)"},
		{"long churn, Go live heap: at the end against the first sample after writes", "+2.5% (PASS)"},
		{"long churn, goroutines: at the end against the first sample after writes", "+0.0% (PASS)"},
		{"long churn, open fds: at the end against the first sample after writes", "+0.0% (PASS)"},
	}
	got := summary(r.tables()).rows
	for k := range max(len(got), len(want)) {
		if k >= len(got) || k >= len(want) || !slices.Equal(got[k], want[k]) {
			t.Errorf("row %d: got %q, want %q", k, at(got, k), at(want, k))
		}
	}
	if rows := summary((&report{}).tables()).rows; len(rows) != 0 {
		t.Errorf("nothing measured: got rows %q", rows)
	}
	// A ratio over nothing is no ratio and meets no target; without the
	// row to compare with, there is no figure.
	zero := []replicaStart{{Label: "stock"}, {Label: "ours", AllReady: 150 * time.Second, APICPU: 40}}
	want = [][]string{
		{"replicas started together: kube-apiserver CPU, ours/stock", "40.0 CPU-s against 0.0 CPU-s"},
		{"replicas started together: all ready, ours/stock", "150.0 s against 0.0 s"},
	}
	for _, replicas := range [][]replicaStart{zero, zero[1:]} {
		got := summary((&report{replicas: replicas}).tables()).rows
		if want := want[:cond(len(replicas) == 2, 2, 0)]; !slices.EqualFunc(got, want, slices.Equal) {
			t.Errorf("replicas %v: got %q, want %q", replicas, got, want)
		}
	}
}

func at(rows [][]string, k int) []string { return cond(k < len(rows), rows[k], nil) }
