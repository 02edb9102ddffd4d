package ignitiontest

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/mcbake/mcbake/internal/ocilayout"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
)

// layerTime is the mtime of every entry of the layer and the date of its
// history entry: the same changes give the same layer.
var layerTime = time.Date(2025, time.January, 2, 0, 0, 0, 0, time.UTC)

// Image builds the layered image of the MachineConfig mc (JSON) the way
// the MCO's on-cluster build does: it unpacks the image tagged baseTag in
// the OCI layout baseLayout, runs ApplyMachineConfig on it, and writes the
// base image plus the layer of the changes (AppendLayer) tagged tag into
// the new OCI layout layout. It returns the applied root directory.
func Image(t testing.TB, baseLayout, baseTag string, mc []byte, layout, tag string) string {
	t.Helper()
	Binary(t) // skip before unpacking anything
	dir := t.TempDir()
	pristine, root := filepath.Join(dir, "base"), filepath.Join(dir, "applied")
	ostreetest.Unpack(t, baseLayout, baseTag, pristine)
	ostreetest.Unpack(t, baseLayout, baseTag, root)
	t.Logf("ignition-apply:\n%s", ApplyMachineConfig(t, root, mc))
	AppendLayer(t, baseLayout, baseTag, pristine, root, layout, tag)
	return root
}

// AppendLayer writes into the new OCI layout layout (which must not exist)
// the image tagged baseTag in baseLayout with one more gzip layer: the
// differences between baseRoot (that image, unpacked) and root (a changed
// copy of it), tagged tag. See the package comment.
func AppendLayer(t testing.TB, baseLayout, baseTag, baseRoot, root, layout, tag string) {
	t.Helper()
	if err := appendLayer(baseLayout, baseTag, baseRoot, root, layout, tag); err != nil {
		t.Fatalf("ignitiontest.AppendLayer: %v", err)
	}
}

func appendLayer(baseLayout, baseTag, baseRoot, root, layout, tag string) error {
	blobs := filepath.Join(layout, "blobs", "sha256")
	if err := os.MkdirAll(blobs, 0o755); err != nil {
		return err
	}
	man, err := readTagged(baseLayout, baseTag)
	if err != nil {
		return err
	}
	for _, d := range append([]ocilayout.Descriptor{man.Config}, man.Layers...) {
		if err := ocilayout.LinkBlob(baseLayout, layout, d.Digest); err != nil {
			return err
		}
	}
	layer, diffID, err := ocilayout.WriteLayer(blobs, gzip.DefaultCompression, func(tw *tar.Writer) error { return writeChanges(tw, baseRoot, root) })
	if err != nil {
		return fmt.Errorf("writing the layer: %w", err)
	}
	config, err := appendConfig(baseLayout, blobs, man.Config, diffID)
	if err != nil {
		return err
	}
	man.Config, man.Layers = config, append(man.Layers, layer)
	md, err := ocilayout.WriteJSONBlob(blobs, ocilayout.MediaTypeManifest, man)
	if err != nil {
		return err
	}
	md.Annotations = map[string]string{ocilayout.AnnotationRefName: tag}
	index := map[string]any{"schemaVersion": 2, "mediaType": ocilayout.MediaTypeIndex, "manifests": []ocilayout.Descriptor{md}}
	if err := ocilayout.WriteJSON(filepath.Join(layout, "index.json"), index); err != nil {
		return err
	}
	return ocilayout.WriteJSON(filepath.Join(layout, "oci-layout"), map[string]string{"imageLayoutVersion": "1.0.0"})
}

// ociManifest is the part of an image manifest AppendLayer rewrites; the
// rest is kept as it is.
type ociManifest struct {
	SchemaVersion int                    `json:"schemaVersion"`
	MediaType     string                 `json:"mediaType,omitempty"`
	Config        ocilayout.Descriptor   `json:"config"`
	Layers        []ocilayout.Descriptor `json:"layers"`
	Annotations   map[string]string      `json:"annotations,omitempty"`
}

// readTagged reads the image manifest tagged tag in the layout.
func readTagged(layout, tag string) (ociManifest, error) {
	var index struct{ Manifests []ocilayout.Descriptor }
	if err := ocilayout.ReadJSON(filepath.Join(layout, "index.json"), &index); err != nil {
		return ociManifest{}, err
	}
	for _, d := range index.Manifests {
		if d.Annotations[ocilayout.AnnotationRefName] != tag {
			continue
		}
		if d.MediaType != ocilayout.MediaTypeManifest {
			return ociManifest{}, fmt.Errorf("tag %q is a %s, want an image manifest", tag, d.MediaType)
		}
		var m ociManifest
		return m, ocilayout.ReadJSON(ocilayout.BlobPath(layout, d.Digest), &m)
	}
	return ociManifest{}, fmt.Errorf("no image tagged %q in %s", tag, layout)
}

// appendConfig writes the base's config with the new layer's diff ID and
// a history entry added, and returns its descriptor.
func appendConfig(baseLayout, blobs string, base ocilayout.Descriptor, diffID string) (ocilayout.Descriptor, error) {
	var cfg map[string]any
	if err := ocilayout.ReadJSON(ocilayout.BlobPath(baseLayout, base.Digest), &cfg); err != nil {
		return ocilayout.Descriptor{}, err
	}
	rootfs, _ := cfg["rootfs"].(map[string]any)
	ids, _ := rootfs["diff_ids"].([]any)
	if rootfs == nil {
		return ocilayout.Descriptor{}, errors.New("the base config has no rootfs")
	}
	rootfs["diff_ids"] = append(ids, diffID)
	history, _ := cfg["history"].([]any)
	cfg["history"] = append(history, map[string]any{
		"created":    layerTime.Format(time.RFC3339),
		"created_by": "ignition-apply --ignore-unsupported --offline (mcbake ignitiontest)",
	})
	return ocilayout.WriteJSONBlob(blobs, ocilayout.MediaTypeConfig, cfg)
}

// writeChanges writes, in path order, every path of root that baseRoot
// lacks or has otherwise (with its parent directories), then a whiteout
// for every topmost path of baseRoot that root lacks.
func writeChanges(tw *tar.Writer, baseRoot, root string) error {
	w := &changeWriter{tw: tw, root: root, written: map[string]bool{}, inodes: map[[2]uint64]string{}}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		name := rel(root, p)
		changed, err := differs(filepath.Join(baseRoot, name), p)
		if err != nil || !changed {
			return err
		}
		return w.write(name)
	})
	if err != nil {
		return err
	}
	return filepath.WalkDir(baseRoot, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == baseRoot {
			return err
		}
		name := rel(baseRoot, p)
		if _, err := os.Lstat(filepath.Join(root, name)); !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := w.parents(name); err != nil {
			return err
		}
		wh := path.Join(path.Dir(name), ".wh."+path.Base(name))
		if err := tw.WriteHeader(&tar.Header{Name: wh, Typeflag: tar.TypeReg, Mode: 0o644, ModTime: layerTime, Format: tar.FormatPAX}); err != nil {
			return err
		}
		if d.IsDir() {
			return filepath.SkipDir
		}
		return nil
	})
}

func rel(root, p string) string {
	r, _ := filepath.Rel(root, p)
	return filepath.ToSlash(r)
}

// differs reports whether the entry at p differs from the one at base
// (absent included) in type, mode, owners, symlink target or content.
// A directory that became something else is refused: one layer cannot
// both remove it and put a file there.
func differs(base, p string) (bool, error) {
	bi, err := os.Lstat(base)
	if errors.Is(err, fs.ErrNotExist) {
		return true, nil
	}
	if err != nil {
		return false, err
	}
	pi, err := os.Lstat(p)
	if err != nil {
		return false, err
	}
	bs, ps := bi.Sys().(*syscall.Stat_t), pi.Sys().(*syscall.Stat_t)
	if bi.Mode().IsDir() && !pi.Mode().IsDir() {
		return false, fmt.Errorf("%s: a directory replaced by a %s is not supported", p, pi.Mode().Type())
	}
	if bi.Mode() != pi.Mode() || bs.Uid != ps.Uid || bs.Gid != ps.Gid {
		return true, nil
	}
	switch {
	case pi.Mode()&fs.ModeSymlink != 0:
		bt, err := os.Readlink(base)
		if err != nil {
			return false, err
		}
		pt, err := os.Readlink(p)
		return bt != pt, err
	case pi.Mode().IsRegular():
		if bi.Size() != pi.Size() {
			return true, nil
		}
		bc, err := os.ReadFile(base)
		if err != nil {
			return false, err
		}
		pc, err := os.ReadFile(p)
		return !bytes.Equal(bc, pc), err
	}
	return false, nil
}

// changeWriter writes the entries of root into a layer, each once, with
// its parents before it.
type changeWriter struct {
	tw      *tar.Writer
	root    string
	written map[string]bool
	// inodes maps a written regular file with several links to its name,
	// so that a later name is written as a hard link to it.
	inodes map[[2]uint64]string
}

// parents writes the parent directories of name not written yet.
func (w *changeWriter) parents(name string) error {
	var missing []string
	for d := path.Dir(name); d != "." && !w.written[d]; d = path.Dir(d) {
		missing = append(missing, d)
	}
	sort.Strings(missing)
	for _, d := range missing {
		if err := w.entry(d); err != nil {
			return err
		}
	}
	return nil
}

func (w *changeWriter) write(name string) error {
	if err := w.parents(name); err != nil {
		return err
	}
	return w.entry(name)
}

// entry writes root's entry at name: a directory, regular file (or hard
// link to one written before), symlink; other types are refused.
func (w *changeWriter) entry(name string) error {
	w.written[name] = true
	p := filepath.Join(w.root, name)
	fi, err := os.Lstat(p)
	if err != nil {
		return err
	}
	st := fi.Sys().(*syscall.Stat_t)
	hdr := &tar.Header{Name: name, Mode: ocilayout.TarMode(fi.Mode()), Uid: int(st.Uid), Gid: int(st.Gid), ModTime: layerTime, Format: tar.FormatPAX}
	switch mode := fi.Mode(); {
	case mode.IsDir():
		hdr.Typeflag, hdr.Name = tar.TypeDir, name+"/"
		return w.tw.WriteHeader(hdr)
	case mode&fs.ModeSymlink != 0:
		if hdr.Linkname, err = os.Readlink(p); err != nil {
			return err
		}
		hdr.Typeflag = tar.TypeSymlink
		return w.tw.WriteHeader(hdr)
	case !mode.IsRegular():
		return fmt.Errorf("%s: a %s cannot be packed", p, mode.Type())
	}
	key := [2]uint64{uint64(st.Dev), st.Ino}
	if first, ok := w.inodes[key]; ok {
		hdr.Typeflag, hdr.Linkname = tar.TypeLink, first
		return w.tw.WriteHeader(hdr)
	}
	if st.Nlink > 1 {
		w.inodes[key] = name
	}
	content, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	hdr.Typeflag, hdr.Size = tar.TypeReg, int64(len(content))
	if err := w.tw.WriteHeader(hdr); err != nil {
		return err
	}
	_, err = w.tw.Write(content)
	return err
}
