package main

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"time"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// mix is one dnsperf query file, and the name and type the check before
// measuring asks each server; the floor runs only the mixes with Floor.
type mix struct {
	Key, Label, File   string // Key: a, srv, headless
	Floor              bool
	Sample, SampleType string
}

// writeMixes writes the query files into dir: lines random draws (seeded)
// over the n imports for A and SRV, and the one headless name.
func writeMixes(dir string, fx fixture, n, lines int, seed uint64) ([]mix, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	srv := func(name string) string { return "_" + portName + "._tcp." + name }
	mixes := []mix{
		{Key: "a", Label: fmt.Sprintf("A, random over %d ClusterSetIP names", n), Floor: true, Sample: fx.name(0), SampleType: "A"},
		{Key: "srv", Label: fmt.Sprintf("SRV _http._tcp, random over %d", n), Sample: srv(fx.name(0)), SampleType: "SRV"},
		{Key: "headless", Label: fmt.Sprintf("headless A (%d×%d endpoints)", fx.clusters, fx.endpoints), Sample: headlessFQDN(), SampleType: "A"},
	}
	line := map[string]func() string{"a": func() string { return fx.name(r.IntN(n)) }, "srv": func() string { return srv(fx.name(r.IntN(n))) }, "headless": headlessFQDN}
	for k := range mixes {
		m := &mixes[k]
		m.File = filepath.Join(dir, "queries-"+m.Key+".txt")
		f, err := os.Create(m.File)
		if err != nil {
			return nil, err
		}
		w := bufio.NewWriter(f)
		for range lines {
			fmt.Fprintf(w, "%s %s\n", line[m.Key](), m.SampleType)
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return nil, err
		}
		if err := f.Close(); err != nil {
			return nil, err
		}
	}
	return mixes, nil
}

// checkServer asks s each mix's sample name with dig and checks the answer
// with the contract's check, on the bench's own fixture; whoami answers
// every name with the client's address, in the additional section, so only
// its rcode is checked.
func checkServer(s *server, mixes []mix, fx fixture) error {
	floor := s.Name == "floor"
	for _, m := range mixes[:cond(floor, 1, len(mixes))] {
		r, err := harness.Dig(s.Port, m.Sample, m.SampleType)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
		}
		w := contract.Want{}
		switch m.Key {
		case "a":
			w.Answer = []string{contract.A(m.Sample, importIP(0))}
		case "srv":
			w.Answer = []string{contract.SRV(m.Sample, 100, portNumber, fx.name(0))}
		case "headless":
			for c := range fx.clusters {
				for e := range fx.endpoints {
					w.Answer = append(w.Answer, contract.A(headlessFQDN(), endpointIP(c, e)))
				}
			}
		}
		summary := fmt.Sprintf("%d answer records", len(r.Answer))
		if got := contract.Briefs(r.Answer); len(got) == 1 {
			summary = got[0]
		}
		if floor {
			summary = fmt.Sprintf("%d additional records (whoami)", len(r.Additional))
			if r.Rcode != "NOERROR" {
				err = fmt.Errorf("rcode %s, want NOERROR", r.Rcode)
			}
		} else {
			err = w.Check(r.Msg(), contract.TTL) // stock's kubernetes plugin has the same default TTL
		}
		if err != nil {
			return fmt.Errorf("%s: %s %s: %v\n%s", s.Name, m.Sample, m.SampleType, err, r)
		}
		logf("check: %-5s dig %s %s -> %s, aa=%v: %s", s.Name, m.Sample, m.SampleType, r.Rcode, r.AA(), summary)
	}
	return nil
}

// perfResult is one dnsperf run, parsed.
type perfResult struct {
	Server, Mix string
	Round       int
	QPS         float64
	Sent, Lost  int
	Rcodes      map[string]int
	AvgLatency  float64 // seconds
	RespBytes   int     // average response size
	// ServerCPU is the server's CPU time over the run's wall time (1 = a
	// whole core); OtherCPU the rest of its core's busy time, another
	// process's (or the kernel's) share of the server's core.
	ServerCPU, OtherCPU float64
}

// PerCPU is queries answered per second of the server's CPU time: what it
// would answer with a whole CPU to itself, were it CPU-bound throughout.
func (r perfResult) PerCPU() float64 { return cond(r.ServerCPU <= 0, 0, r.QPS/r.ServerCPU) }

// NonNoError counts responses whose rcode was not NOERROR.
func (r perfResult) NonNoError() int {
	n := 0
	for code, c := range r.Rcodes {
		n += cond(code != "NOERROR", c, 0)
	}
	return n
}

var (
	rePerfRcode  = regexp.MustCompile(`([A-Z]+) (\d+) \(`)
	rePerfRcodes = regexp.MustCompile(`Response codes:\s+(.*)`)
	rePerfFields = []*regexp.Regexp{regexp.MustCompile(`Queries per second:\s+([0-9.]+)`), regexp.MustCompile(`Queries sent:\s+(\d+)`),
		regexp.MustCompile(`Queries lost:\s+(\d+)`), regexp.MustCompile(`Average packet size:\s+request \d+, response (\d+)`),
		regexp.MustCompile(`Average Latency \(s\):\s+([0-9.]+)`)}
)

// waitQuiet waits, at most within, until the busy share of cpu over half a
// second is at most threshold (the servers on it are idle between runs, so
// what is busy is someone else).
func waitQuiet(ctx context.Context, cpu string, threshold float64, within time.Duration) {
	for start := time.Now(); time.Since(start) < within && ctx.Err() == nil; {
		a, err := harness.ReadCPUTime(cpu)
		time.Sleep(500 * time.Millisecond)
		b, berr := harness.ReadCPUTime(cpu)
		if err != nil || berr != nil || b.Total == a.Total || (b.Busy-a.Busy)/(b.Total-a.Total) <= threshold {
			return
		}
	}
}

// runDnsperf runs dnsperf for d against s with the mix's query file, pinned
// to -load-cpu, EDNS0 on (4096-byte UDP responses: the headless answer is
// about 2 KB), and keeps its output in dnsperf-<name>.txt.
func runDnsperf(ctx context.Context, c config, d time.Duration, s *server, m mix, name string) (perfResult, error) {
	res := perfResult{Server: s.Name, Mix: m.Key, Rcodes: map[string]int{}}
	ctx, cancel := context.WithTimeout(ctx, d+60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "taskset", "-c", c.loadCPU, "dnsperf", "-s", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-d", m.File,
		"-l", strconv.Itoa(int(d.Round(time.Second).Seconds())), "-c", strconv.Itoa(c.clients), "-q", strconv.Itoa(c.outstanding),
		"-T", "1", "-t", "5", "-b", "1024", "-e")
	t0, err1 := harness.CPUSeconds(s.PID())
	c0, err2 := harness.ReadCPUTime(c.serverCPU)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	t1, err3 := harness.CPUSeconds(s.PID())
	c1, err4 := harness.ReadCPUTime(c.serverCPU)
	_ = os.WriteFile(filepath.Join(c.out, "dnsperf-"+name+".txt"), out, 0o644)
	if err != nil {
		return res, fmt.Errorf("dnsperf: %v\n%s", err, out)
	}
	if err1 == nil && err2 == nil && err3 == nil && err4 == nil {
		res.ServerCPU = (t1 - t0) / wall.Seconds()
		if total := c1.Total - c0.Total; total > 0 {
			res.OtherCPU = max(0, (c1.Busy-c0.Busy-(t1-t0))/total)
		}
	}
	text := string(out)
	var v [5]float64
	for k, re := range rePerfFields {
		if m := re.FindStringSubmatch(text); m != nil {
			v[k], _ = strconv.ParseFloat(m[1], 64)
		} else if k == 0 {
			return res, fmt.Errorf("no 'Queries per second' in dnsperf's output:\n%s", text)
		}
	}
	res.QPS, res.Sent, res.Lost, res.RespBytes, res.AvgLatency = v[0], int(v[1]), int(v[2]), int(v[3]), v[4]
	if m := rePerfRcodes.FindStringSubmatch(text); m != nil {
		for _, rc := range rePerfRcode.FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(rc[2])
			res.Rcodes[rc[1]] += n
		}
	}
	return res, nil
}
