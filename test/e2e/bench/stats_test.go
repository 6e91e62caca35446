package main

import (
	"testing"
	"time"
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
		if got := median(append([]float64(nil), tc.v...)); got != tc.want {
			t.Errorf("median(%v) = %v, want %v", tc.v, got, tc.want)
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
