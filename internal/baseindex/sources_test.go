package baseindex_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/containerd/stargz-snapshotter/estargz"
	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"
	"github.com/vbatts/tar-split/tar/asm"
	"github.com/vbatts/tar-split/tar/storage"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/manifest"
)

// form is one way a layer is stored, and so read: its blob, its
// tar-split and unpacked files (containers-storage), or its table of
// contents (zstd:chunked, eStargz).
type form struct {
	name string
	// layers makes the layers of a base; nil and false when the form
	// cannot hold them.
	layers func(tb testing.TB, layers [][]ent) ([]*testLayer, bool)
	// rewrites is set for a form whose writer rewrites the tar stream
	// (eStargz): its blob is then the reference, not the entries.
	rewrites bool
}

var forms = []form{
	{name: "blob", layers: func(tb testing.TB, ls [][]ent) ([]*testLayer, bool) { return gzLayers(tb, ls...), true }},
	{name: "tar-split", layers: tarSplitLayers},
	{name: "zstd:chunked", layers: eachLayer(zstdChunkedLayer)},
	{name: "estargz", layers: eachLayer(estargzLayer), rewrites: true},
}

func eachLayer(f func(tb testing.TB, entries []ent) (*testLayer, bool)) func(testing.TB, [][]ent) ([]*testLayer, bool) {
	return func(tb testing.TB, ls [][]ent) ([]*testLayer, bool) {
		out := make([]*testLayer, len(ls))
		for i, entries := range ls {
			var ok bool
			if out[i], ok = f(tb, entries); !ok {
				return nil, false
			}
		}
		return out, true
	}
}

// tarSplitLayers makes layers as containers-storage keeps them: the
// uncompressed blob, its tar-split, and its files unpacked, a hard link
// to a lower layer's file holding that file's content (as a successful
// apply leaves it).
func tarSplitLayers(tb testing.TB, ls [][]ent) ([]*testLayer, bool) {
	tb.Helper()
	lower := map[string][]byte{}
	out := make([]*testLayer, len(ls))
	for i, entries := range ls {
		raw := tarBytes(tb, entries...)
		l := newLayer(raw, mediaTypes[plain])
		split, ok := tarSplitOf(tb, raw)
		if !ok {
			return nil, false
		}
		files := unpackLayer(tb, raw, lower)
		l.Unpacked = &baseindex.Unpacked{
			TarSplit: func(context.Context) (io.ReadCloser, error) {
				l.metaReads.Add(1)
				return io.NopCloser(bytes.NewReader(split)), nil
			},
			Open: func(p string) (io.ReadCloser, error) {
				l.fileReads.Add(1)
				b, ok := files[p]
				if !ok {
					return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
				}
				return io.NopCloser(bytes.NewReader(b)), nil
			},
		}
		out[i] = l
	}
	return out, true
}

// tarSplitOf returns the gzip-compressed tar-split of a tar stream, or
// false if tar-split cannot hold it.
func tarSplitOf(tb testing.TB, raw []byte) ([]byte, bool) {
	tb.Helper()
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	r, err := asm.NewInputTarStream(bytes.NewReader(raw), storage.NewJSONPacker(zw), storage.NewDiscardFilePutter())
	if err != nil {
		tb.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, r); err != nil {
		return nil, false // tar-split refuses a path listed twice
	}
	if err := zw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes(), true
}

// unpackLayer returns the regular files a layer unpacks, by clean path,
// and adds them to lower.
func unpackLayer(tb testing.TB, raw []byte, lower map[string][]byte) map[string][]byte {
	tb.Helper()
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		p := strings.TrimPrefix(path.Clean("/"+hdr.Name), "/")
		switch hdr.Typeflag {
		case tar.TypeReg:
			b, err := io.ReadAll(tr)
			if err != nil {
				tb.Fatal(err)
			}
			files[p] = b
		case tar.TypeLink:
			target := strings.TrimPrefix(path.Clean("/"+hdr.Linkname), "/")
			if b, ok := files[target]; ok {
				files[p] = b
			} else if b, ok := lower[target]; ok {
				files[p] = b
			}
		}
	}
	for p, b := range files {
		lower[p] = b
	}
	return files
}

// zstdChunkedLayer writes entries as containers/storage's zstd:chunked
// compressor does: each header (with the padding before it) in a zstd
// frame and each file's content in its own, then the TOC in a skippable
// frame and the footer; it returns the layer with its annotations.
func zstdChunkedLayer(tb testing.TB, entries []ent) (*testLayer, bool) {
	tb.Helper()
	raw := tarBytes(tb, entries...)
	var blob bytes.Buffer
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		tb.Fatal(err)
	}
	frame := func(b []byte) (int64, int64) {
		start := int64(blob.Len())
		blob.Write(enc.EncodeAll(b, nil))
		return start, int64(blob.Len())
	}
	type tocEntry struct {
		Type      string `json:"type"`
		Name      string `json:"name"`
		Linkname  string `json:"linkName,omitempty"`
		Mode      int64  `json:"mode,omitempty"`
		Size      int64  `json:"size,omitempty"`
		UID       int    `json:"uid,omitempty"`
		GID       int    `json:"gid,omitempty"`
		Digest    string `json:"digest,omitempty"`
		Offset    int64  `json:"offset,omitempty"`
		EndOffset int64  `json:"endOffset,omitempty"`
	}
	types := map[byte]string{tar.TypeReg: "reg", tar.TypeDir: "dir", tar.TypeSymlink: "symlink", tar.TypeLink: "hardlink",
		tar.TypeChar: "char", tar.TypeBlock: "block", tar.TypeFifo: "fifo"}
	var toc []tocEntry
	cr := &countingReader{r: bytes.NewReader(raw)}
	tr := tar.NewReader(cr)
	segStart := int64(0)
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		frame(raw[segStart:cr.n])
		segStart = cr.n
		e := tocEntry{Type: types[hdr.Typeflag], Name: hdr.Name, Linkname: hdr.Linkname, Mode: hdr.Mode, Size: hdr.Size, UID: hdr.Uid, GID: hdr.Gid}
		if hdr.Typeflag == tar.TypeReg && hdr.Size > 0 {
			content, err := io.ReadAll(tr)
			if err != nil {
				tb.Fatal(err)
			}
			e.Offset, e.EndOffset = frame(content)
			segStart += hdr.Size
			e.Digest = sha(string(content))
		}
		toc = append(toc, e)
	}
	frame(raw[segStart:])
	js, err := json.Marshal(map[string]any{"version": 1, "entries": toc})
	if err != nil {
		tb.Fatal(err)
	}
	compressed := enc.EncodeAll(js, nil)
	skippable := func(b []byte) {
		var h [8]byte
		copy(h[:], []byte{0x50, 0x2a, 0x4d, 0x18})
		binary.LittleEndian.PutUint32(h[4:], uint32(len(b)))
		blob.Write(h[:])
		blob.Write(b)
	}
	tocOffset := int64(blob.Len()) + 8
	skippable(compressed)
	footer := make([]byte, 64)
	binary.LittleEndian.PutUint64(footer[0:], uint64(tocOffset))
	binary.LittleEndian.PutUint64(footer[8:], uint64(len(compressed)))
	binary.LittleEndian.PutUint64(footer[16:], uint64(len(js)))
	binary.LittleEndian.PutUint64(footer[24:], 1)
	copy(footer[56:], []byte{0x47, 0x4e, 0x55, 0x6c, 0x49, 0x6e, 0x55, 0x78})
	skippable(footer)
	annotations := map[string]string{
		"io.github.containers.zstd-chunked.manifest-checksum": digest.FromBytes(compressed).String(),
		"io.github.containers.zstd-chunked.manifest-position": fmt.Sprintf("%d:%d:%d:1", tocOffset, len(compressed), len(js)),
	}
	return tocLayer(blob.Bytes(), mediaTypes[zstded], annotations), true
}

type countingReader struct {
	r io.Reader
	n int64
}

func (c *countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// estargzLayer converts entries to eStargz with stargz-snapshotter's own
// writer, small chunks so that files span several; false when it refuses
// them or would drop some (it keeps one entry per path).
func estargzLayer(tb testing.TB, entries []ent) (*testLayer, bool) {
	tb.Helper()
	if dupLayers([][]ent{entries}) > 0 {
		return nil, false
	}
	raw := tarBytes(tb, entries...)
	chunk := 16
	if len(raw) > 16<<10 {
		chunk = 32 << 10
	}
	b, err := estargz.Build(io.NewSectionReader(bytes.NewReader(raw), 0, int64(len(raw))), estargz.WithChunkSize(chunk))
	if err != nil {
		return nil, false
	}
	defer func() {
		if err := b.Close(); err != nil {
			tb.Error(err)
		}
	}()
	blob, err := io.ReadAll(b)
	if err != nil {
		tb.Fatal(err)
	}
	return tocLayer(blob, mediaTypes[gzipped], map[string]string{"containerd.io/snapshot/stargz/toc.digest": b.TOCDigest().String()}), true
}

// tocLayer is a layer whose TOC reads ranges of blob.
func tocLayer(blob []byte, mediaType string, annotations map[string]string) *testLayer {
	l := newLayer(blob, mediaType)
	l.TOC = &baseindex.TOC{
		Annotations: annotations,
		ReadRanges: func(_ context.Context, rs []baseindex.Range) ([][]byte, error) {
			l.metaReads.Add(1)
			out := make([][]byte, len(rs))
			for i, r := range rs {
				if r.Offset < 0 || r.Length < 0 || r.Offset+r.Length > int64(len(l.blob)) {
					return nil, errors.New("range outside the blob")
				}
				out[i] = l.blob[r.Offset : r.Offset+r.Length]
			}
			return out, nil
		},
	}
	return l
}

// dupLayers counts the layers that list a path twice.
func dupLayers(layers [][]ent) int {
	n := 0
	for _, l := range layers {
		seen := map[string]bool{}
		for _, e := range l {
			p := path.Clean("/" + e.name)
			if seen[p] {
				n++
				break
			}
			seen[p] = true
		}
	}
	return n
}

// scanOnly returns the layers with metadata that cannot be read: what
// Build makes of their blobs.
func scanOnly(layers []*testLayer) []baseindex.Layer {
	out := descriptors(layers)
	for i := range out {
		if out[i].TOC != nil {
			out[i].TOC = &baseindex.TOC{Annotations: out[i].TOC.Annotations, ReadRanges: noRanges}
		}
		out[i].Unpacked = nil
	}
	return out
}

func noRanges(context.Context, []baseindex.Range) ([][]byte, error) {
	return nil, baseindex.ErrNoRanges
}

// TestSources: every merge rule holds whichever way the layers are read,
// and a layer whose metadata serves is not opened.
func TestSources(t *testing.T) {
	for _, f := range forms[1:] {
		for _, tt := range buildCases {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				layers, ok := f.layers(t, tt.layers)
				if !ok {
					t.Skipf("%s cannot hold these layers", f.name)
				}
				var fallbacks atomic.Int32
				opts := baseindex.Options{CacheDir: t.TempDir(), Fallback: func(d digest.Digest, err error) {
					fallbacks.Add(1)
					t.Logf("layer %s fell back: %v", d, err)
				}}
				ix, err := baseindex.Build(context.Background(), descriptors(layers), opts)
				if tt.wantErr != "" {
					if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
						t.Fatalf("Build() error = %v, want one containing %q", err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("Build() error = %v", err)
				}
				// A TOC listing a path twice is not used (eStargz's
				// writer keeps only one).
				dups := func(ls [][]ent) int32 {
					if f.rewrites {
						return 0
					}
					return int32(dupLayers(ls))
				}
				if n, want := fallbacks.Load(), dups(tt.layers); n != want {
					t.Errorf("%d layers fell back to a scan, want %d", n, want)
				}
				for i, l := range layers {
					if n, want := l.opens.Load(), dups(tt.layers[i:i+1]); n != want {
						t.Errorf("layer %d opened %d times, want %d", i, n, want)
					}
				}
				want := tt.want
				if f.rewrites {
					scanned, err := baseindex.Build(context.Background(), scanOnly(layers), baseindex.Options{})
					if err != nil {
						t.Fatalf("Build() of the blobs: %v", err)
					}
					want = listing(t, scanned, bodies(tt.layers))
				}
				if diff := cmp.Diff(want, listing(t, ix, bodies(tt.layers))); diff != "" {
					t.Errorf("Build() index mismatch (-want +got):\n%s", diff)
				}
				warm, err := baseindex.Build(context.Background(), descriptors(layers), opts)
				if err != nil {
					t.Fatalf("warm Build() error = %v", err)
				}
				if diff := cmp.Diff(want, listing(t, warm, bodies(tt.layers))); diff != "" {
					t.Errorf("warm Build() index mismatch (-want +got):\n%s", diff)
				}
			})
		}
	}
}

// metaLayers are layers with kept contents, a hardlink at a kept path and
// whiteouts, for the verification tests.
var metaLayers = [][]ent{
	{
		file("etc/passwd", "root:x:0:0::/root:/bin/bash\n"),
		file("sysroot/ostree/repo/objects/aa.file", "[Unit]\nDescription=a\n"),
		hardlink("usr/lib/systemd/system/a.service", "sysroot/ostree/repo/objects/aa.file"),
		file("usr/bin/x", "x"),
		file("usr/bin/y", "y"),
	},
	{whiteout("usr/bin/.wh.x"), file("etc/group", "root:x:0:\n")},
}

// TestTOCVerification: a TOC that does not match its annotation is an
// error; a missing, unreadable or unusable one makes Build scan the blob,
// which catches a blob whose content does not match its TOC.
func TestTOCVerification(t *testing.T) {
	tests := []struct {
		name string
		// change alters the top layer; it may replace the blob.
		change       func(l *testLayer)
		wantErr      error
		wantFallback bool // Options.Fallback is told
		wantScan     bool // the blob is read
	}{
		{name: "intact"},
		{name: "no annotation", change: func(l *testLayer) { l.TOC.Annotations = map[string]string{} }, wantScan: true},
		{name: "annotation digest of another TOC", change: func(l *testLayer) {
			for k := range l.TOC.Annotations {
				if strings.HasSuffix(k, "checksum") || strings.HasSuffix(k, "toc.digest") {
					l.TOC.Annotations[k] = sha("another toc")
				}
			}
		}, wantErr: baseindex.ErrTOCDigest},
		{name: "annotation that is not a digest", change: func(l *testLayer) {
			for k := range l.TOC.Annotations {
				if strings.HasSuffix(k, "checksum") || strings.HasSuffix(k, "toc.digest") {
					l.TOC.Annotations[k] = "md5:1234"
				}
			}
		}, wantFallback: true, wantScan: true},
		{name: "no range reads", change: func(l *testLayer) { l.TOC.ReadRanges = noRanges }, wantFallback: true, wantScan: true},
		{name: "content does not match the TOC", change: func(l *testLayer) {
			// Flip a byte of etc/group's compressed data: the TOC still
			// matches, the content does not, and the scan finds the blob
			// does not match its digest either.
			l.blob = bytes.Clone(l.blob)
			l.blob[dataOffset(t, l, "etc/group")+12] ^= 0xff
		}, wantErr: baseindex.ErrDigestMismatch, wantFallback: true, wantScan: true},
	}
	for _, f := range forms[2:] {
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				layers, _ := f.layers(t, metaLayers)
				if tt.change != nil {
					tt.change(layers[1])
				}
				var fellBack atomic.Bool
				opts := baseindex.Options{Fallback: func(digest.Digest, error) { fellBack.Store(true) }}
				ix, err := baseindex.Build(context.Background(), descriptors(layers), opts)
				if tt.wantErr != nil {
					if !errors.Is(err, tt.wantErr) {
						t.Fatalf("Build() error = %v, want %v", err, tt.wantErr)
					}
				} else if err != nil {
					t.Fatalf("Build() error = %v", err)
				} else if got, _ := ix.Content("etc/group"); string(got) != "root:x:0:\n" {
					t.Errorf("Content(etc/group) = %q", got)
				}
				if fellBack.Load() != tt.wantFallback {
					t.Errorf("fell back = %v, want %v", fellBack.Load(), tt.wantFallback)
				}
				if opened := layers[1].opens.Load() > 0; opened != tt.wantScan {
					t.Errorf("blob opened = %v, want %v", opened, tt.wantScan)
				}
			})
		}
	}
}

// dataOffset returns where the compressed data of the file at p starts
// in a TOC layer's blob.
func dataOffset(t *testing.T, l *testLayer, p string) int64 {
	t.Helper()
	if _, ok := l.TOC.Annotations["containerd.io/snapshot/stargz/toc.digest"]; ok {
		r, err := estargz.Open(io.NewSectionReader(bytes.NewReader(l.blob), 0, int64(len(l.blob))))
		if err != nil {
			t.Fatal(err)
		}
		e, ok := r.Lookup(p)
		if !ok {
			t.Fatalf("%s not in the eStargz TOC", p)
		}
		return e.Offset
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1))
	if err != nil {
		t.Fatal(err)
	}
	b := ents(metaLayers).content(p)
	i := bytes.Index(l.blob, enc.EncodeAll([]byte(b), nil))
	if i < 0 {
		t.Fatalf("%s's data not found in the blob", p)
	}
	return int64(i)
}

// ents are the entries of layers, for finding one.
type ents [][]ent

func (ls ents) content(p string) string {
	for _, l := range ls {
		for _, e := range l {
			if e.name == p {
				return e.body
			}
		}
	}
	return ""
}

// TestTarSplitFallbacks: a missing, malformed or inconsistent tar-split
// makes Build scan the blob; a deferred digest comes from the unpacked
// files, and an unpacked file gone missing is an error then.
func TestTarSplitFallbacks(t *testing.T) {
	tests := []struct {
		name         string
		change       func(l *testLayer)
		wantFallback bool
	}{
		{name: "intact"},
		{name: "no tar-split", change: func(l *testLayer) {
			l.Unpacked.TarSplit = func(context.Context) (io.ReadCloser, error) { return nil, fs.ErrNotExist }
		}, wantFallback: true},
		{name: "not gzip", change: func(l *testLayer) {
			l.Unpacked.TarSplit = func(context.Context) (io.ReadCloser, error) { return io.NopCloser(strings.NewReader("{}")), nil }
		}, wantFallback: true},
		{name: "truncated", change: func(l *testLayer) {
			rc, _ := l.Unpacked.TarSplit(context.Background())
			b, _ := io.ReadAll(rc)
			plain := gunzip(t, b)
			l.Unpacked.TarSplit = func(context.Context) (io.ReadCloser, error) {
				return io.NopCloser(bytes.NewReader(gzipBytes(t, plain[:len(plain)/2]))), nil
			}
		}, wantFallback: true},
		{name: "kept file changed on disk", change: func(l *testLayer) {
			open := l.Unpacked.Open
			l.Unpacked.Open = func(p string) (io.ReadCloser, error) {
				if p == "etc/group" {
					return io.NopCloser(strings.NewReader("root:x:9:\n")), nil
				}
				return open(p)
			}
		}, wantFallback: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			layers, _ := tarSplitLayers(t, metaLayers)
			if tt.change != nil {
				tt.change(layers[1])
			}
			var fellBack atomic.Bool
			opts := baseindex.Options{Fallback: func(digest.Digest, error) { fellBack.Store(true) }}
			ix, err := baseindex.Build(context.Background(), descriptors(layers), opts)
			if err != nil {
				t.Fatalf("Build() error = %v", err)
			}
			if fellBack.Load() != tt.wantFallback {
				t.Errorf("fell back = %v, want %v", fellBack.Load(), tt.wantFallback)
			}
			if got, _ := ix.Content("etc/group"); string(got) != "root:x:0:\n" {
				t.Errorf("Content(etc/group) = %q", got)
			}
			e, ok, err := ix.Tree().Lstat("/etc/passwd")
			if err != nil || !ok || e.Digest.String() != sha("root:x:0:0::/root:/bin/bash\n") {
				t.Errorf("Lstat(/etc/passwd) = %+v, %v, %v, want its digest", e, ok, err)
			}
		})
	}
	t.Run("deferred file gone", func(t *testing.T) {
		layers, _ := tarSplitLayers(t, [][]ent{{file("etc/os-release", "ID=x\n")}})
		ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		n, _ := ix.Lookup("etc/os-release")
		if !n.Deferred() || n.Digest != (baseindex.Digest{}) {
			t.Fatalf("etc/os-release: Deferred() = %v, Digest %s; want a deferred digest", n.Deferred(), n.Digest)
		}
		layers[0].Unpacked.Open = func(p string) (io.ReadCloser, error) { return nil, fs.ErrNotExist }
		ix, err = baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if _, _, err := ix.Tree().Lstat("/etc/os-release"); err == nil {
			t.Error("Lstat() of a deferred file gone from the unpacked layer succeeded")
		}
		// LstatType never reads the file: the type and size are enough.
		e, ok, err := ix.Tree().(fstree.TypeStater).LstatType("/etc/os-release")
		if err != nil || !ok || e.Type != manifest.File || e.Size != int64(len("ID=x\n")) || e.Digest != "" {
			t.Errorf("LstatType() = %+v, %v, %v; want the file without a digest", e, ok, err)
		}
	})
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func gzipBytes(t *testing.T, b []byte) []byte {
	t.Helper()
	return compress(t, gzipped, b)
}

// TestDeferredCacheNeedsUnpackedFiles: a layer cached from its tar-split
// (deferred digests) is read again when it comes without unpacked files,
// as an uncompressed blob with the same digest would.
func TestDeferredCacheNeedsUnpackedFiles(t *testing.T) {
	dir := t.TempDir()
	layers, _ := tarSplitLayers(t, metaLayers)
	opts := baseindex.Options{CacheDir: dir}
	if _, err := baseindex.Build(context.Background(), descriptors(layers), opts); err != nil {
		t.Fatal(err)
	}
	blobs := descriptors(layers)
	for i := range blobs {
		blobs[i].Unpacked = nil
	}
	ix, err := baseindex.Build(context.Background(), blobs, opts)
	if err != nil {
		t.Fatal(err)
	}
	// The merged view has a deferred digest (usr/bin/y), and only the
	// bottom layer has any: the top one's files were all read.
	if got := [2]int32{layers[0].opens.Load(), layers[1].opens.Load()}; got != [2]int32{1, 0} {
		t.Errorf("layer opens = %v, want [1 0]", got)
	}
	n, _ := ix.Lookup("usr/lib/systemd/system/a.service")
	if n.Deferred() || n.Digest.String() != sha("[Unit]\nDescription=a\n") {
		t.Errorf("a.service: Deferred() = %v, Digest %s; want its digest", n.Deferred(), n.Digest)
	}
}

// TestDeferredDigestFromItsLayer: a deferred digest is read from the
// layer that listed the file, not searched for from the top layer down,
// whether the index was built or read from its cached view; a hard link
// is read from its own layer.
func TestDeferredDigestFromItsLayer(t *testing.T) {
	layers, ok := tarSplitLayers(t, [][]ent{
		{dir("etc"), file("etc/a", "a\n")},
		{dir("etc"), file("etc/b", "b\n"), hardlink("etc/c", "etc/a")},
		{dir("usr"), file("usr/d", "d\n")},
	})
	if !ok {
		t.Fatal("tar-split refused the layers")
	}
	dir := t.TempDir()
	for _, run := range []string{"built", "from the view"} {
		ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{CacheDir: dir})
		if err != nil {
			t.Fatal(err)
		}
		for _, tt := range []struct {
			path, body string
			from       int
		}{{"etc/a", "a\n", 0}, {"etc/c", "a\n", 1}, {"usr/d", "d\n", 2}} {
			var before [3]int32
			for i, l := range layers {
				before[i] = l.fileReads.Load()
			}
			e, ok, err := ix.Tree().Lstat("/" + tt.path)
			if err != nil || !ok || e.Digest.String() != sha(tt.body) {
				t.Fatalf("%s: Lstat(%s) = %+v, %v, %v; want the digest of %q", run, tt.path, e, ok, err, tt.body)
			}
			for i, l := range layers {
				want := int32(0)
				if i == tt.from {
					want = 1
				}
				if got := l.fileReads.Load() - before[i]; got != want {
					t.Errorf("%s: Lstat(%s) opened %d file(s) of layer %d, want %d", run, tt.path, got, i, want)
				}
			}
		}
	}
}
