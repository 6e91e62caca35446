package main

import (
	"fmt"
	"os"
	"slices"
	"strconv"

	"github.com/prometheus/procfs"
)

// What the bench reads of processes and CPUs, through prometheus/procfs.

// mem is a process's memory from /proc/PID/status, in KiB: VmRSS, VmHWM
// (peak RSS) and RssAnon (the anonymous part of VmRSS: heap and stacks,
// without the binary's pages, which depend on the page cache).
type mem struct{ RSS, HWM, Anon int }

// Memory reads the server's memory.
func (s *server) Memory() (mem, error) { return procMemory(s.PID()) }

func procMemory(pid int) (mem, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return mem{}, err
	}
	st, err := p.NewStatus()
	if err != nil {
		return mem{}, err
	}
	return mem{RSS: int(st.VmRSS >> 10), HWM: int(st.VmHWM >> 10), Anon: int(st.RssAnon >> 10)}, nil
}

// cpuSeconds is a process's user plus system time.
func cpuSeconds(pid int) (float64, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		return 0, err
	}
	st, err := p.Stat()
	if err != nil {
		return 0, err
	}
	return st.CPUTime(), nil
}

// cpuStat is one CPU's time (every CPU's for cpu ""), in seconds: busy is
// all but idle and iowait.
type cpuStat struct{ busy, total float64 }

func readCPUStat(cpu string) (cpuStat, error) {
	st, err := procfs.NewDefaultFS()
	if err != nil {
		return cpuStat{}, err
	}
	s, err := st.Stat()
	if err != nil {
		return cpuStat{}, err
	}
	c := s.CPUTotal
	if cpu != "" {
		n, err := strconv.ParseInt(cpu, 10, 64)
		var ok bool
		if c, ok = s.CPU[n]; err != nil || !ok {
			return cpuStat{}, fmt.Errorf("no cpu%s in /proc/stat", cpu)
		}
	}
	// guest and guest_nice are already in user and nice.
	total := c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	return cpuStat{busy: total - c.Idle - c.Iowait, total: total}, nil
}

// loadAvg is the 1, 5 and 15 minute load averages, as /proc/loadavg gives them.
func loadAvg() string {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return "?"
	}
	l, err := fs.LoadAvg()
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
}

// childrenNamed lists this process's child processes named in names.
func childrenNamed(names ...string) ([]int, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, p := range procs {
		if st, err := p.Stat(); err == nil && st.PPID == os.Getpid() && slices.Contains(names, st.Comm) {
			pids = append(pids, p.PID)
		}
	}
	return pids, nil
}

// othersMeter measures how busy the whole machine was, over a span, with
// anything but this program, its control planes (etcd, kube-apiserver) and
// the server measured: on a shared machine, a figure taken while others
// were busy says so.
type othersMeter struct {
	cpu  cpuStat // every CPU's
	own  float64 // CPU seconds of pids
	pids []int
}

// newOthersMeter starts a span; pids are processes of ours already running
// (a server), besides this program and the control planes.
func newOthersMeter(pids ...int) *othersMeter {
	planes, _ := childrenNamed("etcd", "kube-apiserver")
	m := &othersMeter{pids: append(append([]int{os.Getpid()}, planes...), pids...)}
	m.cpu, _ = readCPUStat("")
	m.own = secondsOf(m.pids)
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
	own := secondsOf(m.pids) - m.own + secondsOf(started)
	return max(0, (c.busy-m.cpu.busy-own)/(c.total-m.cpu.total))
}

func secondsOf(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		t, _ := cpuSeconds(pid)
		sum += t
	}
	return sum
}
