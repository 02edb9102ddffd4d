package baseindex

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/manifest"
)

// FuzzWalk reads arbitrary bytes as a layer tar stream: never a panic,
// and every entry Walk reports has a clean absolute path and a known type.
func FuzzWalk(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
		{Name: "etc/.wh.gone", Typeflag: tar.TypeReg},
		{Name: "etc/dir/.wh..wh..opq", Typeflag: tar.TypeReg},
		{Name: "etc/l", Typeflag: tar.TypeSymlink, Linkname: "../../x"},
		{Name: "etc/h", Typeflag: tar.TypeLink, Linkname: "etc/passwd"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			f.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("root"))
		}
	}
	tw.Close()
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = Walk(bytes.NewReader(data), func(string) bool { return true }, 1<<20, func(e manifest.Entry, content []byte) error {
			switch e.Type {
			case manifest.File, manifest.Directory, manifest.Symlink, manifest.Hardlink, manifest.Absent, manifest.Other, Opaque:
			default:
				t.Fatalf("Walk reported type %q", e.Type)
			}
			if e.Path == "" || e.Path[0] != '/' || (len(e.Path) > 1 && e.Path[len(e.Path)-1] == '/') {
				t.Fatalf("Walk reported path %q", e.Path)
			}
			if int64(len(content)) > 1<<20 {
				t.Fatalf("Walk kept %d bytes", len(content))
			}
			return nil
		})
	})
}

// FuzzDecodeRecords decodes arbitrary cache records (what follows a
// cache file's checksum): never a panic.
func FuzzDecodeRecords(f *testing.F) {
	f.Add("etc\x00passwd", []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, strs string, recs []byte) {
		newLayerData(strs).decode(recs)
	})
}

// viewHeaders are the entries of a small layer whose view has every kind
// of record: directories, a file, a symlink and a hard link.
var viewHeaders = []*tar.Header{
	{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
	{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5},
	{Name: "etc/l", Typeflag: tar.TypeSymlink, Linkname: "passwd"},
	{Name: "usr/lib/systemd/system/a.service", Typeflag: tar.TypeLink, Linkname: "etc/passwd"},
}

// smallView indexes a one-layer base of the headers (a regular file's
// content is "root\n") and returns its view file's bytes and its key.
func smallView(tb testing.TB, headers []*tar.Header) ([]byte, [sha256.Size]byte) {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, h := range headers {
		if err := tw.WriteHeader(h); err != nil {
			tb.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("root\n"))
		}
	}
	tw.Close()
	blob := buf.Bytes()
	l := Layer{Digest: digest.FromBytes(blob), Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(blob)), nil }}
	ix, err := Build(context.Background(), []Layer{l}, Options{})
	if err != nil {
		tb.Fatal(err)
	}
	file := filepath.Join(tb.TempDir(), "view")
	key := viewKey([]Layer{l})
	if err := writeView(file, key, ix); err != nil {
		tb.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		tb.Fatal(err)
	}
	return b, key
}

// FuzzView looks paths up in a view whose body is arbitrary bytes under
// matching checksums (a view written by a broken writer): never a panic
// nor a reference outside the file.
func FuzzView(f *testing.F) {
	b, key := smallView(f, viewHeaders)
	p := b[viewHeader:]
	count := binary.LittleEndian.Uint32(p[sha256.Size:])
	f.Add(count, p[viewFixed+4*int(binary.LittleEndian.Uint32(p[sha256.Size+12:])):])
	f.Add(uint32(3), bytes.Repeat([]byte{0xff}, 3*recordSize+10))
	f.Fuzz(func(t *testing.T, count uint32, body []byte) {
		var sums []byte
		for off := 0; off < len(body); off += viewBlock {
			sums = binary.LittleEndian.AppendUint32(sums, crc32.Checksum(body[off:min(off+viewBlock, len(body))], crcTable))
		}
		fixed := binary.LittleEndian.AppendUint32(append(key[:0:0], key[:]...), count)
		fixed = binary.LittleEndian.AppendUint32(fixed, 1)
		fixed = binary.LittleEndian.AppendUint32(fixed, 0)
		fixed = binary.LittleEndian.AppendUint32(fixed, uint32(len(sums)/4))
		head := append(fixed, sums...)
		length := uint64(len(head) + len(body))
		file := slices.Concat(viewHeaderOf(length, crc32.Checksum(head, crcTable)), head, body)
		v, _, ok := openView(file, key, nil)
		if !ok {
			return
		}
		if blk := v.damaged(); blk >= 0 {
			t.Fatalf("block %d damaged in a view whose checksums match", blk)
		}
		ix := &Index{view: v}
		for _, p := range []string{"", "etc", "etc/passwd", "etc/l", "usr/lib/systemd/system/a.service", "missing"} {
			if n, ok := ix.Lookup(p); ok {
				n.Lstat()
			}
			ix.Content(p)
			ix.ReadDir(p)
		}
	})
}

// FuzzUnpackView unpacks arbitrary bytes as a packed view: never a panic,
// and what unpacks and packs again unpacks to the same bytes.
func FuzzUnpackView(f *testing.F) {
	b, _ := smallView(f, append(viewHeaders, &tar.Header{Name: "var/empty/", Typeflag: tar.TypeDir, Mode: 0o755}))
	packed, err := PackView(b)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(packed)
	f.Add(packed[:len(packed)/2])
	f.Fuzz(func(t *testing.T, packed []byte) {
		view, err := UnpackView(packed, 1<<20)
		if err != nil {
			return
		}
		again, err := PackView(view)
		if err != nil {
			return // a view writeView would not write
		}
		back, err := UnpackView(again, 1<<20)
		if err != nil || !bytes.Equal(back, view) {
			t.Fatalf("a view packed again does not unpack to itself: %v", err)
		}
	})
}
