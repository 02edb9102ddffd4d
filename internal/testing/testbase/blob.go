package testbase

import (
	"archive/tar"
	"bufio"
	_ "crypto/sha256" // registers sha256 for go-digest
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// epoch is every tar entry's mtime.
var epoch = time.Unix(0, 0).UTC()

// layerResult is a written layer blob and the digest of its tar.
type layerResult struct {
	desc   v1.Descriptor
	diffID digest.Digest
}

// writeLayers writes the layer blobs, several at a time; the blobs do not
// depend on the order they are written in.
func writeLayers(blobDir string, layers []plannedLayer, docker bool) ([]layerResult, error) {
	results := make([]layerResult, len(layers))
	errs := make([]error, len(layers))
	sem := make(chan struct{}, runtime.GOMAXPROCS(0))
	var wg sync.WaitGroup
	for i, l := range layers {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			results[i], errs[i] = writeLayer(blobDir, l, docker)
			if errs[i] != nil {
				errs[i] = fmt.Errorf("writing layer %d: %w", i, errs[i])
			}
		})
	}
	wg.Wait()
	return results, errors.Join(errs...)
}

func writeLayer(blobDir string, l plannedLayer, docker bool) (layerResult, error) {
	var r layerResult
	desc, err := writeBlob(blobDir, layerMediaType(l.compression, docker), func(w io.Writer) error {
		var err error
		r.diffID, err = writeCompressedTar(w, l)
		return err
	})
	r.desc = desc
	return r, err
}

func layerMediaType(compression string, docker bool) string {
	switch {
	case docker && compression == "none":
		return mediaTypeDockerLayer
	case docker:
		return mediaTypeDockerLayerGzip
	case compression == "none":
		return v1.MediaTypeImageLayer
	case compression == "zstd":
		return v1.MediaTypeImageLayerZstd
	default:
		return v1.MediaTypeImageLayerGzip
	}
}

// writeCompressedTar writes the layer's tar through its compressor and
// returns the digest of the uncompressed tar (the diff ID).
func writeCompressedTar(w io.Writer, l plannedLayer) (d digest.Digest, err error) {
	cw, err := compressor(w, l.compression)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, cw.Close()) }()
	diff := digest.SHA256.Digester()
	tw := tar.NewWriter(io.MultiWriter(cw, diff.Hash()))
	for _, e := range l.entries {
		if err := writeEntry(tw, e); err != nil {
			return "", fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	return diff.Digest(), nil
}

// compressor returns a deterministic compressing writer: gzip with an empty
// header (no name, mtime 0), or single-threaded zstd.
func compressor(w io.Writer, compression string) (io.WriteCloser, error) {
	switch compression {
	case "gzip":
		return gzip.NewWriterLevel(w, gzip.DefaultCompression)
	case "zstd":
		return zstd.NewWriter(w, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedDefault))
	case "none":
		return nopCloser{w}, nil
	default:
		return nil, fmt.Errorf("unknown compression %q", compression)
	}
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func writeEntry(tw *tar.Writer, e entry) error {
	if err := tw.WriteHeader(header(e)); err != nil {
		return err
	}
	if e.bulk != nil {
		return e.bulk.writeTo(tw)
	}
	if e.typ != tar.TypeReg {
		return nil
	}
	_, err := tw.Write(e.content)
	return err
}

// header is the tar header of an entry: numeric owners only, no user or
// group names, mtime 0, PAX format (plain ustar unless a field needs more).
func header(e entry) *tar.Header {
	h := &tar.Header{
		Typeflag: e.typ,
		Name:     e.name,
		Linkname: e.target,
		Size:     e.size(),
		Mode:     e.mode,
		Uid:      e.uid,
		Gid:      e.gid,
		ModTime:  epoch,
		Format:   tar.FormatPAX,
	}
	if e.typ == tar.TypeDir {
		h.Name += "/"
	}
	return h
}

// writeBlob stores what fill writes as a blob named by its sha256 digest.
// The blob appears under its name only once complete.
func writeBlob(blobDir, mediaType string, fill func(io.Writer) error) (desc v1.Descriptor, err error) {
	f, err := os.CreateTemp(blobDir, ".tmp-blob-")
	if err != nil {
		return desc, err
	}
	defer func() {
		if err != nil {
			_ = os.Remove(f.Name()) // best effort: the error being returned matters more
		}
	}()
	d, n, err := fillFile(f, fill)
	if err != nil {
		return desc, err
	}
	if err := os.Rename(f.Name(), filepath.Join(blobDir, d.Encoded())); err != nil {
		return desc, err
	}
	return v1.Descriptor{MediaType: mediaType, Digest: d, Size: n}, nil
}

func fillFile(f *os.File, fill func(io.Writer) error) (d digest.Digest, n int64, err error) {
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := f.Chmod(0o644); err != nil {
		return "", 0, err
	}
	bw := bufio.NewWriterSize(f, 1<<20)
	digester := digest.SHA256.Digester()
	cw := &countingWriter{}
	if err := fill(io.MultiWriter(bw, digester.Hash(), cw)); err != nil {
		return "", 0, err
	}
	if err := bw.Flush(); err != nil {
		return "", 0, err
	}
	return digester.Digest(), cw.n, nil
}

type countingWriter struct{ n int64 }

func (c *countingWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return len(p), nil
}

// writeJSONBlob stores v, marshalled compactly, as a blob.
func writeJSONBlob(blobDir, mediaType string, v any) (v1.Descriptor, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return v1.Descriptor{}, err
	}
	return writeBlob(blobDir, mediaType, func(w io.Writer) error {
		_, err := w.Write(b)
		return err
	})
}
