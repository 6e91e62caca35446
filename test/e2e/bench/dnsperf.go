package main

import (
	"github.com/clustersetdns/multicluster/test/e2e/harness"

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
)

// mix is one dnsperf query file.
type mix struct {
	Key   string // a, srv, headless
	Label string
	File  string
	// Floor says whether the whoami floor runs this mix too.
	Floor bool
	// Digs are what the checks before measuring ask each server.
	Sample, SampleType string
}

// writeMixes writes the query files into dir: lines random draws (seeded)
// over the n imports for A and SRV, and the one headless name.
func writeMixes(dir string, fx fixture, n, lines int, seed uint64) ([]mix, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	write := func(file string, line func() string) (string, error) {
		path := filepath.Join(dir, file)
		f, err := os.Create(path)
		if err != nil {
			return "", err
		}
		w := bufio.NewWriter(f)
		for range lines {
			w.WriteString(line())
			w.WriteByte('\n')
		}
		if err := w.Flush(); err != nil {
			f.Close()
			return "", err
		}
		return path, f.Close()
	}
	a, err := write("queries-a.txt", func() string { return fx.name(r.IntN(n)) + " A" })
	if err != nil {
		return nil, err
	}
	srv, err := write("queries-srv.txt", func() string {
		return "_" + portName + "._tcp." + fx.name(r.IntN(n)) + " SRV"
	})
	if err != nil {
		return nil, err
	}
	hl, err := write("queries-headless.txt", func() string { return headlessFQDN() + " A" })
	if err != nil {
		return nil, err
	}
	return []mix{
		{Key: "a", Label: fmt.Sprintf("A, random over %d ClusterSetIP names", n), File: a, Floor: true,
			Sample: fx.name(0), SampleType: "A"},
		{Key: "srv", Label: fmt.Sprintf("SRV _http._tcp, random over %d", n), File: srv,
			Sample: "_" + portName + "._tcp." + fx.name(0), SampleType: "SRV"},
		{Key: "headless", Label: fmt.Sprintf("headless A (%d×%d endpoints)", fx.clusters, fx.endpoints), File: hl,
			Sample: headlessFQDN(), SampleType: "A"},
	}, nil
}

// perfOpts are dnsperf's settings.
type perfOpts struct {
	CPU         string        // taskset CPU list for dnsperf
	ServerCPU   string        // the CPU the server is pinned to, for its busy time
	Duration    time.Duration // -l
	Clients     int           // -c
	Outstanding int           // -q
}

// perfResult is one dnsperf run, parsed.
type perfResult struct {
	Server, Mix string
	Round       int

	QPS        float64
	Sent       int
	Completed  int
	Lost       int
	Rcodes     map[string]int
	AvgLatency float64 // seconds
	RespBytes  int     // average response size
	// ServerCPU is the server's CPU time over the run's wall time (1 = a
	// whole core); OtherCPU the rest of its core's busy time, another
	// process's (or the kernel's) share of the server's core.
	ServerCPU, OtherCPU float64
	LoadAvg             string
	// Waited is how long the run waited for its server's CPU to be quiet.
	Waited time.Duration
	Output string
}

// PerCPU is queries answered per second of the server's CPU time: what it
// would answer with a whole CPU to itself, were it CPU-bound throughout.
func (r perfResult) PerCPU() float64 {
	if r.ServerCPU <= 0 {
		return 0
	}
	return r.QPS / r.ServerCPU
}

// NonNoError counts responses whose rcode was not NOERROR.
func (r perfResult) NonNoError() int {
	n := 0
	for code, c := range r.Rcodes {
		if code != "NOERROR" {
			n += c
		}
	}
	return n
}

var (
	rePerfQPS     = regexp.MustCompile(`Queries per second:\s+([0-9.]+)`)
	rePerfSent    = regexp.MustCompile(`Queries sent:\s+(\d+)`)
	rePerfDone    = regexp.MustCompile(`Queries completed:\s+(\d+)`)
	rePerfLost    = regexp.MustCompile(`Queries lost:\s+(\d+)`)
	rePerfRcodes  = regexp.MustCompile(`Response codes:\s+(.*)`)
	rePerfRcode   = regexp.MustCompile(`([A-Z]+) (\d+) \(`)
	rePerfLatency = regexp.MustCompile(`Average Latency \(s\):\s+([0-9.]+)`)
	rePerfSize    = regexp.MustCompile(`Average packet size:\s+request \d+, response (\d+)`)
)

// waitQuiet waits, at most within, until the busy share of cpu over half a
// second is at most threshold (the servers on it are idle between runs, so
// what is busy is someone else), and returns how long it waited.
func waitQuiet(ctx context.Context, cpu string, threshold float64, within time.Duration) time.Duration {
	start := time.Now()
	for time.Since(start) < within && ctx.Err() == nil {
		a, err := harness.ReadCPUTime(cpu)
		if err != nil {
			break
		}
		time.Sleep(500 * time.Millisecond)
		b, err := harness.ReadCPUTime(cpu)
		if err != nil || b.Total == a.Total {
			break
		}
		if (b.Busy-a.Busy)/(b.Total-a.Total) <= threshold {
			break
		}
	}
	return time.Since(start)
}

// runDnsperf runs dnsperf against s with the mix's query file, pinned to
// o.CPU, EDNS0 on (4096-byte UDP responses: the headless answer is about
// 2 KB), bounded by its -l and a context deadline.
func runDnsperf(ctx context.Context, s *server, m mix, o perfOpts, logPath string) (perfResult, error) {
	res := perfResult{Server: s.Name, Mix: m.Key, Rcodes: map[string]int{}}
	ctx, cancel := context.WithTimeout(ctx, o.Duration+60*time.Second)
	defer cancel()
	secs := strconv.Itoa(int(o.Duration.Round(time.Second).Seconds()))
	args := []string{"taskset", "-c", o.CPU, "dnsperf",
		"-s", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-d", m.File,
		"-l", secs, "-c", strconv.Itoa(o.Clients), "-q", strconv.Itoa(o.Outstanding),
		"-T", "1", "-t", "5", "-b", "1024", "-e"}
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	serverCPU := o.ServerCPU
	res.LoadAvg = harness.LoadAvg()
	t0, err1 := s.CPUSeconds()
	c0, err2 := harness.ReadCPUTime(serverCPU)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	t1, err3 := s.CPUSeconds()
	c1, err4 := harness.ReadCPUTime(serverCPU)
	res.Output = string(out)
	if logPath != "" {
		_ = os.WriteFile(logPath, out, 0o644)
	}
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
	m1 := rePerfQPS.FindStringSubmatch(text)
	if m1 == nil {
		return res, fmt.Errorf("no 'Queries per second' in dnsperf's output:\n%s", text)
	}
	res.QPS, _ = strconv.ParseFloat(m1[1], 64)
	atoi := func(re *regexp.Regexp) int {
		if m := re.FindStringSubmatch(text); m != nil {
			n, _ := strconv.Atoi(m[1])
			return n
		}
		return 0
	}
	res.Sent, res.Completed, res.Lost = atoi(rePerfSent), atoi(rePerfDone), atoi(rePerfLost)
	res.RespBytes = atoi(rePerfSize)
	if m := rePerfLatency.FindStringSubmatch(text); m != nil {
		res.AvgLatency, _ = strconv.ParseFloat(m[1], 64)
	}
	if m := rePerfRcodes.FindStringSubmatch(text); m != nil {
		for _, rc := range rePerfRcode.FindAllStringSubmatch(m[1], -1) {
			n, _ := strconv.Atoi(rc[2])
			res.Rcodes[rc[1]] += n
		}
	}
	return res, nil
}
