// Command image writes the container image of CoreDNS with the multicluster
// plugin without a container engine, as a `docker save` tarball that both
// `docker load` and `ctr image import` accept.
//
// The image is what the Dockerfile builds, on an empty base instead of
// distroless: one layer holding the static binary as /coredns (mode 0755,
// owned 65532:65532, file capability cap_net_bind_service=+ep), run as user
// 65532:65532 with ENTRYPOINT ["/coredns"], exposing 53/udp and 53/tcp. Its
// OS and architecture are read from the binary, which must be a static ELF
// executable: the empty base holds no C library.
//
//	go run . -binary ../../.cache/coredns-static -o ../../.cache/coredns-multicluster.tar
//
// The output is reproducible: every timestamp is SOURCE_DATE_EPOCH (the Unix
// epoch when unset), so the same binary gives the same image digest.
package main

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strconv"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

const (
	// DefaultTag names the image in the tarball: the chart's appVersion
	// (deploy/chart/coredns-multicluster/Chart.yaml), which the chart's
	// default, deploy/deployment.yaml and deploy/coredns-chart refer to.
	DefaultTag = "ghcr.io/clustersetdns/coredns-multicluster:0.1.0"
	// User is the distroless "nonroot" user and group the image runs as.
	User = "65532:65532"
	uid  = 65532
	// Path is where the binary sits in the image, and the entrypoint.
	Path = "/coredns"
	// InPlacePath is where the in-place command (cmd/in-place) sits: the
	// Jobs of deploy/in-place run it from the image.
	InPlacePath = "/in-place"
)

// Labels are the image's fixed labels; Options.Revision adds
// org.opencontainers.image.revision. The Dockerfile sets the same.
var Labels = map[string]string{
	"org.opencontainers.image.title":       "coredns-multicluster",
	"org.opencontainers.image.description": "CoreDNS with the multicluster plugin: the Kubernetes Multi-Cluster Services zone clusterset.local",
	"org.opencontainers.image.source":      "https://github.com/clustersetdns/multicluster",
}

// ExposedPorts are DNS over UDP and TCP, as the Dockerfile's EXPOSE.
var ExposedPorts = []string{"53/udp", "53/tcp"}

// Options say what to put in the image.
type Options struct {
	// Binary is the static CoreDNS executable.
	Binary string
	// InPlace, when set, is the static in-place executable, put at InPlacePath.
	InPlace string
	// Created is every timestamp of the image: config, history, file.
	Created time.Time
	// Revision, when set, is the org.opencontainers.image.revision label.
	Revision string
	// NetBindService gives the binary the file capability
	// cap_net_bind_service=+ep, as the Dockerfile's setcap does.
	NetBindService bool
	// Title, when set, names another CoreDNS build (stock CoreDNS for the
	// one-node cluster): the labels are then only its title and Description.
	Title, Description string
}

func main() {
	var (
		o   Options
		out string
		tag string
		fs  Rootfs
	)
	flag.StringVar(&o.Binary, "binary", "", "the static CoreDNS binary (built with CGO_ENABLED=0)")
	flag.StringVar(&o.InPlace, "in-place", "", "the static in-place binary (cmd/in-place), put at "+InPlacePath)
	flag.StringVar(&out, "o", "", "the tarball to write")
	flag.StringVar(&tag, "tag", DefaultTag, "the image's name in the tarball")
	flag.StringVar(&o.Revision, "revision", "", "the source revision, for the org.opencontainers.image.revision label")
	flag.StringVar(&o.Title, "title", "", "another CoreDNS build's title label (labels are then title and -description only)")
	flag.StringVar(&o.Description, "description", "", "with -title, the description label")
	flag.StringVar(&fs.Dir, "rootfs", "", "instead of -binary: a directory that becomes the image's only layer, owned by root")
	flag.Func("entrypoint", "with -rootfs, the entrypoint: one flag per argument", func(s string) error {
		fs.Entrypoint = append(fs.Entrypoint, s)
		return nil
	})
	flag.BoolVar(&o.NetBindService, "net-bind-service", true,
		"give "+Path+" the file capability cap_net_bind_service=+ep, so that user 65532 binds port 53 where the runtime grants NET_BIND_SERVICE")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: image -binary COREDNS -o TARBALL [flags]\n       image -rootfs DIR -entrypoint ARG... -o TARBALL -tag NAME\n\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if (o.Binary == "") == (fs.Dir == "") || out == "" || flag.NArg() > 0 || (fs.Dir != "" && len(fs.Entrypoint) == 0) {
		flag.Usage()
		os.Exit(2)
	}
	build := func(created time.Time) (v1.Image, error) { o.Created = created; return Image(o) }
	if fs.Dir != "" {
		build = func(created time.Time) (v1.Image, error) { fs.Created = created; return fs.Image() }
	}
	if err := run(build, out, tag); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

func run(build func(time.Time) (v1.Image, error), out, tag string) error {
	created, err := sourceDateEpoch()
	if err != nil {
		return err
	}
	ref, err := name.NewTag(tag, name.StrictValidation)
	if err != nil {
		return fmt.Errorf("tag %q: %w", tag, err)
	}
	img, err := build(created)
	if err != nil {
		return err
	}
	if err := Write(out, ref, img); err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	fmt.Printf("wrote %s: %s, %s/%s, manifest %s\n", out, ref, cf.OS, cf.Architecture, digest)
	return nil
}

// sourceDateEpoch is SOURCE_DATE_EPOCH, or the Unix epoch when it is unset.
func sourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Unix(0, 0).UTC(), nil
	}
	sec, err := strconv.ParseInt(s, 10, 64)
	if err != nil || sec < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH %q is not a number of seconds", s)
	}
	return time.Unix(sec, 0).UTC(), nil
}

// readStatic reads the static binary at path, and its architecture.
func readStatic(path string) (arch string, b []byte, err error) {
	if arch, err = StaticArch(path); err != nil {
		return "", nil, err
	}
	b, err = os.ReadFile(path)
	return arch, b, err
}

// Image builds the image from o.
func Image(o Options) (v1.Image, error) {
	arch, bin, err := readStatic(o.Binary)
	if err != nil {
		return nil, err
	}
	var inPlace []byte
	if o.InPlace != "" {
		if _, inPlace, err = readStatic(o.InPlace); err != nil {
			return nil, err
		}
	}
	layerTar, err := Layer(bin, o.Created, o.NetBindService, inPlace)
	if err != nil {
		return nil, err
	}
	labels := maps.Clone(Labels)
	if o.Title != "" {
		labels = map[string]string{"org.opencontainers.image.title": o.Title, "org.opencontainers.image.description": o.Description}
	}
	if o.Revision != "" {
		labels["org.opencontainers.image.revision"] = o.Revision
	}
	ports := make(map[string]struct{}, len(ExposedPorts))
	for _, p := range ExposedPorts {
		ports[p] = struct{}{}
	}
	return oneLayer(layerTar, arch, o.Created, v1.Config{
		User:         User,
		Entrypoint:   []string{Path},
		ExposedPorts: ports,
		Labels:       labels,
		WorkingDir:   "/",
	}, v1.History{
		CreatedBy: fmt.Sprintf("hack/image: COPY coredns %s (owner %s, mode 0755)%s", Path, User, inPlaceNote(inPlace)),
		Comment:   "static CoreDNS with the multicluster plugin",
	})
}

// oneLayer is the image of one layer, layerTar (uncompressed), on an empty
// base, for linux/arch, with cfg, every timestamp created.
func oneLayer(layerTar []byte, arch string, created time.Time, cfg v1.Config, history v1.History) (v1.Image, error) {
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(layerTar)), nil
	})
	if err != nil {
		return nil, err
	}
	img, err := mutate.ConfigFile(empty.Image, &v1.ConfigFile{
		Architecture: arch,
		OS:           "linux",
		Created:      v1.Time{Time: created},
		Config:       cfg,
		RootFS:       v1.RootFS{Type: "layers"},
	})
	if err != nil {
		return nil, err
	}
	history.Created = v1.Time{Time: created}
	return mutate.Append(img, mutate.Addendum{Layer: layer, History: history})
}

// Layer is the uncompressed tar of the image's only layer: bin as /coredns,
// and inPlace, when not nil, as /in-place (without the capability).
func Layer(bin []byte, mtime time.Time, netBindService bool, inPlace []byte) ([]byte, error) {
	hdr := &tar.Header{
		Typeflag: tar.TypeReg,
		Name:     Path[1:],
		Mode:     0o755,
		Uid:      uid,
		Gid:      uid,
		Size:     int64(len(bin)),
		ModTime:  mtime,
		Format:   tar.FormatPAX,
	}
	if netBindService {
		// Unpacked by docker and containerd into the file's xattr, as
		// BuildKit carries the one setcap wrote in the Dockerfile.
		hdr.PAXRecords = map[string]string{"SCHILY.xattr.security.capability": string(NetBindServiceCap())}
	}
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(hdr); err != nil {
		return nil, err
	}
	if _, err := tw.Write(bin); err != nil {
		return nil, err
	}
	if inPlace != nil {
		h := *hdr
		h.Name, h.Size, h.PAXRecords = InPlacePath[1:], int64(len(inPlace)), nil
		if err := tw.WriteHeader(&h); err != nil {
			return nil, err
		}
		if _, err := tw.Write(inPlace); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// NetBindServiceCap is the security.capability xattr that
// `setcap cap_net_bind_service=+ep` writes: a struct vfs_cap_data of
// revision 2 (linux/capability.h) with the effective flag and
// CAP_NET_BIND_SERVICE (10) permitted.
func NetBindServiceCap() []byte {
	const (
		vfsCapRevision2   = 0x02000000
		vfsCapFlagsEffect = 0x000001
		capNetBindService = 10
	)
	b := make([]byte, 4+2*8) // magic_etc, then {permitted, inheritable} x 2
	binary.LittleEndian.PutUint32(b[0:], vfsCapRevision2|vfsCapFlagsEffect)
	binary.LittleEndian.PutUint32(b[4:], 1<<capNetBindService)
	return b
}

// elfArch maps ELF machines to GOARCH names.
var elfArch = map[elf.Machine]string{
	elf.EM_X86_64:  "amd64",
	elf.EM_AARCH64: "arm64",
	elf.EM_PPC64:   "ppc64le",
	elf.EM_S390:    "s390x",
	elf.EM_RISCV:   "riscv64",
}

// StaticArch returns the architecture of a static 64-bit ELF executable,
// and an error for anything else: the empty base image has no dynamic loader.
func StaticArch(path string) (string, error) {
	f, err := elf.Open(path)
	if err != nil {
		return "", fmt.Errorf("%s is not an ELF executable: %w", path, err)
	}
	defer f.Close()
	if f.Type != elf.ET_EXEC && f.Type != elf.ET_DYN {
		return "", fmt.Errorf("%s is an ELF %s, not an executable", path, f.Type)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return "", fmt.Errorf("%s is dynamically linked; build it with CGO_ENABLED=0", path)
		}
	}
	arch, ok := elfArch[f.Machine]
	if !ok || f.Class != elf.ELFCLASS64 || (f.Machine == elf.EM_PPC64 && f.Data != elf.ELFDATA2LSB) {
		return "", fmt.Errorf("%s: unsupported machine %s (%s, %s)", path, f.Machine, f.Class, f.Data)
	}
	return arch, nil
}

// Write writes img as a `docker save` tarball named ref to path, through a
// temporary file so that path is never left half written.
func Write(path string, ref name.Reference, img v1.Image) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if err := tarball.Write(ref, img, tmp); err != nil {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := errors.Join(tmp.Chmod(0o644), tmp.Close()); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func inPlaceNote(inPlace []byte) string {
	if inPlace == nil {
		return ""
	}
	return fmt.Sprintf("; COPY in-place %s (owner %s, mode 0755)", InPlacePath, User)
}
