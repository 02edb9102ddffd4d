package build

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"hash"
	"hash/crc32"
	"io"
	"os"
	"path"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/klauspost/compress/flate"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/ocilayout"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
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

// newLayer describes the written layer for image.Append, with history.
func (lf *layerFile) newLayer(history string) image.NewLayer {
	return image.NewLayer{Path: lf.path, Digest: lf.digest, DiffID: lf.diffID, Size: lf.size, MediaType: lf.mediaType, History: history}
}

// tarEntry is one entry of the new layer, path relative to the root.
type tarEntry struct {
	name    string
	hdr     tar.Header
	content []byte
	// guard, when set, is the digest of content, the revert guard's
	// binary: writeLayer looks up its raw deflate encoding
	// (guard.Deflated) when it compresses the layer, and a gzip layer
	// splices it in (deflated) rather than compressing content again. A
	// warm build, which copies the layer from the cache, never reads it.
	guard    digest.Digest
	deflated []byte
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
		if e.Source == guard.Source && len(e.Content) >= minSplice {
			t.guard = e.Digest
		}
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
	if c.dir != "" && !c.empty() {
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
	var zw io.WriteCloser
	var mediaType string
	var ah *asyncHash
	if compression == "" || compression == Gzip {
		entries = withDeflated(entries)
	}
	if (compression == "" || compression == Gzip) && slices.ContainsFunc(entries, func(e tarEntry) bool { return e.deflated != nil }) {
		// The tar is hashed on a goroutine of its own, beside the
		// compression and the blob's digest: the guard's 12 MB binary,
		// spliced in, is otherwise only hashed, twice, on the build's
		// critical path.
		ah = newAsyncHash(tarHash)
		defer ah.wait()
		zw, mediaType, err = newSplicingGzip(counter, ah), mediaTypeGzip, nil
	} else {
		zw, mediaType, err = compressor(counter, compression)
		if err == nil {
			zw = hashedWriter{zw, tarHash}
		}
	}
	if err != nil {
		return nil, err
	}
	if err := writeTar(zw, entries); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	if ah != nil {
		ah.wait() // tarHash is whole
	}
	lf = &layerFile{
		path:      f.Name(),
		digest:    digest.NewDigest(digest.SHA256, blobHash),
		diffID:    digest.NewDigest(digest.SHA256, tarHash),
		size:      counter.N,
		mediaType: mediaType,
	}
	if c.dir != "" && (diffID == "" || lf.diffID == diffID) {
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

// writeTar writes the entries as a tar stream to w. When w is a
// splicingGzip, an entry's content that has its deflate encoding is
// spliced in, not compressed.
func writeTar(w io.Writer, entries []tarEntry) error {
	tw := tar.NewWriter(w)
	sg, _ := w.(*splicingGzip)
	for _, e := range entries {
		h := e.hdr
		if err := tw.WriteHeader(&h); err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
		if sg != nil && e.deflated != nil {
			// The header went through the compressor: the content's
			// encoding follows it, and the tar writer's copy of the
			// content is hashed, not compressed.
			if err := sg.splice(e.content, e.deflated); err != nil {
				return fmt.Errorf("writing %s: %w", e.name, err)
			}
		}
		if sg != nil {
			sg.content = true
		}
		_, err := tw.Write(e.content)
		if sg != nil {
			sg.spliced, sg.content = false, false
		}
		if err != nil {
			return fmt.Errorf("writing %s: %w", e.name, err)
		}
	}
	return tw.Close()
}

// withDeflated returns entries with the deflate encoding of the guard's
// binary that this mcbake embeds, if any.
func withDeflated(entries []tarEntry) []tarEntry {
	i := slices.IndexFunc(entries, func(e tarEntry) bool { return e.guard != "" })
	if i < 0 {
		return entries
	}
	d := guard.Deflated(entries[i].guard)
	if d == nil {
		return entries
	}
	entries = slices.Clone(entries)
	entries[i].deflated = d
	return entries
}

// minSplice is the smallest content worth splicing in: below it the
// guard's binary (a test's, say) is compressed with the rest.
const minSplice = 1 << 20

// hashedWriter writes to W and hashes what it writes with H.
type hashedWriter struct {
	io.WriteCloser
	h io.Writer
}

func (w hashedWriter) Write(p []byte) (int, error) {
	w.h.Write(p)
	return w.WriteCloser.Write(p)
}

// splicingGzip writes a gzip layer whose deflate stream takes an entry's
// content from its encoding made beforehand (guard.Deflate) instead of
// compressing it: the stream so far is ended by a sync flush (byte
// aligned, not final), the encoding follows (made by an encoder that saw
// nothing before it, so its back-references stay within it, and ended by
// a sync flush itself), and a fresh encoder, which cannot refer back into
// either, takes the rest. Any inflater reads it as one stream (RFC 1951:
// a sequence of blocks, the last one final); the gzip trailer's CRC-32
// and size cover all of the tar. The same entries and encodings always
// make the same bytes (docs/design.md, "The warm path").
type splicingGzip struct {
	out     io.Writer
	tarHash io.Writer
	fw      *flate.Writer
	crc     hash.Hash32
	size    uint32
	err     error
	// spliced is set while the tar writer hands over the content that
	// splice already wrote; content while it hands over any entry's
	// content.
	spliced, content bool
}

// gzipHeader is the header klauspost/compress/gzip writes at the default
// level: no name, no modification time, OS unknown.
var gzipHeader = []byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 255}

func newSplicingGzip(out, tarHash io.Writer) *splicingGzip {
	z := &splicingGzip{out: out, tarHash: tarHash, crc: crc32.NewIEEE()}
	_, z.err = out.Write(gzipHeader)
	if z.err == nil {
		z.fw, z.err = flate.NewWriter(out, guard.DeflateLevel)
	}
	return z
}

func (z *splicingGzip) Write(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	// An entry's content (archive/tar passes it through as writeTar
	// gave it) is unchanged for the rest of the build: an asyncHash may
	// keep it rather than a copy. Headers and padding are copied.
	if a, ok := z.tarHash.(*asyncHash); ok && z.content {
		a.writeShared(p)
	} else {
		z.tarHash.Write(p)
	}
	if z.spliced {
		return len(p), nil // the content spliced in is only hashed
	}
	z.crc.Write(p)
	z.size += uint32(len(p))
	return z.fw.Write(p)
}

// splice ends the stream so far, writes content's encoding deflated, and
// starts a fresh encoder for what follows. The content itself then comes
// through Write, and is only hashed.
func (z *splicingGzip) splice(content, deflated []byte) error {
	if z.err != nil {
		return z.err
	}
	if z.err = z.fw.Flush(); z.err != nil {
		return z.err
	}
	if _, z.err = z.out.Write(deflated); z.err != nil {
		return z.err
	}
	z.crc.Write(content)
	z.size += uint32(len(content))
	z.fw.Reset(z.out)
	z.spliced = true
	return nil
}

func (z *splicingGzip) Close() error {
	if z.err != nil {
		return z.err
	}
	if z.err = z.fw.Close(); z.err != nil {
		return z.err
	}
	var trailer [8]byte
	binary.LittleEndian.PutUint32(trailer[:4], z.crc.Sum32())
	binary.LittleEndian.PutUint32(trailer[4:], z.size)
	_, z.err = z.out.Write(trailer[:])
	return z.err
}

// asyncHash writes what it is given to h, in order, on a goroutine of its
// own. wait waits for it to be done with everything written so far and
// stops it; h may then be read.
type asyncHash struct {
	h    io.Writer
	ch   chan []byte
	done chan struct{}
	once sync.Once
}

func newAsyncHash(h io.Writer) *asyncHash {
	a := &asyncHash{h: h, ch: make(chan []byte, 64), done: make(chan struct{})}
	go func() {
		defer close(a.done)
		for b := range a.ch {
			a.h.Write(b)
		}
	}()
	return a
}

// Write hashes a copy of p.
func (a *asyncHash) Write(p []byte) (int, error) {
	a.ch <- bytes.Clone(p)
	return len(p), nil
}

// writeShared hashes p itself, which must not change until wait returns.
func (a *asyncHash) writeShared(p []byte) { a.ch <- p }

func (a *asyncHash) wait() {
	a.once.Do(func() { close(a.ch) })
	<-a.done
}
