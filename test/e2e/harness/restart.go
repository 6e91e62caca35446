package harness

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
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
	pid, argv, err := e.apiServerProcess()
	if err != nil {
		return killed, ready, err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return killed, ready, fmt.Errorf("SIGKILL kube-apiserver (pid %d): %w", pid, err)
	}
	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(e.apiPort))
	for {
		c, err := net.DialTimeout("tcp", addr, 100*time.Millisecond)
		if err != nil {
			break
		}
		c.Close()
		if ctx.Err() != nil {
			return killed, ready, ctx.Err()
		}
		time.Sleep(20 * time.Millisecond)
	}
	killed = time.Now()
	if down != nil {
		if err := down(); err != nil {
			return killed, ready, err
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = prefixed(e.out, "kube-apiserver (restarted): "), prefixed(e.out, "kube-apiserver (restarted): ")
	if err := cmd.Start(); err != nil {
		return killed, ready, err
	}
	e.apiAgain = append(e.apiAgain, cmd)
	for {
		body, err := e.Clientset.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
		if err == nil && strings.TrimSpace(string(body)) == "ok" {
			return killed, time.Now(), nil
		}
		if ctx.Err() != nil {
			return killed, ready, fmt.Errorf("kube-apiserver not ready again: %v", err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// APIServerPID is the process ID of this Env's kube-apiserver, for readers
// of its /proc entries (the bench measures its memory and CPU).
func (e *Env) APIServerPID() (int, error) {
	pid, _, err := e.apiServerProcess()
	return pid, err
}

// apiServerProcess finds this Env's kube-apiserver among the processes, by
// its secure port, and reads its command line.
func (e *Env) apiServerProcess() (int, []string, error) {
	want := "--secure-port=" + strconv.Itoa(e.apiPort)
	dirs, err := os.ReadDir("/proc")
	if err != nil {
		return 0, nil, err
	}
	for _, d := range dirs {
		pid, err := strconv.Atoi(d.Name())
		if err != nil {
			continue
		}
		raw, err := os.ReadFile(filepath.Join("/proc", d.Name(), "cmdline"))
		if err != nil || len(raw) == 0 {
			continue
		}
		argv := strings.Split(strings.TrimRight(string(raw), "\x00"), "\x00")
		if filepath.Base(argv[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range argv[1:] {
			if a == want {
				return pid, argv, nil
			}
		}
	}
	return 0, nil, fmt.Errorf("no kube-apiserver process with %s", want)
}

// stopProcess stops a process this harness started and waits for it.
func stopProcess(cmd *exec.Cmd) error {
	if cmd.Process == nil {
		return nil
	}
	_ = cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case <-done:
		return nil
	case <-time.After(30 * time.Second):
		_ = cmd.Process.Kill()
		<-done
		return errors.New("kube-apiserver did not stop within 30s of SIGTERM: killed")
	}
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
	if err := e.etcdPost(ctx, "/v3/kv/put", map[string]any{"key": b64([]byte("/e2e/compaction")), "value": b64([]byte(time.Now().String()))}, &put); err != nil {
		return 0, err
	}
	rev, err := strconv.ParseInt(put.Header.Revision, 10, 64)
	if err != nil {
		return 0, fmt.Errorf("etcd put: revision %q: %w", put.Header.Revision, err)
	}
	if err := e.etcdPost(ctx, "/v3/kv/compaction", map[string]any{"revision": strconv.FormatInt(rev, 10), "physical": true}, nil); err != nil {
		return 0, err
	}
	return rev, nil
}

func (e *Env) etcdPost(ctx context.Context, path string, body, out any) error {
	data, err := json.Marshal(body)
	if err != nil {
		return err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, e.etcdURL+path, bytes.NewReader(data))
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
