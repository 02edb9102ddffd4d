package build

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/tool/guard"
)

// TestSplicedGzipLayer: a gzip layer that takes two files' contents from
// their deflate encodings (guard.Deflate) is one valid gzip stream: gzip
// -dc (which checks the trailer's CRC-32 and size) and Go's reader give
// the same tar as the layer compressed whole, whose SHA-256 is its diff
// ID; the encodings are in the blob as they are; and the same entries
// always make the same blob.
func TestSplicedGzipLayer(t *testing.T) {
	if _, err := exec.LookPath("gzip"); err != nil {
		t.Skip("no gzip")
	}
	rng := rand.New(rand.NewPCG(1, 2))
	binaryLike := func(n int) []byte {
		b := make([]byte, n)
		for i := range b {
			b[i] = "\x00\x00\x00\x48\x89\xe5abcdefgh"[rng.IntN(14)]
		}
		return b
	}
	big1, big2 := binaryLike(3<<20+17), binaryLike(1<<20)
	mtime := time.Unix(1700000000, 0)
	file := func(name string, content []byte, spliced bool) tarEntry {
		e := tarEntry{name: name, content: content,
			hdr: tar.Header{Typeflag: tar.TypeReg, Name: name, Mode: 0o755, Size: int64(len(content)), ModTime: mtime}}
		if spliced {
			enc, err := guard.Deflate(content)
			if err != nil {
				t.Fatal(err)
			}
			head, body, _ := bytes.Cut(enc, []byte("\n"))
			if string(head) != digest.FromBytes(content).String() {
				t.Fatalf("Deflate's head = %q, want the content's digest", head)
			}
			e.deflated = body
		}
		return e
	}
	entries := func(spliced bool) []tarEntry {
		return []tarEntry{
			file("etc/a", []byte("a\n"), false),
			file("usr/libexec/mcbake/mcbake-node", big1, spliced),
			file("usr/libexec/other", big2, spliced),
			file("usr/z", []byte("z"), false),
		}
	}
	dir := t.TempDir()
	write := func(spliced bool) (*layerFile, []byte) {
		t.Helper()
		lf, err := writeLayer(dir, "", entries(spliced), Gzip)
		if err != nil {
			t.Fatal(err)
		}
		b, err := os.ReadFile(lf.path)
		if err != nil {
			t.Fatal(err)
		}
		return lf, b
	}
	spliced, blob := write(true)
	plain, plainBlob := write(false)
	if spliced.diffID != plain.diffID || spliced.mediaType != mediaTypeGzip {
		t.Fatalf("spliced layer: diff ID %s, media type %s; want the whole layer's %s, gzip", spliced.diffID, spliced.mediaType, plain.diffID)
	}
	if bytes.Equal(blob, plainBlob) {
		t.Fatal("the spliced layer is the whole layer's bytes: nothing was spliced")
	}
	for _, e := range entries(true) {
		if e.deflated != nil && !bytes.Contains(blob, e.deflated) {
			t.Errorf("%s: its encoding is not in the blob", e.name)
		}
	}
	out, err := exec.Command("gzip", "-dc", spliced.path).Output()
	if err != nil {
		t.Fatalf("gzip -dc of the spliced layer: %v", err)
	}
	if d := digest.FromBytes(out); d != spliced.diffID {
		t.Errorf("gzip -dc gives a tar of digest %s, want the diff ID %s", d, spliced.diffID)
	}
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	if _, err := io.Copy(h, zr); err != nil {
		t.Fatalf("Go's gzip reader: %v", err)
	}
	if d := digest.NewDigest(digest.SHA256, h); d != spliced.diffID {
		t.Errorf("Go's gzip reader gives %s, want %s", d, spliced.diffID)
	}
	if digest.FromBytes(blob) != spliced.digest || int64(len(blob)) != spliced.size {
		t.Errorf("layer file: digest %s size %d, recorded %s %d", digest.FromBytes(blob), len(blob), spliced.digest, spliced.size)
	}
	if again, _ := write(true); again.digest != spliced.digest {
		t.Errorf("the same entries made %s, then %s", spliced.digest, again.digest)
	}
	// With a cache of built layers: the first layer, into an empty cache
	// (hashed once, beside the compression), is stored as it is, and
	// the next is copied from the cache.
	t.Cleanup(FakeCompressModule("github.com/klauspost/compress v0.0.0-test h1:test"))
	cache := t.TempDir()
	for _, how := range []string{"into an empty cache", "from the cache"} {
		lf, err := writeLayer(dir, cache, entries(true), Gzip)
		if err != nil {
			t.Fatal(err)
		}
		if lf.digest != spliced.digest || lf.diffID != spliced.diffID || lf.size != spliced.size {
			t.Errorf("%s: %s (diff ID %s, %d bytes), want %s (%s, %d)", how, lf.digest, lf.diffID, lf.size, spliced.digest, spliced.diffID, spliced.size)
		}
		if stored, _ := filepath.Glob(filepath.Join(cache, "built", "sha256", "*")); len(stored) != 2 {
			t.Errorf("%s: the cache holds %v, want the layer and its sum", how, stored)
		}
	}
	t.Logf("%d bytes spliced, %d compressed whole", len(blob), len(plainBlob))
}

// TestDeflatedOnlyForItsBinary: the embedded encoding is found by the
// binary's digest, and another binary (--guard-binary's) has none.
func TestDeflatedOnlyForItsBinary(t *testing.T) {
	if guard.Deflated(digest.FromString("another binary")) != nil {
		t.Error("Deflated(another binary's digest) is not nil")
	}
	bin, err := guard.Binary(runtime.GOARCH)
	if err != nil {
		t.Skipf("no embedded guard binary: %v", err)
	}
	d := guard.Deflated(digest.FromBytes(bin))
	if d == nil {
		t.Fatal("make guard-bin embedded no deflate encoding of the guard binary")
	}
	enc, err := guard.Deflate(bin)
	if err != nil {
		t.Fatal(err)
	}
	if _, body, _ := bytes.Cut(enc, []byte("\n")); !bytes.Equal(d, body) {
		t.Error("the embedded encoding is not Deflate's of the embedded binary")
	}
}
