package e2e

import (
	"archive/tar"
	"context"
	"debug/buildinfo"
	"debug/elf"
	"encoding/json"
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

const imageName = "ghcr.io/clustersetdns/coredns-multicluster:0.1.0"

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
	checkImageConfigAsDockerfile(t, cf)

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	if len(layers) != 1 || len(cf.RootFS.DiffIDs) != 1 {
		t.Fatalf("%d layers, %d diff IDs; want 1 of each (an empty base)", len(layers), len(cf.RootFS.DiffIDs))
	}
	bin := extractCoreDNS(t, layers[0])
	checkStaticStripped(t, bin)

	// It runs, and serves the zone from the API server.
	dns := harness.RunCoreDNS(t, bin, harness.CoreDNSOptions{
		Plugins: harness.MulticlusterBlock(plugin.Kubeconfig),
	})
	expect(t, dns, defaultTTL, n("web.demo"), "A", want{Answer: []string{a(n("web.demo"), "10.42.0.10")}})
	expect(t, dns, defaultTTL, n("cart.shop"), "AAAA", want{Answer: []string{aaaa(n("cart.shop"), "fd00:42::30")}})
}

// checkImageConfigAsDockerfile checks the image's configuration: user,
// entrypoint, ports and platform, and that they, the working directory and
// the labels are what the Dockerfile's final stage says.
func checkImageConfigAsDockerfile(t *testing.T, cf *v1.ConfigFile) {
	t.Helper()
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
	// What the Dockerfile's final stage says, the same.
	dockerfile := readRepoFile(t, "Dockerfile")
	final := finalStage(dockerfile)
	if c.User != final["USER"] {
		t.Errorf("user %q, the Dockerfile's %q", c.User, final["USER"])
	}
	var entrypoint []string
	if err := json.Unmarshal([]byte(final["ENTRYPOINT"]), &entrypoint); err != nil || !slices.Equal(c.Entrypoint, entrypoint) {
		t.Errorf("entrypoint %q, the Dockerfile's %s", c.Entrypoint, final["ENTRYPOINT"])
	}
	if got, want := slices.Sorted(maps.Keys(c.ExposedPorts)), slices.Sorted(slices.Values(strings.Fields(final["EXPOSE"]))); !slices.Equal(got, want) {
		t.Errorf("exposed ports %q, the Dockerfile's %q", got, want)
	}
	if c.WorkingDir != final["WORKDIR"] {
		t.Errorf("working directory %q, the Dockerfile's %q", c.WorkingDir, final["WORKDIR"])
	}
	// The labels the Dockerfile sets, with the same values.
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
}

// checkStaticStripped checks that the binary bin is static (the empty base
// has no C library and no dynamic loader) and built as the Makefile's
// coredns target builds it.
func checkStaticStripped(t *testing.T, bin string) {
	t.Helper()
	f, err := elf.Open(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Error("/coredns is dynamically linked; the image has no loader for it")
		}
	}
	// Built by the Makefile's coredns target, which hack/image.sh runs:
	// CGO_ENABLED=0, -trimpath and -ldflags "-s -w" (no symbol table, no
	// DWARF; go records no -ldflags with -trimpath).
	var unstripped []string
	for _, sec := range f.Sections {
		if sec.Name == ".symtab" || strings.HasPrefix(sec.Name, ".debug_") || strings.HasPrefix(sec.Name, ".zdebug_") {
			unstripped = append(unstripped, sec.Name)
		}
	}
	if len(unstripped) > 0 {
		t.Errorf("/coredns has the sections %q: not built with -ldflags \"-s -w\"", unstripped)
	}
	f.Close()
	info, err := buildinfo.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if info.Path != "github.com/clustersetdns/multicluster/cmd/coredns" || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("/coredns is %s built with CGO_ENABLED=%q -trimpath=%q; want ./cmd/coredns with CGO_ENABLED=0 -trimpath",
			info.Path, settings["CGO_ENABLED"], settings["-trimpath"])
	}
}

// extractCoreDNS checks the layer holds /coredns, as the image needs it,
// and /in-place, and writes /coredns to a temporary directory.
func extractCoreDNS(t *testing.T, layer v1.Layer) string {
	t.Helper()
	rc, err := layer.Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	var bin string
	inPlace := false
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		switch strings.TrimPrefix(hdr.Name, "./") {
		case "coredns":
		case "in-place":
			// The in-place command of deploy/in-place's Jobs: same owner and
			// mode, no capability, built as the Makefile's in-place target.
			inPlace = true
			if hdr.Typeflag != tar.TypeReg || hdr.Mode&0o7777 != 0o755 || hdr.Uid != 65532 || hdr.Gid != 65532 || len(hdr.PAXRecords) != 0 {
				t.Errorf("/in-place: type %q, mode %o, owner %d:%d, records %v; want a file, 0755, 65532:65532, no capability",
					hdr.Typeflag, hdr.Mode, hdr.Uid, hdr.Gid, hdr.PAXRecords)
			}
			checkBuiltFrom(t, tr, "github.com/clustersetdns/multicluster/cmd/in-place")
			continue
		default:
			t.Errorf("the layer holds %q, want /coredns and /in-place only", hdr.Name)
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
	if !inPlace {
		t.Error("the layer holds no /in-place")
	}
	return bin
}

// checkBuiltFrom checks that the executable r holds is main package pkg,
// static and built with -trimpath.
func checkBuiltFrom(t *testing.T, r io.Reader, pkg string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), filepath.Base(pkg))
	data, err := io.ReadAll(r)
	if err == nil {
		err = os.WriteFile(path, data, 0o755)
	}
	if err != nil {
		t.Fatal(err)
	}
	info, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	settings := map[string]string{}
	for _, s := range info.Settings {
		settings[s.Key] = s.Value
	}
	if info.Path != pkg || settings["CGO_ENABLED"] != "0" || settings["-trimpath"] != "true" {
		t.Errorf("%s is %s built with CGO_ENABLED=%q -trimpath=%q; want %s with CGO_ENABLED=0 -trimpath",
			path, info.Path, settings["CGO_ENABLED"], settings["-trimpath"], pkg)
	}
}

// TestImageBuildsRunTheMakefile: the Dockerfile and hack/image.sh build
// CoreDNS with the Makefile's coredns target, and no other way, so the three
// build alike (TestImage checks what that build gives); BIN says where the
// binary goes.
func TestImageBuildsRunTheMakefile(t *testing.T) {
	joined := regexp.MustCompile(`\\\n\s*`) // continuation lines joined
	makeCoreDNS := regexp.MustCompile(`\bmake (.* )?coredns( [a-z-]+)* BIN=`)
	makeInPlace := regexp.MustCompile(`\bmake (.* )?in-place( .*)? IN_PLACE=`)
	for _, file := range []string{"Dockerfile", "hack/image.sh"} {
		text := joined.ReplaceAllString(readRepoFile(t, file), "")
		var runs []string
		inPlace := 0
		for line := range strings.Lines(text) {
			line = strings.TrimSpace(line)
			if strings.HasPrefix(line, "#") || strings.HasPrefix(line, "echo ") {
				continue
			}
			if strings.Contains(line, "go build") {
				t.Errorf("%s runs go build itself: %s", file, line)
			}
			if makeCoreDNS.MatchString(line) {
				runs = append(runs, line)
			}
			if makeInPlace.MatchString(line) {
				inPlace++
			}
		}
		if len(runs) != 1 {
			t.Errorf("%s runs make coredns BIN=... %d times, want once: %q", file, len(runs), runs)
		}
		if inPlace != 1 {
			t.Errorf("%s runs make in-place IN_PLACE=... %d times, want once", file, inPlace)
		}
	}
	cmd := exec.Command("make", "-s", "-n", "-C", env.Repo, "coredns", "BIN=/somewhere/coredns")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("make -n coredns: %v", err)
	}
	if !strings.Contains(string(out), "go build") || !strings.Contains(string(out), `-o "/somewhere/coredns" ./cmd/coredns`) {
		t.Errorf("make coredns BIN=/somewhere/coredns runs %q: want go build of ./cmd/coredns to that path", out)
	}
}

// TestDockerfileBasesAndContext: the Dockerfile builds with the Go of
// go.mod, ships on distroless static nonroot, gives /coredns the capability
// that TestImage finds in the engine-less image, and its build context
// leaves out caches, binaries and history.
func TestDockerfileBasesAndContext(t *testing.T) {
	goVersion := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(readRepoFile(t, "go.mod"))
	if goVersion == nil {
		t.Fatal("go.mod has no go line")
	}
	dockerfile := readRepoFile(t, "Dockerfile")
	for _, line := range []string{
		"golang:" + goVersion[1] + " AS build",
		"FROM gcr.io/distroless/static-debian12:nonroot",
		"setcap cap_net_bind_service=+ep /out/coredns",
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

// finalStage returns the last value of each instruction of the Dockerfile's
// last stage, by instruction, continuation lines joined.
func finalStage(dockerfile string) map[string]string {
	text := regexp.MustCompile(`\\\n\s*`).ReplaceAllString(dockerfile, "")
	out := map[string]string{}
	for line := range strings.Lines(text) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		op, arg, _ := strings.Cut(line, " ")
		op = strings.ToUpper(op)
		if op == "FROM" {
			clear(out)
		}
		out[op] = strings.TrimSpace(arg)
	}
	return out
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
