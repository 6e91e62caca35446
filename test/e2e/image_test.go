package e2e

import (
	"archive/tar"
	"context"
	"debug/elf"
	"errors"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/clustersetdns/multicluster/test/e2e/harness"
)

const imageName = "ghcr.io/clustersetdns/coredns-multicluster:latest"

// imageTarball builds the image tarball with hack/image.sh into a temporary
// directory, or takes E2E_IMAGE_TAR (a tarball built before the tests, as
// hack/test.sh does with E2E_COREDNS, to keep the build out of the timeout).
func imageTarball(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("E2E_IMAGE_TAR"); p != "" {
		t.Logf("using the image tarball %s (E2E_IMAGE_TAR)", p)
		return p
	}
	out := filepath.Join(t.TempDir(), "coredns-multicluster.tar")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(env.Repo, "hack", "image.sh"))
	cmd.Env = append(os.Environ(), "OUT="+out, "IMAGE="+imageName)
	start := time.Now()
	stdout, err := cmd.Output()
	if err != nil {
		var stderr []byte
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			stderr = ee.Stderr
		}
		t.Fatalf("hack/image.sh: %v\n%s%s", err, stdout, stderr)
	}
	t.Logf("hack/image.sh built the tarball in %.0fs", time.Since(start).Seconds())
	if got := strings.TrimSpace(string(stdout)); got != out {
		t.Errorf("hack/image.sh printed %q, want the tarball's path %q", got, out)
	}
	return out
}

// TestImage builds the image without a container engine, reads it back as
// docker load would find it, checks what the Dockerfile promises, then runs
// the /coredns of its only layer against the API server and asks it with dig.
func TestImage(t *testing.T) {
	path := imageTarball(t)
	tag, err := name.NewTag(imageName)
	if err != nil {
		t.Fatal(err)
	}
	img, err := tarball.ImageFromPath(path, &tag)
	if err != nil {
		t.Fatalf("reading %s as %s: %v", path, tag, err)
	}
	cf, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cf.Config
	if c.User != "65532:65532" {
		t.Errorf("user %q, want 65532:65532", c.User)
	}
	if !slices.Equal(c.Entrypoint, []string{"/coredns"}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q, cmd %q; want [/coredns] and none", c.Entrypoint, c.Cmd)
	}
	if got := slices.Sorted(maps.Keys(c.ExposedPorts)); !slices.Equal(got, []string{"53/tcp", "53/udp"}) {
		t.Errorf("exposed ports %q, want 53/tcp and 53/udp", got)
	}
	if cf.OS != "linux" || cf.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cf.OS, cf.Architecture, runtime.GOARCH)
	}
	// The labels the Dockerfile sets, with the same values.
	dockerfile := readRepoFile(t, "Dockerfile")
	labels := dockerfileLabels(dockerfile)
	for _, k := range []string{"title", "source", "description"} {
		k = "org.opencontainers.image." + k
		if labels[k] == "" {
			t.Errorf("the Dockerfile has no label %s", k)
		}
		if c.Labels[k] != labels[k] {
			t.Errorf("label %s is %q, the Dockerfile's %q", k, c.Labels[k], labels[k])
		}
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("%d layers, %d diff IDs; want 1 of each (an empty base)", len(layers), len(cf.RootFS.DiffIDs))
	}
	bin := extractCoreDNS(t, layers[0])

	// The empty base has no C library and no dynamic loader.
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/coredns is dynamically linked; the image has no loader for it")
		}
	}
	f.Close()

	// It runs, and serves the zone from the API server.
	dns := harness.RunCoreDNS(t, bin, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig),
	})
	expect(t, dns, defaultTTL, n("web.demo"), "A", want{answer: []string{a(n("web.demo"), "10.42.0.10")}})
	expect(t, dns, defaultTTL, n("cart.shop"), "AAAA", want{answer: []string{aaaa(n("cart.shop"), "fd00:42::30")}})
}

// extractCoreDNS checks the layer holds /coredns alone, as the image needs
// it, and writes it to a temporary directory.
func extractCoreDNS(t *testing.T, layer v1.Layer) string {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var bin string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if strings.TrimPrefix(hdr.Name, "./") != "coredns" {
			t.Errorf("the layer holds %q, want /coredns only", hdr.Name)
			continue
		}
		if hdr.Typeflag != tar.TypeReg || hdr.Mode&0o7777 != 0o755 || hdr.Uid != 65532 || hdr.Gid != 65532 {
			t.Errorf("/coredns: type %q, mode %o, owner %d:%d; want a file, 0755, 65532:65532",
				hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid)
		}
		// setcap cap_net_bind_service=+ep, as the Dockerfile does: user
		// 65532 binds port 53 where the runtime grants NET_BIND_SERVICE.
		const capNetBindServiceEP = "\x01\x00\x00\x02\x00\x04\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00\x00"
		if got := hdr.PAXRecords["SCHILY.xattr.security.capability"]; got != capNetBindServiceEP {
			t.Errorf("/coredns: security.capability %q, want cap_net_bind_service=+ep", got)
		}
		bin = filepath.Join(t.TempDir(), "coredns")
		w, err := os.OpenFile(bin, os.O_CREATE|os.O_WRONLY|os.O_EXCL, 0o755)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := io.Copy(w, tr); err != nil {
			t.Fatal(err)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if bin == "" {
		t.Fatal("the layer holds no /coredns")
	}
	return bin
}

// TestImageBuildsAgree: the Dockerfile, the Makefile and hack/image.sh build
// the same binary, and the Dockerfile's final stage is what the engine-less
// image reproduces.
func TestImageBuildsAgree(t *testing.T) {
	const build = `CGO_ENABLED=0 go build -trimpath -ldflags "-s -w"`
	for _, file := range []string{"Dockerfile", "Makefile", "hack/image.sh"} {
		text := readRepoFile(t, file)
		// Continuation lines joined, so a wrapped command still matches.
		text = regexp.MustCompile(`\\\n\s*`).ReplaceAllString(text, "")
		if !strings.Contains(text, build) || !strings.Contains(text, "./cmd/coredns") {
			t.Errorf("%s does not build ./cmd/coredns with %s", file, build)
		}
	}
	dockerfile := readRepoFile(t, "Dockerfile")
	for _, line := range []string{
		"golang:1.26 AS build",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"USER 65532:65532",
		"EXPOSE 53/udp 53/tcp",
		`ENTRYPOINT ["/coredns"]`,
		"setcap cap_net_bind_service=+ep",
	} {
		if !strings.Contains(dockerfile, line) {
			t.Errorf("the Dockerfile has no %q", line)
		}
	}
	ignore := strings.Fields(readRepoFile(t, ".dockerignore"))
	for _, p := range []string{".cache", "bin", ".git"} {
		if !slices.Contains(ignore, p) {
			t.Errorf(".dockerignore does not leave out %s", p)
		}
	}
}

func readRepoFile(t *testing.T, rel string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(env.Repo, rel))
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// dockerfileLabels returns the org.opencontainers.image.* labels a
// Dockerfile sets with LABEL key="value".
func dockerfileLabels(dockerfile string) map[string]string {
	out := map[string]string{}
	for _, m := range regexp.MustCompile(`(org\.opencontainers\.image\.[a-z]+)="([^"]*)"`).FindAllStringSubmatch(dockerfile, -1) {
		out[m[1]] = m[2]
	}
	return out
}
