package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// staticHello builds a static Go program, as the Dockerfile builds CoreDNS.
func staticHello(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	src := filepath.Join(dir, "hello.go")
	if err := os.WriteFile(src, []byte("package main\n\nfunc main() { println(\"hello\") }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "hello")
	cmd := exec.Command("go", "build", "-trimpath", "-ldflags", "-s -w", "-o", bin, src)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off", "GOFLAGS=")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func TestImage(t *testing.T) {
	bin := staticHello(t)
	created := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	img, err := Image(Options{Binary: bin, InPlace: bin, Created: created, Revision: "abc123", NetBindService: true})
	if err != nil {
		t.Fatal(err)
	}
	checkImageConfig(t, img, created)

	// Through the tarball and back, as docker load would read it.
	back := throughTarball(t, img)
	want, _ := img.Digest()
	if got, err := back.Digest(); err != nil || got != want {
		t.Errorf("digest read back %v (%v), want %v", got, err, want)
	}
	checkLayer(t, back, bin, created)

	// Reproducible: the same input gives the same image.
	again, err := Image(Options{Binary: bin, InPlace: bin, Created: created, Revision: "abc123", NetBindService: true})
	if err != nil {
		t.Fatal(err)
	}
	if d, _ := again.Digest(); d != want {
		t.Errorf("second build %v, first %v", d, want)
	}
}

// checkImageConfig checks the image's configuration: platform, creation
// time, user, entrypoint, ports, labels (with revision abc123), one layer.
func checkImageConfig(t *testing.T, img v1.Image, created time.Time) {
	t.Helper()
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	if !cf.Created.Time.Equal(created) {
		t.Errorf("created %v, want %v", cf.Created.Time, created)
	}
	c := cf.Config
	if c.User != "65532:65532" || !slices.Equal(c.Entrypoint, []string{"/coredns"}) || len(c.Cmd) != 0 {
		t.Errorf("user %q, entrypoint %q, cmd %q; want 65532:65532, [/coredns], none", c.User, c.Entrypoint, c.Cmd)
	}
	if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, []string{"53/tcp", "53/udp"}) {
		t.Errorf("exposed ports %q", got)
	}
	wantLabels := maps.Clone(Labels)
	wantLabels["org.opencontainers.image.revision"] = "abc123"
	if !maps.Equal(c.Labels, wantLabels) {
		t.Errorf("labels %v, want %v", c.Labels, wantLabels)
	}
	if len(cf.History) != 1 || len(cf.RootFS.DiffIDs) != 1 {
		t.Errorf("history %v, diff IDs %v; want one of each", cf.History, cf.RootFS.DiffIDs)
	}
}

// throughTarball writes img with Write, tagged DefaultTag, into a directory
// that does not exist yet, and reads it back.
func throughTarball(t *testing.T, img v1.Image) v1.Image {
	t.Helper()
	out := filepath.Join(t.TempDir(), "sub", "image.tar")
	ref := name.MustParseReference(DefaultTag).(name.Tag)
	if err := Write(out, ref, img); err != nil {
		t.Fatal(err)
	}
	back, err := tarball.ImageFromPath(out, &ref)
	if err != nil {
		t.Fatal(err)
	}
	return back
}

// checkLayer checks that img has one layer with one entry: the binary bin
// at /coredns, owned by 65532, executable, of time created, with the
// capability to bind port 53.
func checkLayer(t *testing.T, img v1.Image, bin string, created time.Time) {
	t.Helper()
	layers, err := img.Layers()
	if err != nil || len(layers) != 1 {
		t.Fatalf("%d layers (%v), want 1", len(layers), err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	hdr, err := tr.Next()
	if err != nil {
		t.Fatal(err)
	}
	if hdr.Name != "coredns" || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 65532 || hdr.Gid != 65532 || !hdr.ModTime.Equal(created) {
		t.Errorf("layer entry %q type %c mode %o owner %d:%d mtime %v", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime)
	}
	// getfattr -e base64 -n security.capability after setcap cap_net_bind_service=+ep
	if got := hdr.PAXRecords["SCHILY.xattr.security.capability"]; got != "\x01\x00\x00\x02\x00\x04\x00\x00"+string(make([]byte, 12)) {
		t.Errorf("security.capability %q", got)
	}
	content, _ := io.ReadAll(tr)
	orig, _ := os.ReadFile(bin)
	if !bytes.Equal(content, orig) {
		t.Errorf("/coredns holds %d bytes, want the binary's %d", len(content), len(orig))
	}
	// The in-place command, for the Jobs of deploy/in-place: same owner and
	// mode, no capability.
	if hdr, err = tr.Next(); err != nil {
		t.Fatalf("no /in-place in the layer: %v", err)
	}
	if hdr.Name != "in-place" || hdr.Typeflag != tar.TypeReg || hdr.Mode != 0o755 || hdr.Uid != 65532 || hdr.Gid != 65532 || !hdr.ModTime.Equal(created) || len(hdr.PAXRecords) != 0 {
		t.Errorf("layer entry %q type %c mode %o owner %d:%d mtime %v records %v", hdr.Name, hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.ModTime, hdr.PAXRecords)
	}
	if content, _ = io.ReadAll(tr); !bytes.Equal(content, orig) {
		t.Errorf("/in-place holds %d bytes, want the binary's %d", len(content), len(orig))
	}
	if _, err := tr.Next(); !errors.Is(err, io.EOF) {
		t.Errorf("more than two entries in the layer: %v", err)
	}
}

func TestWithoutCapability(t *testing.T) {
	layer, err := Layer([]byte("x"), time.Unix(0, 0), false, nil)
	if err != nil {
		t.Fatal(err)
	}
	hdr, err := tar.NewReader(bytes.NewReader(layer)).Next()
	if err != nil {
		t.Fatal(err)
	}
	if len(hdr.PAXRecords) != 0 {
		t.Errorf("PAX records %v, want none", hdr.PAXRecords)
	}
}

func TestRefusesWhatCannotRun(t *testing.T) {
	text := filepath.Join(t.TempDir(), "coredns")
	if err := os.WriteFile(text, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := StaticArch(text); err == nil {
		t.Error("a shell script was accepted")
	}
	dynamic := dynamicProgram(t)
	if _, err := StaticArch(dynamic); err == nil {
		t.Errorf("the dynamic %s was accepted", dynamic)
	}
}

// dynamicProgram is a dynamically linked ELF program of the machine (sh,
// ls or env, as a distribution links them), or ends the test without one.
func dynamicProgram(t *testing.T) string {
	t.Helper()
	for _, name := range []string{"sh", "ls", "env"} {
		path, err := exec.LookPath(name)
		if err != nil {
			continue
		}
		if path, err = filepath.EvalSymlinks(path); err != nil {
			continue
		}
		f, err := elf.Open(path)
		if err != nil {
			continue
		}
		interp := f.Section(".interp") != nil
		f.Close()
		if interp {
			return path
		}
	}
	missing(t, "no dynamically linked ELF sh, ls or env on PATH (apt-get install dash coreutils)")
	return ""
}

// missing ends the test for want of what the machine lacks, the message
// saying how to get it: it fails when MULTICLUSTER_NO_SKIP is set, as
// hack/test.sh sets it, and is skipped otherwise. test/e2e's
// missing (test/e2e/helpers_test.go) is the same for the end-to-end tests.
func missing(t *testing.T, format string, args ...any) {
	t.Helper()
	if os.Getenv("MULTICLUSTER_NO_SKIP") != "" {
		t.Fatalf(format+" (MULTICLUSTER_NO_SKIP is set: nothing may be skipped)", args...)
	}
	t.Skipf(format, args...)
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if got, err := sourceDateEpoch(); err != nil || got.Unix() != 0 {
		t.Errorf("unset: %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1767322800")
	if got, err := sourceDateEpoch(); err != nil || got.Unix() != 1767322800 {
		t.Errorf("set: %v, %v", got, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := sourceDateEpoch(); err == nil {
		t.Error("yesterday accepted")
	}
}
