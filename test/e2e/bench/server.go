package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// server is one CoreDNS process, pinned to a CPU with GOMAXPROCS=1, run by
// the e2e harness.
type server struct {
	*harness.CoreDNS
	Name, Label string // Name: floor, stock, ours and a suffix; Label for tables
	AtReady     mem    // its memory right after ready
}

type mem = harness.Mem

// withPprof adds the pprof plugin to every server, for -pprof.
var withPprof bool

// startServer runs bin pinned to cpu with GOMAXPROCS=1, serving the zone
// with the given plugin block, with metrics `prometheus` and `pprof` (pprof
// alone with -pprof: the QPS servers run without prometheus, which counts
// every query), and waits until it is ready: at 100,000 imports, up to
// minutes on one CPU. Its Corefile and output are kept in dir.
func startServer(name, label, bin, dir, cpu, plugin string, metrics bool) (*server, error) {
	s := &server{Name: name, Label: label}
	logFile, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		return nil, err
	}
	// Not closed: the harness copies the server's output into it until the
	// server ends; closed, the server's next line kills it with SIGPIPE.
	s.CoreDNS, err = harness.StartCoreDNS(bin, harness.CoreDNSOptions{
		Plugins: plugin, NoLog: true, Metrics: metrics, Pprof: withPprof || metrics, ReadyWithin: 600 * time.Second,
		Wrap: []string{"taskset", "-c", cpu}, Env: []string{"GOMAXPROCS=1"}, Output: logFile,
	})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".Corefile"), []byte(s.Corefile), 0o644); err != nil {
		s.Stop()
		return nil, err
	}
	s.AtReady, _ = s.Memory()
	return s, nil
}

// pprof fetches path from the server's pprof plugin, waiting at most d.
func (s *server) pprof(path string, d time.Duration) ([]byte, error) {
	resp, err := (&http.Client{Timeout: d}).Get(s.PprofURL + path)
	if err != nil {
		return nil, fmt.Errorf("%s: pprof: %w", s.Name, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("%s%s: %s", s.PprofURL, path, resp.Status)
	}
	return data, err
}

// profile saves a CPU profile of the next d to path.
func (s *server) profile(d time.Duration, path string) error {
	data, err := s.pprof(fmt.Sprintf("/profile?seconds=%d", int(d.Seconds())), d+30*time.Second)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// collectGarbage has the server run runtime.GC: its heap profile with gc=1.
func (s *server) collectGarbage() error {
	_, err := s.pprof("/heap?gc=1", 60*time.Second)
	return err
}

// goMem is the Go runtime's memory as the prometheus plugin exports it, in
// bytes (heap in use, obtained from the OS, allocated), and its goroutines
// and open descriptors.
type goMem struct{ HeapInuse, HeapSys, Alloc, Goroutines, FDs int64 }

// reading is a server's memory from /proc, its Go heap, and its Go heap
// again after a forced GC: Live.Alloc is what its live objects take.
type reading struct {
	mem
	Heap, Live goMem
}

func (s *server) Memory() (mem, error) { return harness.ProcMemory(s.PID()) }

// read reads the server's memory and Go heap, collects its garbage, and
// reads the Go heap again.
func (s *server) read() (r reading, err error) {
	var errs [4]error
	r.mem, errs[0] = s.Memory()
	r.Heap, errs[1] = s.GoMemory()
	errs[2] = s.collectGarbage()
	r.Live, errs[3] = s.GoMemory()
	if err = errors.Join(errs[:]...); err != nil {
		err = fmt.Errorf("%s: %w", s.Name, err)
	}
	return r, err
}

// GoMemory scrapes the server's prometheus endpoint for its Go heap.
func (s *server) GoMemory() (m goMem, err error) {
	if s.MetricsURL == "" {
		return m, fmt.Errorf("%s has no prometheus endpoint", s.Name)
	}
	metrics, err := harness.Scrape(s.MetricsURL)
	for name, p := range map[string]*int64{"go_memstats_heap_inuse_bytes": &m.HeapInuse, "go_memstats_heap_sys_bytes": &m.HeapSys,
		"go_memstats_alloc_bytes": &m.Alloc, "go_goroutines": &m.Goroutines, "process_open_fds": &m.FDs} {
		var v float64
		if err == nil {
			v, err = metrics.Value(name)
		}
		*p = int64(v)
	}
	return m, err
}

// pinPlanes sets the CPU affinity of every thread of the control planes
// (this process's children etcd and kube-apiserver) and of this process to
// cpus, "": every online CPU.
func pinPlanes(cpus string) error {
	if online, _ := os.ReadFile("/sys/devices/system/cpu/online"); cpus == "" {
		cpus = cmp.Or(strings.TrimSpace(string(online)), "0-1")
	}
	pids, err := harness.ChildrenNamed("etcd", "kube-apiserver")
	for _, pid := range append(pids, os.Getpid()) {
		if out, terr := exec.Command("taskset", "-a", "-p", "-c", cpus, strconv.Itoa(pid)).CombinedOutput(); terr != nil {
			err = errors.Join(err, fmt.Errorf("taskset -a -p -c %s %d: %v: %s", cpus, pid, terr, out))
		}
	}
	return err
}

// othersMeter measures how busy all CPUs were, over a span, with anything
// but this program, its control planes and the server measured (pids).
type othersMeter struct {
	cpu     harness.CPUTime
	own     float64 // CPU seconds of pids
	pids    []int
	read    func(cpu string) (harness.CPUTime, error) // harness.ReadCPUTime
	seconds func(pid int) (float64, error)            // harness.CPUSeconds
}

// newOthersMeter starts a span; pids are servers already running.
func newOthersMeter(pids ...int) *othersMeter {
	planes, _ := harness.ChildrenNamed("etcd", "kube-apiserver")
	m := &othersMeter{pids: append(append([]int{os.Getpid()}, planes...), pids...), read: harness.ReadCPUTime, seconds: harness.CPUSeconds}
	m.cpu, _ = m.read("")
	m.own = m.secondsOf(m.pids)
	return m
}

// share ends the span: the others' share of all CPUs' time, or -1 if
// unknown. started are servers started within the span (counted whole).
func (m *othersMeter) share(started ...int) float64 {
	c, err := m.read("")
	if err != nil || m.cpu.Total == 0 || c.Total == m.cpu.Total {
		return -1
	}
	own := m.secondsOf(m.pids) - m.own + m.secondsOf(started)
	return max(0, (c.Busy-m.cpu.Busy-own)/(c.Total-m.cpu.Total))
}

// secondsOf is the CPU time of pids, in seconds (0 for one not read).
func (m *othersMeter) secondsOf(pids []int) float64 {
	return sum(pids, func(pid int) float64 { t, _ := m.seconds(pid); return t })
}
