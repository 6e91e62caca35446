package harness

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/prometheus/procfs"
)

// Mem is a process's memory from /proc/PID/status, in KiB: VmRSS, VmHWM
// (peak RSS) and RssAnon (the anonymous part of VmRSS: heap and stacks,
// without the binary's pages, which depend on the page cache).
type Mem struct{ RSS, HWM, Anon int }

// ProcMemory reads process pid's memory.
func ProcMemory(pid int) (Mem, error) {
	st, err := fromProc(pid, procfs.Proc.NewStatus)
	return Mem{RSS: int(st.VmRSS >> 10), HWM: int(st.VmHWM >> 10), Anon: int(st.RssAnon >> 10)}, err
}

// CPUSeconds is process pid's user plus system time.
func CPUSeconds(pid int) (float64, error) {
	st, err := fromProc(pid, procfs.Proc.Stat)
	return st.CPUTime(), err
}

// fromProc is what read reads of process pid.
func fromProc[T any](pid int, read func(procfs.Proc) (T, error)) (T, error) {
	p, err := procfs.NewProc(pid)
	if err != nil {
		var zero T
		return zero, err
	}
	return read(p)
}

// CPUTime is one CPU's time, in seconds: Busy is all but idle and iowait.
type CPUTime struct{ Busy, Total float64 }

// ReadCPUTime reads cpu's time from /proc/stat, every CPU's for cpu "".
func ReadCPUTime(cpu string) (CPUTime, error) {
	fs, err := procfs.NewDefaultFS()
	if err != nil {
		return CPUTime{}, err
	}
	s, err := fs.Stat()
	if err != nil {
		return CPUTime{}, err
	}
	c := s.CPUTotal
	if cpu != "" {
		n, err := strconv.ParseInt(cpu, 10, 64)
		var ok bool
		if c, ok = s.CPU[n]; err != nil || !ok {
			return CPUTime{}, fmt.Errorf("no cpu%s in /proc/stat", cpu)
		}
	}
	// guest and guest_nice are already in user and nice.
	total := c.User + c.Nice + c.System + c.Idle + c.Iowait + c.IRQ + c.SoftIRQ + c.Steal
	return CPUTime{Busy: total - c.Idle - c.Iowait, Total: total}, nil
}

// LoadAvg is the 1, 5 and 15 minute load averages, as /proc/loadavg gives
// them, or "?".
func LoadAvg() string {
	fs, err := procfs.NewDefaultFS()
	l := &procfs.LoadAvg{}
	if err == nil {
		l, err = fs.LoadAvg()
	}
	if err != nil {
		return "?"
	}
	return fmt.Sprintf("%.2f %.2f %.2f", l.Load1, l.Load5, l.Load15)
}

// ChildrenNamed lists this process's child processes named in names.
func ChildrenNamed(names ...string) ([]int, error) {
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

// findProcess finds the process whose binary is named base and that has the
// argument want, and returns its pid and arguments.
func findProcess(base, want string) (int, []string, error) {
	procs, err := procfs.AllProcs()
	if err != nil {
		return 0, nil, err
	}
	for _, p := range procs {
		argv, err := p.CmdLine()
		if err == nil && len(argv) > 0 && filepath.Base(argv[0]) == base && slices.Contains(argv[1:], want) {
			return p.PID, argv, nil
		}
	}
	return 0, nil, fmt.Errorf("no %s process with %s", base, want)
}

// process is a child process the harness started, and its end.
type process struct {
	cmd  *exec.Cmd
	done chan struct{} // closed once it ended
	err  error         // Wait's result, once done is closed
}

// startProcess starts cmd, in the network namespace netns when not empty
// (InNetns), in a process group of its own, so that a terminal's Ctrl-C
// reaches only the test, which then stops it; it is killed should the test
// die first (go test's -timeout).
func startProcess(cmd *exec.Cmd, netns string) (*process, error) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	p := &process{cmd: cmd, done: make(chan struct{})}
	start := cmd.Start
	if netns != "" {
		start = func() error { return InNetns(netns, cmd.Start) }
	}
	if err := start(); err != nil {
		return nil, err
	}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// stop sends SIGTERM, then SIGKILL after grace, and waits for the end.
func (p *process) stop(grace time.Duration) error {
	_ = p.cmd.Process.Signal(syscall.SIGTERM) // an error once it ended
	select {
	case <-p.done:
		return nil
	case <-time.After(grace):
		_ = p.cmd.Process.Kill()
		<-p.done
		return fmt.Errorf("%s ignored SIGTERM for %v and was killed", filepath.Base(p.cmd.Path), grace)
	}
}
