package ostreetest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/mcbake/mcbake/internal/ocilayout"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Unpack unpacks the image tagged tag in the OCI image layout layoutDir
// into dir (which must not exist) with `umoci raw unpack`: whiteouts and
// opaque directories applied as a container runtime does, owners numeric
// and real (Unpack skips the test unless root). umoci is installed with
// apt-get when missing.
//
// Debian's umoci (0.4.7) cannot read zstd layers: when the image has any,
// Unpack unpacks a copy of the layout, made in t.TempDir(), whose zstd
// layers are re-encoded as gzip (same uncompressed content, so the same
// diff IDs); layoutDir is never modified. The tag must name an image
// manifest, not an image index.
func Unpack(t testing.TB, layoutDir, tag, dir string) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("ostreetest: Unpack needs root to keep the image's file owners")
	}
	if err := ensureTool("umoci", "umoci"); err != nil {
		t.Skip("ostreetest: " + err.Error())
	}
	layout, err := gzipLayout(layoutDir, tag, t.TempDir())
	if err != nil {
		t.Fatalf("ostreetest.Unpack: %v", err)
	}
	if _, err := run(nil, "umoci", "raw", "unpack", "--image", layout+":"+tag, dir); err != nil {
		t.Fatalf("ostreetest.Unpack: %v", err)
	}
}

// gzipLayout returns layoutDir when the image tagged tag has no zstd
// layer; otherwise it writes into scratch a layout holding only that image,
// with its zstd layers re-encoded as gzip, and returns scratch.
func gzipLayout(layoutDir, tag, scratch string) (string, error) {
	desc, err := findTag(layoutDir, tag)
	if err != nil {
		return "", err
	}
	var m v1.Manifest
	if err := ocilayout.ReadJSON(ocilayout.BlobPath(layoutDir, desc.Digest.String()), &m); err != nil {
		return "", fmt.Errorf("reading manifest: %w", err)
	}
	if !hasZstd(m) {
		return layoutDir, nil
	}
	if err := ocilayout.LinkBlob(layoutDir, scratch, m.Config.Digest.String()); err != nil {
		return "", fmt.Errorf("copying config: %w", err)
	}
	for i, l := range m.Layers {
		if m.Layers[i], err = copyLayer(layoutDir, scratch, l); err != nil {
			return "", fmt.Errorf("layer %d: %w", i, err)
		}
	}
	return scratch, writeLayout(scratch, tag, m)
}

// findTag returns the index.json entry annotated with tag, which must be
// an image manifest.
func findTag(layoutDir, tag string) (v1.Descriptor, error) {
	var idx v1.Index
	if err := ocilayout.ReadJSON(filepath.Join(layoutDir, "index.json"), &idx); err != nil {
		return v1.Descriptor{}, err
	}
	for _, d := range idx.Manifests {
		if d.Annotations[v1.AnnotationRefName] != tag {
			continue
		}
		if d.MediaType != v1.MediaTypeImageManifest {
			return v1.Descriptor{}, fmt.Errorf("tag %q is a %s, want an image manifest", tag, d.MediaType)
		}
		return d, nil
	}
	return v1.Descriptor{}, fmt.Errorf("no image tagged %q in %s", tag, layoutDir)
}

func hasZstd(m v1.Manifest) bool {
	for _, l := range m.Layers {
		if l.MediaType == v1.MediaTypeImageLayerZstd {
			return true
		}
	}
	return false
}

// copyLayer copies layer l into the scratch layout, re-encoding it as gzip
// when it is zstd, and returns its descriptor there.
func copyLayer(layoutDir, scratch string, l v1.Descriptor) (v1.Descriptor, error) {
	if l.MediaType != v1.MediaTypeImageLayerZstd {
		return l, ocilayout.LinkBlob(layoutDir, scratch, l.Digest.String())
	}
	d, size, err := regzip(ocilayout.BlobPath(layoutDir, l.Digest.String()), scratch)
	if err != nil {
		return v1.Descriptor{}, err
	}
	l.MediaType, l.Digest, l.Size = v1.MediaTypeImageLayerGzip, d, size
	return l, nil
}

// regzip decompresses the zstd blob src and writes it gzip-compressed as a
// blob of the scratch layout.
func regzip(src, scratch string) (d digest.Digest, size int64, err error) {
	in, err := os.Open(src)
	if err != nil {
		return "", 0, err
	}
	defer func() { err = errors.Join(err, in.Close()) }()
	zr, err := zstd.NewReader(in)
	if err != nil {
		return "", 0, err
	}
	defer zr.Close()
	return writeBlob(scratch, func(w io.Writer) error {
		gw := gzip.NewWriter(w)
		if _, err := io.Copy(gw, zr); err != nil {
			return err
		}
		return gw.Close()
	})
}

// writeBlob writes what fill produces as a blob of layout, named by its
// digest, and returns the digest and size.
func writeBlob(layout string, fill func(io.Writer) error) (d digest.Digest, size int64, err error) {
	dir := filepath.Join(layout, "blobs", "sha256")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", 0, err
	}
	f, err := os.CreateTemp(dir, ".tmp-")
	if err != nil {
		return "", 0, err
	}
	dg := digest.Canonical.Digester()
	cw := &ocilayout.CountWriter{W: io.MultiWriter(f, dg.Hash())}
	err = fill(cw)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return "", 0, errors.Join(err, os.Remove(f.Name()))
	}
	d = dg.Digest()
	return d, cw.N, os.Rename(f.Name(), ocilayout.BlobPath(layout, d.String()))
}

// writeLayout writes manifest m, index.json (tagging m) and oci-layout.
func writeLayout(layout, tag string, m v1.Manifest) error {
	b, err := json.Marshal(m)
	if err != nil {
		return err
	}
	d, size, err := writeBlob(layout, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
	if err != nil {
		return fmt.Errorf("writing manifest: %w", err)
	}
	idx := v1.Index{
		Versioned: m.Versioned,
		MediaType: v1.MediaTypeImageIndex,
		Manifests: []v1.Descriptor{{
			MediaType:   v1.MediaTypeImageManifest,
			Digest:      d,
			Size:        size,
			Annotations: map[string]string{v1.AnnotationRefName: tag},
		}},
	}
	if err := ocilayout.WriteJSON(filepath.Join(layout, "index.json"), idx); err != nil {
		return err
	}
	return ocilayout.WriteJSON(filepath.Join(layout, v1.ImageLayoutFile), v1.ImageLayout{Version: v1.ImageLayoutVersion})
}
