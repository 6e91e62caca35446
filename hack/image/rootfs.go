package main

import (
	"archive/tar"
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
)

// Rootfs is an image made of one directory: the one-node cluster's client
// image (hack/cluster/client-rootfs.sh assembles its directory), run as root.
type Rootfs struct {
	// Dir becomes the image's only layer: regular files, directories and
	// symbolic links, with their modes, owned by root.
	Dir string
	// Entrypoint is the image's ENTRYPOINT.
	Entrypoint []string
	// Created is every timestamp of the image.
	Created time.Time
}

// Image builds the image of r, for the machine's architecture.
func (r Rootfs) Image() (v1.Image, error) {
	layerTar, err := r.Layer()
	if err != nil {
		return nil, err
	}
	return oneLayer(layerTar, runtime.GOARCH, r.Created, v1.Config{Entrypoint: r.Entrypoint, WorkingDir: "/"},
		v1.History{CreatedBy: "hack/image: COPY " + filepath.Base(r.Dir) + " /"})
}

// Layer is the uncompressed tar of r.Dir, in lexical order, every entry
// dated r.Created and owned by root.
func (r Rootfs) Layer() ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	err := filepath.WalkDir(r.Dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || path == r.Dir {
			return err
		}
		rel, err := filepath.Rel(r.Dir, path)
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		hdr := &tar.Header{Name: filepath.ToSlash(rel), Mode: int64(info.Mode().Perm()), ModTime: r.Created, Format: tar.FormatPAX}
		switch {
		case d.IsDir():
			hdr.Typeflag, hdr.Name = tar.TypeDir, hdr.Name+"/"
		case d.Type()&fs.ModeSymlink != 0:
			hdr.Typeflag = tar.TypeSymlink
			if hdr.Linkname, err = os.Readlink(path); err != nil {
				return err
			}
		case d.Type().IsRegular():
			hdr.Typeflag, hdr.Size = tar.TypeReg, info.Size()
		default:
			return fmt.Errorf("%s: only files, directories and symbolic links go into an image", path)
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return err
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer f.Close()
		_, err = io.Copy(tw, f)
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
