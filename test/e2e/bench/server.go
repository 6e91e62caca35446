package main

import (
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// server is one CoreDNS process, pinned to a CPU with GOMAXPROCS=1, run by
// the e2e harness.
type server struct {
	*harness.CoreDNS
	Name    string // floor, stock, ours
	Label   string // for tables
	LogPath string
	// AtReady is its memory right after ready.
	AtReady mem
}

// readyWithin bounds how long a server may take from exec to ready. With
// -scale at 100,000 imports each server lists them all from the API server
// before it says ready, on one CPU.
const readyWithin = 600 * time.Second

// withPprof adds the pprof plugin to every server, for -pprof.
var withPprof bool

// startServer runs bin as `taskset -c cpu bin -conf Corefile` with
// GOMAXPROCS=1, serving clusterset.local on a free port of 127.0.0.1 with
// `errors`, `ready` and the given plugin block, with metrics `prometheus`
// and `pprof` (pprof alone with -pprof), and waits (bounded by readyWithin)
// until it answers and the ready plugin says ready. The QPS servers run
// without prometheus, which counts every query. The Corefile and CoreDNS's
// output are kept in dir.
func startServer(name, label, bin, dir, cpu, plugin string, metrics bool) (*server, error) {
	s := &server{Name: name, Label: label, LogPath: filepath.Join(dir, name+".log")}
	logFile, err := os.Create(s.LogPath)
	if err != nil {
		return nil, err
	}
	defer logFile.Close() // the child holds its own descriptor
	s.CoreDNS, err = harness.StartCoreDNS(bin, harness.CoreDNSOptions{
		Plugins: plugin, NoLog: true, Metrics: metrics, Pprof: withPprof || metrics, ReadyWithin: readyWithin,
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

// profile saves a CPU profile of the next d to path (pprof plugin).
func (s *server) profile(d time.Duration, path string) error {
	cl := &http.Client{Timeout: d + 30*time.Second}
	url := fmt.Sprintf("%s/profile?seconds=%d", s.PprofURL, int(d.Seconds()))
	resp, err := cl.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return err
	}
	return os.WriteFile(path, data, 0o644)
}

// goMem is the Go runtime's memory as the prometheus plugin exports it
// (runtime.MemStats), in bytes: HeapInuse (spans of the heap in use: live
// objects and garbage not yet swept), HeapSys (heap memory obtained from the
// OS, some of it maybe returned) and Alloc (bytes of allocated heap objects).
// Unlike VmRSS they do not depend on the page cache. Goroutines and FDs are
// go_goroutines and process_open_fds.
type goMem struct{ HeapInuse, HeapSys, Alloc, Live, Goroutines, FDs int64 }

// LiveHeap has the server collect its garbage and returns its allocated heap
// afterwards: the bytes its live objects take, whatever garbage the last
// start-up left.
func (s *server) LiveHeap() (int64, error) {
	if err := s.collectGarbage(); err != nil {
		return 0, err
	}
	m, err := s.GoMemory()
	return m.Alloc, err
}

// collectGarbage has the server run runtime.GC, through the pprof plugin's
// heap profile with gc=1.
func (s *server) collectGarbage() error {
	if s.PprofURL == "" {
		return fmt.Errorf("%s has no pprof endpoint", s.Name)
	}
	cl := &http.Client{Timeout: 60 * time.Second}
	url := s.PprofURL + "/heap?gc=1"
	resp, err := cl.Get(url)
	if err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", url, resp.Status)
	}
	return nil
}

// GoMemory scrapes the server's prometheus endpoint for its Go heap.
func (s *server) GoMemory() (goMem, error) {
	var m goMem
	if s.MetricsURL == "" {
		return m, fmt.Errorf("%s has no prometheus endpoint", s.Name)
	}
	metrics, err := harness.Scrape(s.MetricsURL)
	if err != nil {
		return m, err
	}
	for name, p := range map[string]*int64{
		"go_memstats_heap_inuse_bytes": &m.HeapInuse,
		"go_memstats_heap_sys_bytes":   &m.HeapSys,
		"go_memstats_alloc_bytes":      &m.Alloc,
		"go_goroutines":                &m.Goroutines,
		"process_open_fds":             &m.FDs,
	} {
		v, err := metrics.Value(name)
		if err != nil {
			return m, fmt.Errorf("%s: %w", s.MetricsURL, err)
		}
		*p = int64(v)
	}
	return m, nil
}

// CPUSeconds is the process's user plus system time.
func (s *server) CPUSeconds() (float64, error) { return harness.CPUSeconds(s.PID()) }

// pinChildren sets the CPU affinity of every thread of this process's child
// processes named in names (etcd, kube-apiserver) and of this process itself.
func pinChildren(cpus string, names ...string) error {
	pids, err := harness.ChildrenNamed(names...)
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
