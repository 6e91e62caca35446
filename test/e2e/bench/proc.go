package main

import (
	"github.com/clustersetdns/multicluster/test/e2e/harness"

	"os"
)

// Memory reads the server's memory.
func (s *server) Memory() (mem, error) { return harness.ProcMemory(s.PID()) }

type mem = harness.Mem

// othersMeter measures how busy the whole machine was, over a span, with
// anything but this program, its control planes (etcd, kube-apiserver) and
// the server measured: on a shared machine, a figure taken while others
// were busy says so.
type othersMeter struct {
	cpu  harness.CPUTime // every CPU's
	own  float64         // CPU seconds of pids
	pids []int
}

// newOthersMeter starts a span; pids are processes of ours already running
// (a server), besides this program and the control planes.
func newOthersMeter(pids ...int) *othersMeter {
	planes, _ := harness.ChildrenNamed("etcd", "kube-apiserver")
	m := &othersMeter{pids: append(append([]int{os.Getpid()}, planes...), pids...)}
	m.cpu, _ = harness.ReadCPUTime("")
	m.own = secondsOf(m.pids)
	return m
}

// share ends the span: the others' share of all CPUs' time (1 = every CPU
// busy with others), or -1 if unknown. started are processes of ours that
// started within the span (counted whole).
func (m *othersMeter) share(started ...int) float64 {
	c, err := harness.ReadCPUTime("")
	if err != nil || m.cpu.Total == 0 || c.Total == m.cpu.Total {
		return -1
	}
	own := secondsOf(m.pids) - m.own + secondsOf(started)
	return max(0, (c.Busy-m.cpu.Busy-own)/(c.Total-m.cpu.Total))
}

func secondsOf(pids []int) float64 {
	var sum float64
	for _, pid := range pids {
		t, _ := harness.CPUSeconds(pid)
		sum += t
	}
	return sum
}
