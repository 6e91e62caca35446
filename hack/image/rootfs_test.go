package main

import (
	"archive/tar"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"
	"time"
)

func TestRootfs(t *testing.T) {
	dir := t.TempDir()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	must(os.WriteFile(filepath.Join(dir, "bin", "tool"), []byte("#!tool"), 0o755))
	must(os.Symlink("tool", filepath.Join(dir, "bin", "alias")))
	must(os.WriteFile(filepath.Join(dir, "conf"), []byte("hosts: files dns\n"), 0o600))
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	r := Rootfs{Dir: dir, Entrypoint: []string{"/bin/tool", "-x"}, Created: created}
	img, err := r.Image()
	must(err)

	back := throughTarball(t, img)
	cf, err := back.ConfigFile()
	must(err)
	if !slices.Equal(cf.Config.Entrypoint, r.Entrypoint) || cf.Config.User != "" || !cf.Created.Time.Equal(created) {
		t.Errorf("config: entrypoint %q user %q created %v", cf.Config.Entrypoint, cf.Config.User, cf.Created)
	}
	layers, err := back.Layers()
	must(err)
	if len(layers) != 1 {
		t.Fatalf("%d layers, want 1", len(layers))
	}
	rc, err := layers[0].Uncompressed()
	must(err)
	defer rc.Close()
	type entry struct {
		name string
		kind byte
		mode int64
		link string
		body string
	}
	var got []entry
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		must(err)
		if h.Uid != 0 || h.Gid != 0 || !h.ModTime.Equal(created) {
			t.Errorf("%s: owner %d:%d, time %v; want root and %v", h.Name, h.Uid, h.Gid, h.ModTime, created)
		}
		body, err := io.ReadAll(tr)
		must(err)
		got = append(got, entry{h.Name, h.Typeflag, h.Mode, h.Linkname, string(body)})
	}
	want := []entry{
		{"bin/", tar.TypeDir, 0o755, "", ""},
		{"bin/alias", tar.TypeSymlink, 0o777, "tool", ""},
		{"bin/tool", tar.TypeReg, 0o755, "", "#!tool"},
		{"conf", tar.TypeReg, 0o600, "", "hosts: files dns\n"},
	}
	if !slices.Equal(got, want) {
		t.Errorf("layer:\n got %+v\nwant %+v", got, want)
	}

	// What an image cannot hold is refused, by name.
	must(syscall.Mkfifo(filepath.Join(dir, "fifo"), 0o644))
	if _, err := r.Image(); err == nil {
		t.Error("a named pipe went into the image")
	}
}
