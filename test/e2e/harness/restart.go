package harness

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Kill SIGKILLs this Env's etcd or kube-apiserver (name), as a crashed,
// OOM-killed or lost one dies, and waits until its port is closed. start
// starts it again with the same binary, arguments, port, certificates and
// data, as a process Stop stops, and waits until healthy returns nil.
func (e *Env) Kill(ctx context.Context, name string) (start func(ctx context.Context, healthy func(context.Context) error) error, err error) {
	arg, addr := "--listen-client-urls="+e.EtcdURL, strings.TrimPrefix(e.EtcdURL, "http://")
	if name == "kube-apiserver" {
		arg, addr = "--secure-port="+strconv.Itoa(e.apiPort), net.JoinHostPort("127.0.0.1", strconv.Itoa(e.apiPort))
	}
	pid, argv, err := findProcess(name, arg)
	if err != nil {
		return nil, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return nil, fmt.Errorf("SIGKILL %s (pid %d): %w", name, pid, err)
	}
	err = poll(ctx, 20*time.Millisecond, func() error {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			return nil
		}
		c.Close()
		return fmt.Errorf("%s still listens on %s", name, addr)
	})
	return func(ctx context.Context, healthy func(context.Context) error) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = prefixed{e.out, name + " (restarted): "}, prefixed{e.out, name + " (restarted): "}
		p, err := startProcess(cmd, "")
		if err != nil {
			return err
		}
		e.again = append(e.again, p)
		return poll(ctx, 20*time.Millisecond, func() error { return healthy(ctx) })
	}, err
}

// APIServerPID is the process ID of this Env's kube-apiserver, for readers
// of its /proc entries (the bench measures its memory and CPU).
func (e *Env) APIServerPID() (int, error) {
	pid, _, err := findProcess("kube-apiserver", "--secure-port="+strconv.Itoa(e.apiPort))
	return pid, err
}
