// Package ocilayout writes the OCI layout pieces test harnesses make by hand.
//
// Those are gzip layer blobs with their diff IDs, JSON blobs, and the JSON
// files of a layout (internal/testing/ostreevm packs a booted system's
// tree, internal/testing/ignitiontest appends the layer of what
// ignition-apply changed, internal/testing/ostreetest re-encodes layers for
// ostree). It uses the standard library only, so that those harnesses stay
// free of the image libraries mcbake's own image code uses: the layouts
// they write are independent inputs for that code.
package ocilayout

import (
	"archive/tar"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// OCI media types and the tag annotation.
const (
	MediaTypeManifest  = "application/vnd.oci.image.manifest.v1+json"
	MediaTypeIndex     = "application/vnd.oci.image.index.v1+json"
	MediaTypeConfig    = "application/vnd.oci.image.config.v1+json"
	MediaTypeLayerGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
	AnnotationRefName  = "org.opencontainers.image.ref.name"
)

// Descriptor is an OCI content descriptor.
type Descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// WriteLayer writes the gzip tar that fill produces, compressed at level,
// as a blob into the directory blobs (a layout's blobs/sha256), and
// returns its descriptor and diff ID (the digest of the uncompressed
// tar).
func WriteLayer(blobs string, level int, fill func(*tar.Writer) error) (Descriptor, string, error) {
	f, err := os.CreateTemp(blobs, ".layer-")
	if err != nil {
		return Descriptor{}, "", err
	}
	defer os.Remove(f.Name()) // after the rename, a no-op
	compressed, uncompressed := sha256.New(), sha256.New()
	counted := &CountWriter{W: io.MultiWriter(f, compressed)}
	zw, err := gzip.NewWriterLevel(counted, level)
	if err != nil {
		f.Close()
		return Descriptor{}, "", err
	}
	tw := tar.NewWriter(io.MultiWriter(zw, uncompressed))
	err = fill(tw)
	for _, c := range []io.Closer{tw, zw, f} {
		if cerr := c.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return Descriptor{}, "", err
	}
	d := hexSum(compressed)
	if err := os.Rename(f.Name(), filepath.Join(blobs, d)); err != nil {
		return Descriptor{}, "", err
	}
	return Descriptor{MediaType: MediaTypeLayerGzip, Digest: "sha256:" + d, Size: counted.N}, "sha256:" + hexSum(uncompressed), nil
}

func hexSum(h hash.Hash) string { return hex.EncodeToString(h.Sum(nil)) }

// WriteJSONBlob writes v as a JSON blob into the directory blobs and
// returns its descriptor.
func WriteJSONBlob(blobs, mediaType string, v any) (Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return Descriptor{}, err
	}
	sum := sha256.Sum256(b)
	d := hex.EncodeToString(sum[:])
	if err := os.WriteFile(filepath.Join(blobs, d), b, 0o644); err != nil {
		return Descriptor{}, err
	}
	return Descriptor{MediaType: mediaType, Digest: "sha256:" + d, Size: int64(len(b))}, nil
}

// BlobPath is where the blob of digest d ("algorithm:hex") lies in the
// layout.
func BlobPath(layout, d string) string {
	algo, hex, _ := strings.Cut(d, ":")
	return filepath.Join(layout, "blobs", algo, hex)
}

// ReadJSON decodes the JSON file p into v; a decoding error names p.
func ReadJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", p, err)
	}
	return nil
}

// WriteJSON writes v as JSON to the file p.
func WriteJSON(p string, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return os.WriteFile(p, b, 0o644)
}

// TarMode is the tar header mode of an fs.FileMode: permission bits plus
// setuid, setgid and sticky.
func TarMode(m fs.FileMode) int64 {
	v := int64(m.Perm())
	if m&fs.ModeSetuid != 0 {
		v |= 0o4000
	}
	if m&fs.ModeSetgid != 0 {
		v |= 0o2000
	}
	if m&fs.ModeSticky != 0 {
		v |= 0o1000
	}
	return v
}

// CountWriter counts the bytes written through it to W.
type CountWriter struct {
	W io.Writer
	N int64
}

func (c *CountWriter) Write(p []byte) (int, error) {
	n, err := c.W.Write(p)
	c.N += int64(n)
	return n, err
}

// LinkBlob hard-links blob d ("algorithm:hex") of layout from into layout
// to, or copies it when they are on different filesystems.
func LinkBlob(from, to, d string) (err error) {
	src, dst := BlobPath(from, d), BlobPath(to, d)
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	if os.Link(src, dst) == nil {
		return nil
	}
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	return err
}
