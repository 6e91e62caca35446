package harness

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
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
	return e.kill(ctx, "etcd", "--listen-client-urls="+e.etcdURL, strings.TrimPrefix(e.etcdURL, "http://"), func(ctx context.Context) error {
		var health struct{ Health string }
		if err := e.etcdDo(ctx, http.MethodGet, "/health", nil, &health); err != nil || health.Health == "true" {
			return err
		}
		return fmt.Errorf("etcd /health: %q", health.Health)
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

// CompactEtcd writes a key straight to etcd, so that its revision moves past
// every resourceVersion a client has seen, and compacts etcd's history up to
// it: a watch from an older resourceVersion then gets 410 Gone. It uses
// etcd's JSON gateway, so no etcd client is needed.
func (e *Env) CompactEtcd(ctx context.Context) (revision int64, err error) {
	var put struct {
		Header struct {
			Revision string `json:"revision"`
		} `json:"header"`
	}
	b64 := base64.StdEncoding.EncodeToString
	if err := e.etcdDo(ctx, http.MethodPost, "/v3/kv/put", map[string]any{"key": b64([]byte("/e2e/compaction")), "value": b64([]byte(time.Now().String()))}, &put); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(put.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd put: revision %q: %w", put.Header.Revision, err)
	}
	if err := e.etcdDo(ctx, http.MethodPost, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

// etcdDo calls etcd's HTTP API; body, when not nil, is sent as JSON.
func (e *Env) etcdDo(ctx context.Context, method, path string, body, out any) error {
	var in io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return err
		}
		in = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.etcdURL+path, in)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	var buf bytes.Buffer
	_, _ = buf.ReadFrom(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("etcd %s: %s: %s", path, resp.Status, buf.String())
	}
	if out != nil {
		return json.Unmarshal(buf.Bytes(), out)
	}
	return nil
}
