package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/clustersetdns/multicluster/internal/contract"
	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// mix is one dnsperf query file, and the name and type the check before
// measuring asks each server, with the answer it wants; the floor runs only
// the mixes with Floor.
type mix struct {
	Key, Label, File   string // Key: a, srv, headless
	Floor              bool
	Sample, SampleType string
	Want               contract.Want
}

// writeMixes writes the query files into dir: seeded random draws over the
// n imports for A and SRV, the one headless name.
func writeMixes(dir string, fx fixture, n, lines int, seed uint64) ([]mix, error) {
	r := rand.New(rand.NewPCG(seed, seed^0x9e3779b97f4a7c15))
	srv := func(name string) string { return "_" + portName + "._tcp." + name }
	var headless contract.Want
	for c := range fx.clusters {
		for e := range fx.endpoints {
			headless.Answer = append(headless.Answer, contract.A(headlessFQDN(), endpointIP(c, e)))
		}
	}
	mixes := []mix{
		{"a", fmt.Sprintf("A, random over %d ClusterSetIP names", n), "", true, fx.name(0), "A", contract.Want{Answer: []string{contract.A(fx.name(0), importIP(0))}}},
		{"srv", fmt.Sprintf("SRV _http._tcp, random over %d", n), "", false, srv(fx.name(0)), "SRV", contract.Want{Answer: []string{contract.SRV(srv(fx.name(0)), 100, portNumber, fx.name(0))}}},
		{"headless", fmt.Sprintf("headless A (%d×%d endpoints)", fx.clusters, fx.endpoints), "", false, headlessFQDN(), "A", headless},
	}
	line := map[string]func() string{"a": func() string { return fx.name(r.IntN(n)) }, "srv": func() string { return srv(fx.name(r.IntN(n))) }, "headless": headlessFQDN}
	for k := range mixes {
		m := &mixes[k]
		m.File = filepath.Join(dir, "queries-"+m.Key+".txt")
		var b strings.Builder
		for range lines {
			fmt.Fprintf(&b, "%s %s\n", line[m.Key](), m.SampleType)
		}
		if err := os.WriteFile(m.File, []byte(b.String()), 0o644); err != nil {
			return nil, err
		}
	}
	return mixes, nil
}

// checkServer asks s each mix's sample name with dig and checks the answer;
// whoami answers every name with the client's address, in the additional
// section, so only its rcode is checked.
func checkServer(s *server, mixes []mix) error {
	floor := s.Name == "floor"
	for _, m := range mixes[:cond(floor, 1, len(mixes))] {
		r, err := harness.Dig(s.Port, m.Sample, m.SampleType)
		if err != nil {
			return fmt.Errorf("%s: %w", s.Name, err)
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
			err = m.Want.Check(r.Msg(), contract.TTL) // stock's kubernetes plugin has the same default TTL
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

// PerCPU is what the server would answer with a whole CPU to itself, were
// it CPU-bound throughout.
func (r perfResult) PerCPU() float64 { return cond(r.ServerCPU <= 0, 0, r.QPS/r.ServerCPU) }

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

// runDnsperf runs dnsperf for d against s, pinned to -load-cpu, EDNS0 on
// (the headless answer is about 2 KB).
func runDnsperf(ctx context.Context, c config, d time.Duration, s *server, m mix, name string) (perfResult, error) {
	res := perfResult{Server: s.Name, Mix: m.Key, Rcodes: map[string]int{}}
	ctx, cancel := context.WithTimeout(ctx, d+60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "taskset", "-c", c.loadCPU, "dnsperf", "-s", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-d", m.File,
		"-l", strconv.Itoa(int(d.Round(time.Second).Seconds())), "-c", strconv.Itoa(c.clients), "-q", strconv.Itoa(c.outstanding),
		"-T", "1", "-t", "5", "-b", "1024", "-e")
	span, start := newSpan(c.serverCPU, s.PID()), time.Now()
	out, err := cmd.CombinedOutput()
	wall := time.Since(start)
	busy, total, own, ok := span.end()
	_ = os.WriteFile(filepath.Join(c.out, "dnsperf-"+name+".txt"), out, 0o644)
	if err != nil {
		return res, fmt.Errorf("dnsperf: %v\n%s", err, out)
	}
	if ok {
		res.ServerCPU, res.OtherCPU = own/wall.Seconds(), max(0, (busy-own)/total)
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

// runQPS starts the floor, stock and ours one after another (each one's
// start-up alone on its CPU), checks their answers, and runs the mixes in
// alternating rounds, with dnsperf and the control planes on the other CPU.
func runQPS(ctx context.Context, c config, rep *report, fx fixture, sides []side) error {
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
	for _, sd := range sides {
		s, err := c.startServer(sd, "", false)
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
		if err := checkServer(s, mixes); err != nil {
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

func measureRun(ctx context.Context, c config, round int, m mix, s *server) (perfResult, error) {
	c.waitQuiet(ctx, c.quietWait)
	var profile errgroup.Group
	if c.pprof && round == 1 && c.duration >= 4*time.Second {
		profile.Go(func() error {
			time.Sleep(time.Second)
			d := c.duration - 3*time.Second
			data, err := s.pprof(fmt.Sprintf("/profile?seconds=%d", int(d.Seconds())), d+30*time.Second)
			if err == nil {
				err = os.WriteFile(filepath.Join(c.out, fmt.Sprintf("cpu-%s-%s.pprof", m.Key, s.Name)), data, 0o644)
			}
			return err
		})
	}
	r, err := runDnsperf(ctx, c, c.duration, s, m, fmt.Sprintf("r%d-%s-%s", round, m.Key, s.Name))
	if perr := profile.Wait(); perr != nil {
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
