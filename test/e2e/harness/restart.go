package harness

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// RestartAPIServer SIGKILLs kube-apiserver, as a crashed or OOM-killed one
// dies, waits until its port is closed, calls down (which may act on etcd
// meanwhile), then starts kube-apiserver again with the same binary,
// arguments, port and certificates, and waits until /readyz says ok. It
// returns when the old process died and when the new one was ready. Stop
// stops the new process.
func (e *Env) RestartAPIServer(ctx context.Context, down func() error) (killed, ready time.Time, err error) {
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(e.apiPort))
	start, err := e.kill(ctx, "kube-apiserver", "--secure-port="+strconv.Itoa(e.apiPort), addr, func(ctx context.Context) error {
		body, err := e.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) != "ok" {
			err = fmt.Errorf("/readyz: %s", body)
		}
		return err
	})
	if err != nil {
		return killed, ready, err
	}
	killed = time.Now()
	if down != nil {
		if err := down(); err != nil {
			return killed, ready, err
		}
	}
	if err := start(ctx); err != nil {
		return killed, ready, fmt.Errorf("kube-apiserver not ready again: %w", err)
	}
	return killed, time.Now(), nil
}

// KillEtcd SIGKILLs etcd behind the running kube-apiserver, as a lost etcd
// member dies, and waits until its client port is closed. start starts etcd
// again with the same binary, arguments and data, and returns once etcd
// says it is healthy; Stop stops that process.
func (e *Env) KillEtcd(ctx context.Context) (start func(context.Context) error, err error) {
	return e.kill(ctx, "etcd", "--listen-client-urls="+e.EtcdURL, strings.TrimPrefix(e.EtcdURL, "http://"), func(ctx context.Context) error {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.EtcdURL+"/health", nil)
		if err != nil {
			return err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		if body, _ := io.ReadAll(resp.Body); !bytes.Contains(body, []byte(`"health":"true"`)) {
			return fmt.Errorf("etcd /health: %s", body)
		}
		return nil
	})
}

// kill SIGKILLs the process named name that has the argument arg and waits
// until nothing listens on addr. start starts it again with the same
// arguments, as a process of this Env's for Stop to stop, and waits until
// healthy says so.
func (e *Env) kill(ctx context.Context, name, arg, addr string, healthy func(context.Context) error) (start func(context.Context) error, err error) {
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
	return func(ctx context.Context) error {
		cmd := exec.Command(argv[0], argv[1:]...)
		cmd.Stdout, cmd.Stderr = prefixed(e.out, name+" (restarted): "), prefixed(e.out, name+" (restarted): ")
		p, err := startProcess(cmd, nil)
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
