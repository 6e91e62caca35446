package sandbox

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"golang.org/x/sys/unix"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

// ForwardIntoNetns listens on the TCP address addr inside the network
// namespace at netns and forwards every connection to the same address in
// this process's network namespace: a process in netns that has only a
// loopback interface reaches a server on the host's 127.0.0.1 at the address
// the server's certificate names. stop closes the listener and every
// forwarded connection.
func ForwardIntoNetns(netns, addr string) (stop func(), err error) {
	var l net.Listener
	if err := harness.InNetns(netns, func() (err error) {
		l, err = net.Listen("tcp", addr)
		return err
	}); err != nil {
		return nil, err
	}
	return forward(l, func() (net.Conn, error) { return net.Dial("tcp", addr) }), nil
}

// forward accepts l's connections and pipes each to a connection dial
// makes, until stop, which closes l and every connection.
func forward(l net.Listener, dial func() (net.Conn, error)) (stop func()) {
	var mu sync.Mutex
	open := map[net.Conn]bool{}
	track := func(c net.Conn, add bool) bool {
		mu.Lock()
		defer mu.Unlock()
		if open == nil { // stopped
			return false
		}
		if add {
			open[c] = true
		} else {
			delete(open, c)
		}
		return true
	}
	go func() {
		for {
			in, err := l.Accept()
			if err != nil {
				return // closed by stop
			}
			go func() {
				defer in.Close()
				out, err := dial()
				if err != nil {
					return
				}
				defer out.Close()
				if !track(in, true) || !track(out, true) {
					return
				}
				defer track(in, false)
				defer track(out, false)
				done := make(chan struct{}, 2)
				pipe := func(dst, src net.Conn) {
					_, _ = io.Copy(dst, src)
					done <- struct{}{}
				}
				go pipe(out, in)
				go pipe(in, out)
				<-done // either side closed: close both
			}()
		}
	}()
	return func() {
		l.Close()
		mu.Lock()
		defer mu.Unlock()
		for c := range open {
			c.Close()
		}
		open = nil
	}
}

// UnpackImage reads the image tag of a `docker save` tarball, writes its
// layers into root with Unpack and returns the image's config.
func UnpackImage(tarPath, tag, root string) (*v1.Config, error) {
	ref, err := name.NewTag(tag)
	if err != nil {
		return nil, err
	}
	img, err := tarball.ImageFromPath(tarPath, &ref)
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	layers, err := img.Layers()
	if err != nil {
		return nil, err
	}
	return &cf.Config, Unpack(root, layers)
}

// Unpack writes an image's layers, lowest first, into the directory root,
// with owners, modes and extended attributes (PAX SCHILY.xattr records, such
// as a file capability), which Go's archive/tar reads but does not apply.
// It handles directories, regular files and symlinks, not whiteouts. Run as root.
func Unpack(root string, layers []v1.Layer) error {
	for _, l := range layers {
		rc, err := l.Uncompressed()
		if err != nil {
			return err
		}
		err = unpackLayer(root, tar.NewReader(rc))
		rc.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func unpackLayer(root string, tr *tar.Reader) error {
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		} else if err != nil {
			return err
		}
		rel := filepath.Clean(hdr.Name)
		if !filepath.IsLocal(rel) || strings.HasPrefix(filepath.Base(rel), ".wh.") {
			return fmt.Errorf("layer entry %q: outside the root, or a whiteout", hdr.Name)
		}
		dst := filepath.Join(root, rel)
		switch hdr.Typeflag {
		case tar.TypeDir:
			err = os.MkdirAll(dst, 0o755)
		case tar.TypeReg:
			var f *os.File
			if f, err = os.OpenFile(dst, os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600); err == nil {
				_, err = io.Copy(f, tr)
				err = errors.Join(err, f.Close())
			}
		case tar.TypeSymlink:
			err = os.Symlink(hdr.Linkname, dst)
		default:
			return fmt.Errorf("layer entry %q: type %q not handled", hdr.Name, hdr.Typeflag)
		}
		// Owner, then mode, then xattrs: chown clears security.capability.
		if err == nil {
			err = os.Lchown(dst, hdr.Uid, hdr.Gid)
		}
		if err == nil && hdr.Typeflag != tar.TypeSymlink {
			err = os.Chmod(dst, os.FileMode(hdr.Mode).Perm())
		}
		for k, v := range hdr.PAXRecords {
			if x, ok := strings.CutPrefix(k, "SCHILY.xattr."); ok && err == nil {
				err = unix.Lsetxattr(dst, x, []byte(v), 0)
			}
		}
		if err != nil {
			return fmt.Errorf("layer entry %q: %w", hdr.Name, err)
		}
	}
}

// Runc is a container that `runc run` runs in the foreground (so runc reaps
// it), with a state directory of its own.
type Runc struct {
	ID    string
	state string
	out   string // file holding runc's and the container's stdout and stderr
	done  chan error
}

// StartRunc runs the bundle's container as id with runc. When the test
// ends, it sends SIGTERM, then SIGKILL, deletes the container and, when the
// test failed, logs its output.
func StartRunc(t testing.TB, bundle, id string) (*Runc, error) {
	t.Helper()
	dir := t.TempDir()
	c := &Runc{ID: id, state: filepath.Join(dir, "state"), out: filepath.Join(dir, "output"), done: make(chan error, 1)}
	out, err := os.Create(c.out)
	if err != nil {
		return nil, err
	}
	defer out.Close()
	cmd := exec.Command("runc", "--root", c.state, "run", "--bundle", bundle, id)
	// Files, not pipes: runc and the container write to them directly.
	cmd.Stdout, cmd.Stderr = out, out
	// runc dies with the test binary, as CoreDNS processes do.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	go func() { c.done <- cmd.Wait() }()
	t.Cleanup(func() {
		for _, sig := range []string{"TERM", "KILL"} {
			_ = exec.Command("runc", "--root", c.state, "kill", id, sig).Run()
			if ok, _ := c.Exited(15 * time.Second); ok {
				break
			}
		}
		if out, err := exec.Command("runc", "--root", c.state, "delete", "--force", id).CombinedOutput(); err != nil {
			t.Errorf("runc delete --force %s: %v\n%s", id, err, out)
		}
		if t.Failed() {
			t.Logf("--- runc's and the container's output\n%s", harness.Abridge(c.Output(), 60, 60))
		}
	})
	return c, nil
}

// Exited waits up to within for runc run to end and returns its error.
func (c *Runc) Exited(within time.Duration) (bool, error) {
	select {
	case err := <-c.done:
		c.done <- err
		return true, err
	case <-time.After(within):
		return false, nil
	}
}

// Output is what runc and the container wrote so far.
func (c *Runc) Output() string {
	b, _ := os.ReadFile(c.out)
	return string(b)
}
