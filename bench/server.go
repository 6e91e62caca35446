package main

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/miekg/dns"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// server is one CoreDNS process, pinned to a CPU with GOMAXPROCS=1.
type server struct {
	Name     string // floor, stock, ours
	Label    string // for tables
	Bin      string
	Port     int
	Corefile string
	LogPath  string
	// PprofURL is the pprof plugin's CPU profile endpoint, with -pprof.
	PprofURL string
	// MetricsURL is the prometheus plugin's endpoint, if it has one.
	MetricsURL string
	// heapURL is the pprof plugin's heap profile, asking for a garbage
	// collection first; set with MetricsURL.
	heapURL string
	// ReadyIn is the time from exec to the ready plugin's first 200.
	ReadyIn time.Duration
	// AtReady is its memory right after ready.
	AtReady mem

	cmd  *exec.Cmd
	done chan struct{}
	err  error
}

// readyWithin bounds how long a server may take from exec to ready. With
// -scale at 100,000 imports each server lists them all from the API server
// before it says ready, on one CPU.
const readyWithin = 600 * time.Second

// startServer writes a Corefile serving clusterset.local on a free port of
// 127.0.0.1 with `errors`, `ready`, with metrics `prometheus` on another free
// port, and the given plugin block, starts bin as `taskset -c cpu bin -conf
// Corefile` with GOMAXPROCS=1, and waits (bounded by readyWithin) until the
// ready plugin says ready. The QPS servers run without prometheus, which
// counts every query.
func startServer(name, label, bin, dir, cpu, plugin string, metrics bool) (*server, error) {
	var lastErr error
	for range 3 { // a free port can be taken between choosing and binding it
		s, err := startServerOnce(name, label, bin, dir, cpu, plugin, metrics)
		if err == nil {
			return s, nil
		}
		lastErr = err
		if !strings.Contains(err.Error(), "address already in use") {
			break
		}
	}
	return nil, lastErr
}

// withPprof adds the pprof plugin to every server, for -pprof.
var withPprof bool

func startServerOnce(name, label, bin, dir, cpu, plugin string, metrics bool) (*server, error) {
	port, err := harness.FreePort()
	if err != nil {
		return nil, err
	}
	readyPort, err := harness.FreeTCPPort()
	if err != nil {
		return nil, err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%s:%d {\n\tbind 127.0.0.1\n\terrors\n\tready 127.0.0.1:%d\n", zone, port, readyPort)
	pprofURL, heapURL := "", ""
	if withPprof || metrics {
		pp, err := harness.FreeTCPPort()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\tpprof 127.0.0.1:%d\n", pp)
		if withPprof {
			pprofURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/profile", pp)
		}
		heapURL = fmt.Sprintf("http://127.0.0.1:%d/debug/pprof/heap?gc=1", pp)
	}
	metricsURL := ""
	if metrics {
		mp, err := harness.FreeTCPPort()
		if err != nil {
			return nil, err
		}
		fmt.Fprintf(&b, "\tprometheus 127.0.0.1:%d\n", mp)
		metricsURL = fmt.Sprintf("http://127.0.0.1:%d/metrics", mp)
	}
	for line := range strings.Lines(strings.TrimSpace(plugin)) {
		fmt.Fprintf(&b, "\t%s", line)
	}
	b.WriteString("\n}\n")
	s := &server{Name: name, Label: label, Bin: bin, Port: port, Corefile: b.String(), PprofURL: pprofURL, MetricsURL: metricsURL, heapURL: heapURL, done: make(chan struct{})}
	conf := filepath.Join(dir, name+".Corefile")
	if err := os.WriteFile(conf, []byte(s.Corefile), 0o644); err != nil {
		return nil, err
	}
	s.LogPath = filepath.Join(dir, name+".log")
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	// taskset execs CoreDNS, so the PID is CoreDNS's own.
	s.cmd = exec.Command("taskset", "-c", cpu, bin, "-conf", conf)
	s.cmd.Dir = dir
	s.cmd.Env = append(os.Environ(), "GOMAXPROCS=1")
	s.cmd.Stdout, s.cmd.Stderr = logFile, logFile
	s.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	if err := s.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		s.err = s.cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(fmt.Sprintf("http://127.0.0.1:%d/ready", readyPort), start, readyWithin); err != nil {
		s.Stop()
		out, _ := os.ReadFile(s.LogPath)
		return nil, fmt.Errorf("%s: %v\n--- Corefile\n%s--- output\n%s", name, err, s.Corefile, harness.Abridge(string(out), 20, 40))
	}
	s.AtReady, _ = s.Memory()
	return s, nil
}

func (s *server) waitReady(url string, start time.Time, within time.Duration) error {
	cl := &http.Client{Timeout: time.Second}
	deadline := start.Add(within)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("exited: %v", s.err)
		default:
		}
		if resp, err := cl.Get(url); err == nil {
			resp.Body.Close()
			// The ready plugin listens before the DNS server does: ready
			// means both, and an answer to the apex SOA.
			if resp.StatusCode == http.StatusOK {
				if r, err := harness.Exchange(s.addr(), zone+".", dns.TypeSOA); err == nil && r.Rcode == dns.RcodeSuccess {
					s.ReadyIn = time.Since(start)
					return nil
				}
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v", within)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// profile saves a CPU profile of the next d to path (pprof plugin).
func (s *server) profile(d time.Duration, path string) error {
	cl := &http.Client{Timeout: d + 30*time.Second}
	resp, err := cl.Get(fmt.Sprintf("%s?seconds=%d", s.PprofURL, int(d.Seconds())))
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", s.PprofURL, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// PID is CoreDNS's process ID.
func (s *server) PID() int { return s.cmd.Process.Pid }

// mem is a process's memory from /proc/PID/status, in KiB: VmRSS, VmHWM
// (peak RSS) and RssAnon (the anonymous part of VmRSS: heap and stacks,
// without the binary's pages, which depend on the page cache).
type mem struct{ RSS, HWM, Anon int }

// Memory reads the server's memory.
func (s *server) Memory() (mem, error) { return procMemory(s.PID()) }

// procMemory reads a process's memory from /proc/PID/status.
func procMemory(pid int) (mem, error) {
	var m mem
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return m, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) < 2 {
			continue
		}
		switch fields[0] {
		case "VmRSS:":
			m.RSS, _ = strconv.Atoi(fields[1])
		case "VmHWM:":
			m.HWM, _ = strconv.Atoi(fields[1])
		case "RssAnon:":
			m.Anon, _ = strconv.Atoi(fields[1])
		}
	}
	return m, sc.Err()
}

// goMem is the Go runtime's memory as the prometheus plugin exports it
// (runtime.MemStats), in bytes: HeapInuse (spans of the heap in use: live
// objects and garbage not yet swept), HeapSys (heap memory obtained from the
// OS, some of it maybe returned) and Alloc (bytes of allocated heap objects).
// Unlike VmRSS they do not depend on the page cache.
type goMem struct{ HeapInuse, HeapSys, Alloc, Live int64 }

// LiveHeap has the server collect its garbage (through the pprof plugin's
// heap profile with gc=1) and returns its allocated heap afterwards: the
// bytes its live objects take, whatever garbage the last start-up left.
func (s *server) LiveHeap() (int64, error) {
	if s.heapURL == "" {
		return 0, fmt.Errorf("%s has no pprof endpoint", s.Name)
	}
	cl := &http.Client{Timeout: 60 * time.Second}
	resp, err := cl.Get(s.heapURL)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("%s: %s", s.heapURL, resp.Status)
	}
	m, err := s.GoMemory()
	return m.Alloc, err
}

// GoMemory scrapes the server's prometheus endpoint for its Go heap.
func (s *server) GoMemory() (goMem, error) {
	var m goMem
	if s.MetricsURL == "" {
		return m, fmt.Errorf("%s has no prometheus endpoint", s.Name)
	}
	cl := &http.Client{Timeout: 10 * time.Second}
	resp, err := cl.Get(s.MetricsURL)
	if err != nil {
		return m, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return m, fmt.Errorf("%s: %s", s.MetricsURL, resp.Status)
	}
	want := map[string]*int64{
		"go_memstats_heap_inuse_bytes": &m.HeapInuse,
		"go_memstats_heap_sys_bytes":   &m.HeapSys,
		"go_memstats_alloc_bytes":      &m.Alloc,
	}
	found := 0
	// The text exposition format: "name value" for a metric without
	// labels; comments start with #.
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		name, value, ok := strings.Cut(sc.Text(), " ")
		p, known := want[name]
		if !ok || !known {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(value), 64)
		if err != nil {
			return m, fmt.Errorf("%s: %s: %w", s.MetricsURL, name, err)
		}
		*p = int64(v)
		found++
	}
	if err := sc.Err(); err != nil {
		return m, err
	}
	if found != len(want) {
		return m, fmt.Errorf("%s: found %d of the metrics go_memstats_heap_inuse_bytes, go_memstats_heap_sys_bytes, go_memstats_alloc_bytes", s.MetricsURL, found)
	}
	return m, nil
}

// CPUTicks is the process's user plus system time, in clock ticks.
func (s *server) CPUTicks() (int64, error) { return procCPUTicks(s.PID()) }

func procCPUTicks(pid int) (int64, error) {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The command name is in parentheses and may hold spaces; fields after
	// it start with the state (field 3); utime and stime are fields 14, 15.
	i := strings.LastIndexByte(string(data), ')')
	if i < 0 {
		return 0, errors.New("odd /proc/PID/stat")
	}
	f := strings.Fields(string(data[i+1:]))
	if len(f) < 13 {
		return 0, errors.New("short /proc/PID/stat")
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	return u + st, errors.Join(err1, err2)
}

// Stop sends SIGTERM, then SIGKILL after 10 seconds.
func (s *server) Stop() {
	if s == nil || s.cmd == nil || s.cmd.Process == nil {
		return
	}
	select {
	case <-s.done:
		return
	default:
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(10 * time.Second):
		_ = s.cmd.Process.Kill()
		<-s.done
	}
}

// cpuStat is one CPU's line of /proc/stat (every CPU's for cpu ""), in
// clock ticks.
type cpuStat struct{ busy, total int64 }

func readCPUStat(cpu string) (cpuStat, error) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuStat{}, err
	}
	for line := range strings.Lines(string(data)) {
		f := strings.Fields(line)
		if len(f) < 5 || f[0] != "cpu"+cpu {
			continue
		}
		var st cpuStat
		for k, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			if k >= 8 { // guest and guest_nice are already in user and nice
				break
			}
			st.total += n
			if k != 3 && k != 4 { // idle, iowait
				st.busy += n
			}
		}
		return st, nil
	}
	return cpuStat{}, fmt.Errorf("no cpu%s in /proc/stat", cpu)
}

// pinChildren sets the CPU affinity of every thread of this process's child
// processes named in names (etcd, kube-apiserver) and of this process itself.
func pinChildren(cpus string, names ...string) error {
	pids, err := childrenNamed(names...)
	if err != nil {
		return err
	}
	pids = append(pids, os.Getpid())
	var errs []error
	for _, pid := range pids {
		if out, err := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput(); err != nil {
			errs = append(errs, fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, err, out))
		}
	}
	return errors.Join(errs...)
}

// childrenNamed lists this process's child processes named in names.
func childrenNamed(names ...string) ([]int, error) {
	self := os.Getpid()
	var pids []int
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, err
	}
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(data)
		open, closing := strings.IndexByte(s, '('), strings.LastIndexByte(s, ')')
		if open < 0 || closing < open {
			continue
		}
		comm := s[open+1 : closing]
		f := strings.Fields(s[closing+1:])
		if len(f) < 2 || f[1] != strconv.Itoa(self) {
			continue
		}
		if slices.Contains(names, comm) {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// othersMeter measures how busy the whole machine was, over a span, with
// anything but this program, its control planes (etcd, kube-apiserver) and
// the server measured: on a shared machine, a figure taken while others
// were busy says so.
type othersMeter struct {
	cpu  cpuStat // every CPU's, the "cpu" line of /proc/stat
	own  int64   // CPU ticks of pids
	pids []int
}

// newOthersMeter starts a span; pids are processes of ours already running
// (a server), besides this program and the control planes.
func newOthersMeter(pids ...int) *othersMeter {
	planes, _ := childrenNamed("etcd", "kube-apiserver")
	m := &othersMeter{pids: append(append([]int{os.Getpid()}, planes...), pids...)}
	m.cpu, _ = readCPUStat("")
	m.own = ticksOf(m.pids)
	return m
}

// share ends the span: the others' share of all CPUs' time (1 = every CPU
// busy with others), or -1 if unknown. started are processes of ours that
// started within the span (counted whole).
func (m *othersMeter) share(started ...int) float64 {
	c, err := readCPUStat("")
	if err != nil || m.cpu.total == 0 || c.total == m.cpu.total {
		return -1
	}
	own := ticksOf(m.pids) - m.own + ticksOf(started)
	return max(0, float64(c.busy-m.cpu.busy-own)/float64(c.total-m.cpu.total))
}

func ticksOf(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		t, _ := procCPUTicks(pid)
		sum += t
	}
	return sum
}
