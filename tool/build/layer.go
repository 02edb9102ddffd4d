package build

import (
	"archive/tar"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/ocilayout"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// Compression algorithms for the new layer.
const (
	Gzip = "gzip"
	Zstd = "zstd"
)

// Media types of the new layer.
const (
	mediaTypeGzip = "application/vnd.oci.image.layer.v1.tar+gzip"
	mediaTypeZstd = "application/vnd.oci.image.layer.v1.tar+zstd"
)

// layerFile is a written, compressed layer blob.
type layerFile struct {
	path      string
	digest    digest.Digest // of the compressed blob
	diffID    digest.Digest // of the tar
	size      int64
	mediaType string
}

// tarEntry is one entry of the new layer, path relative to the root.
type tarEntry struct {
	name    string
	hdr     tar.Header
	content []byte
}

// layerEntries turns rendered entries (at their resolved paths) and extra
// files into sorted tar entries; absent entries become whiteouts.
func layerEntries(entries []render.Entry, extra []render.Entry, mtime time.Time) []tarEntry {
	var out []tarEntry
	for _, e := range append(append([]render.Entry(nil), entries...), extra...) {
		out = append(out, toTar(e, mtime))
	}
	// Sorted by name, hard links last: a hard link must follow its target.
	sort.SliceStable(out, func(i, j int) bool {
		hi, hj := out[i].hdr.Typeflag == tar.TypeLink, out[j].hdr.Typeflag == tar.TypeLink
		if hi != hj {
			return hj
		}
		return out[i].name < out[j].name
	})
	return out
}

func toTar(e render.Entry, mtime time.Time) tarEntry {
	name := strings.TrimPrefix(e.Where(), "/")
	h := tar.Header{Name: name, Mode: int64(e.Mode), Uid: e.UID, Gid: e.GID, ModTime: mtime}
	t := tarEntry{name: name}
	switch e.Type {
	case manifest.File:
		h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Content))
		t.content = e.Content
	case manifest.Directory:
		h.Typeflag, h.Name = tar.TypeDir, name+"/"
	case manifest.Symlink:
		h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
	case manifest.Hardlink:
		h.Typeflag, h.Linkname = tar.TypeLink, strings.TrimPrefix(e.Target, "/")
	case manifest.Absent:
		h = tar.Header{Typeflag: tar.TypeReg, Name: path.Join(path.Dir(name), ".wh."+path.Base(name)), ModTime: mtime}
		t.name = h.Name
	}
	t.hdr = h
	return t
}

// writeLayer writes the tar, compressed, to a temporary file in dir and
// returns its digests. The caller removes the file. With a cacheDir, a
// layer compressed before is copied from the cache instead of being
// compressed again (builtCache).
func writeLayer(dir, cacheDir string, entries []tarEntry, compression string) (lf *layerFile, err error) {
	c, err := newBuiltCache(cacheDir, compression)
	if err != nil {
		return nil, err
	}
	var diffID digest.Digest
	if c.dir != "" {
		tarHash := sha256.New()
		counter := &ocilayout.CountWriter{W: tarHash}
		if err := writeTar(counter, entries); err != nil {
			return nil, err
		}
		diffID = digest.NewDigest(digest.SHA256, tarHash)
		if lf, ok := c.lookup(dir, diffID, counter.N); ok {
			return lf, nil
		}
	}
	f, err := os.CreateTemp(dir, "layer-*.blob")
	if err != nil {
		return nil, err
	}
	defer func() {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			os.Remove(f.Name())
		}
	}()
	blobHash, tarHash := sha256.New(), sha256.New()
	counter := &ocilayout.CountWriter{W: io.MultiWriter(f, blobHash)}
	zw, mediaType, err := compressor(counter, compression)
	if err != nil {
		return nil, err
	}
	if err := writeTar(io.MultiWriter(zw, tarHash), entries); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	lf = &layerFile{
		path:      f.Name(),
		digest:    digest.NewDigest(digest.SHA256, blobHash),
		diffID:    digest.NewDigest(digest.SHA256, tarHash),
		size:      counter.N,
		mediaType: mediaType,
	}
	if c.dir != "" && lf.diffID == diffID {
		c.store(lf)
	}
	return lf, nil
}

func compressor(w io.Writer, compression string) (io.WriteCloser, string, error) {
	switch compression {
	case "", Gzip:
		zw, err := gzip.NewWriterLevel(w, gzip.DefaultCompression)
		return zw, mediaTypeGzip, err
	case Zstd:
		zw, err := zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
		return zw, mediaTypeZstd, err
	}
	return nil, "", fmt.Errorf("compression %q: want gzip or zstd", compression)
}

func writeTar(w io.Writer, entries []tarEntry) error {
	tw := tar.NewWriter(w)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
		if _, err := tw.Write(e.content); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	return tw.Close()
}
