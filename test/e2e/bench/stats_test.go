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
