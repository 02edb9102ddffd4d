package ostreevm

import (
	"archive/tar"
	"compress/gzip"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/mcbake/mcbake/internal/ocilayout"
	"golang.org/x/sys/unix"
)

// packTime is the modification time of every tar entry and the image's
// creation time: the same tree packs to the same digests.
var packTime = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

// PackOCI writes the directory tree rootfs as a single-layer image tagged
// tag in the OCI image layout layoutDir (created when missing; an image
// already tagged tag there is untagged, other tags are kept).
//
// The layer is a gzip tar of everything below rootfs (rootfs itself is not
// an entry), walked in lexical order, with numeric owners (no user names),
// permission, setuid, setgid and sticky bits, symlinks, hard links (a
// later name of an inode is a link to the first), character and block
// devices and FIFOs; sockets are skipped and xattrs (file capabilities,
// SELinux labels) are not kept. Every mtime is packTime, so the same tree
// always gives the same layer, config and manifest digests. The config is
// linux/amd64 with the labels of a bootable ostree container image
// (containers.bootc=1, ostree.bootable=true). rootfs is only read; run as
// root to read every file.
func PackOCI(rootfs, layoutDir, tag string) error {
	if tag == "" {
		return errors.New("PackOCI: empty tag")
	}
	blobs := filepath.Join(layoutDir, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	layer, diffID, err := ocilayout.WriteLayer(blobs, gzip.BestSpeed, func(tw *tar.Writer) error { return writeTar(tw, rootfs) })
	if err != nil {
		return fmt.Errorf("PackOCI %s: %w", rootfs, err)
	}
	config := map[string]any{
		"created":      packTime.Format(time.RFC3339),
		"author":       "mcbake ostreevm.PackOCI",
		"architecture": "amd64",
		"os":           "linux",
		"config": map[string]any{
			"Env":    []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"},
			"Cmd":    []string{"/bin/bash"},
			"Labels": map[string]string{"containers.bootc": "1", "ostree.bootable": "true"},
		},
		"rootfs":  map[string]any{"type": "layers", "diff_ids": []string{diffID}},
		"history": []map[string]string{{"created": packTime.Format(time.RFC3339), "created_by": "ostreevm.PackOCI"}},
	}
	configDesc, err := ocilayout.WriteJSONBlob(blobs, ocilayout.MediaTypeConfig, config)
	if err != nil {
		return err
	}
	manifest := map[string]any{
		"schemaVersion": 2,
		"mediaType":     ocilayout.MediaTypeManifest,
		"config":        configDesc,
		"layers":        []ocilayout.Descriptor{layer},
	}
	manDesc, err := ocilayout.WriteJSONBlob(blobs, ocilayout.MediaTypeManifest, manifest)
	if err != nil {
		return err
	}
	manDesc.Annotations = map[string]string{ocilayout.AnnotationRefName: tag}
	if err := os.WriteFile(filepath.Join(layoutDir, "oci-layout"), []byte(`{"imageLayoutVersion":"1.0.0"}`), 0o644); err != nil {
		return err
	}
	return addToIndex(layoutDir, manDesc)
}

// addToIndex writes index.json with desc added and any other entry tagged
// like desc removed.
func addToIndex(layoutDir string, desc ocilayout.Descriptor) error {
	path := filepath.Join(layoutDir, "index.json")
	index := struct {
		SchemaVersion int                    `json:"schemaVersion"`
		MediaType     string                 `json:"mediaType"`
		Manifests     []ocilayout.Descriptor `json:"manifests"`
	}{SchemaVersion: 2, MediaType: ocilayout.MediaTypeIndex}
	if b, err := os.ReadFile(path); err == nil {
		if err := json.Unmarshal(b, &index); err != nil {
			return fmt.Errorf("%s: %w", path, err)
		}
		index.MediaType = ocilayout.MediaTypeIndex
	} else if !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	kept := index.Manifests[:0]
	for _, d := range index.Manifests {
		if d.Annotations[ocilayout.AnnotationRefName] != desc.Annotations[ocilayout.AnnotationRefName] {
			kept = append(kept, d)
		}
	}
	index.Manifests = append(kept, desc)
	b, err := json.Marshal(index)
	if err != nil {
		return err
	}
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// writeTar writes the entries below root in lexical order.
func writeTar(tw *tar.Writer, root string) error {
	links := map[[2]uint64]string{}
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == root {
			return nil
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		name := filepath.ToSlash(rel)
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return fmt.Errorf("%s: no stat", p)
		}
		hdr := &tar.Header{
			Name:    name,
			Mode:    ocilayout.TarMode(fi.Mode()),
			Uid:     int(st.Uid),
			Gid:     int(st.Gid),
			ModTime: packTime,
		}
		mode := fi.Mode()
		switch {
		case mode.IsDir():
			hdr.Typeflag = tar.TypeDir
			hdr.Name += "/"
		case mode.IsRegular():
			key := [2]uint64{uint64(st.Dev), st.Ino}
			if first, ok := links[key]; ok && st.Nlink > 1 {
				hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
				return tw.WriteHeader(hdr)
			}
			if st.Nlink > 1 {
				links[key] = name
			}
			hdr.Typeflag, hdr.Size = tar.TypeReg, fi.Size()
		case mode&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			hdr.Typeflag, hdr.Linkname = tar.TypeSymlink, target
		case mode&fs.ModeDevice != 0:
			hdr.Typeflag = tar.TypeBlock
			if mode&fs.ModeCharDevice != 0 {
				hdr.Typeflag = tar.TypeChar
			}
			hdr.Devmajor = int64(unix.Major(uint64(st.Rdev)))
			hdr.Devminor = int64(unix.Minor(uint64(st.Rdev)))
		case mode&fs.ModeNamedPipe != 0:
			hdr.Typeflag = tar.TypeFifo
		default: // sockets: not in images
			return nil
		}
		if err := tw.WriteHeader(hdr); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if hdr.Typeflag != tar.TypeReg {
			return nil
		}
		f, err := os.Open(p)
		if err != nil {
			return err
		}
		defer f.Close()
		n, err := io.Copy(tw, f)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		if n != hdr.Size {
			return fmt.Errorf("%s: changed while packing", name)
		}
		return nil
	})
}
