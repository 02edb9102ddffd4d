package build_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/tool/build"
)

// TestBuiltLayerCache: a build remembers the new layer it compressed, a
// build of the same layer copies it, and a cache entry that does not
// decompress to the layer's tar is not used (and is written again).
func TestBuiltLayerCache(t *testing.T) {
	t.Cleanup(build.FakeCompressModule("github.com/klauspost/compress v0.0.0-test h1:test"))
	for _, compression := range []string{build.Gzip, build.Zstd} {
		t.Run(compression, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			base := e.writeBase(t)
			mcs := parityMC(t, "")
			run := func(name, cache string) (*build.Result, digest.Digest) {
				t.Helper()
				o := e.options(base, "oci:"+filepath.Join(e.dir, name)+":latest", mcs)
				o.CacheDir, o.Compression = cache, compression
				res, err := build.Image(ctx, o)
				if err != nil {
					t.Fatal(err)
				}
				m := readManifest(t, filepath.Join(e.dir, name))
				return res, m.Layers[len(m.Layers)-1].Digest
			}
			clean, cleanLayer := run("nocache", "")
			cache := filepath.Join(e.dir, "layercache")
			if res, _ := run("first", cache); res.Digest != clean.Digest {
				t.Fatalf("a build that fills the cache made %s, one without a cache %s", res.Digest, clean.Digest)
			}
			entries, err := filepath.Glob(filepath.Join(cache, "built", "sha256", "*"))
			if err != nil || len(entries) != 2 || entries[1] != entries[0]+".sum" {
				t.Fatalf("cache entries = %v (%v), want one and its sum", entries, err)
			}
			entry := entries[0]
			blob, err := os.ReadFile(entry)
			if err != nil || digest.FromBytes(blob) != cleanLayer {
				t.Fatalf("the cache entry is %s (%v), want the layer %s", digest.FromBytes(blob), err, cleanLayer)
			}
			if res, _ := run("second", cache); res.Digest != clean.Digest {
				t.Fatalf("a build from the cache made %s, want %s", res.Digest, clean.Digest)
			}
			// The sum file records the blob; with a wrong one (here, a
			// damaged one) the blob is checked in full and still serves.
			if sum, err := os.ReadFile(entry + ".sum"); err != nil || !strings.HasPrefix(string(sum), cleanLayer.String()+" ") {
				t.Fatalf("the sum file: %q, %v; want the layer %s", sum, err, cleanLayer)
			}
			if err := os.WriteFile(entry+".sum", []byte("sha256:"+strings.Repeat("0", 64)+" 1 x\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			if res, _ := run("wrong-sum", cache); res.Digest != clean.Digest {
				t.Fatalf("a build with a wrong sum made %s, want %s", res.Digest, clean.Digest)
			}
			if sum, _ := os.ReadFile(entry + ".sum"); !strings.HasPrefix(string(sum), cleanLayer.String()+" ") {
				t.Errorf("the wrong sum file was not written again: %q", sum)
			}
			// A blob the sum file vouches for is not inflated: a blob
			// the full check would refuse (a byte after its stream), with
			// its sum written by hand, is the layer a build copies. (The
			// cache is the user's own; the sum guards against damage.)
			vouched := append(bytes.Clone(blob), 0)
			if err := os.WriteFile(entry, vouched, 0o644); err != nil {
				t.Fatal(err)
			}
			mediaType := map[string]string{build.Gzip: "application/vnd.oci.image.layer.v1.tar+gzip", build.Zstd: "application/vnd.oci.image.layer.v1.tar+zstd"}[compression]
			if err := os.WriteFile(entry+".sum", fmt.Appendf(nil, "%s %d %s\n", digest.FromBytes(vouched), len(vouched), mediaType), 0o644); err != nil {
				t.Fatal(err)
			}
			if _, layer := run("vouched", cache); layer != digest.FromBytes(vouched) {
				t.Errorf("a blob its sum vouches for was not copied as it is: layer %s, want %s", layer, digest.FromBytes(vouched))
			}
			if err := os.WriteFile(entry, blob, 0o644); err != nil {
				t.Fatal(err)
			}
			if err := os.Remove(entry + ".sum"); err != nil {
				t.Fatal(err)
			}

			// The cache serves: another valid compression of the same
			// tar planted there is the layer a build writes.
			tarBytes := inflate(t, compression, blob)
			var planted bytes.Buffer
			zw, _ := gzip.NewWriterLevel(&planted, gzip.BestSpeed)
			zw.Write(tarBytes)
			zw.Close()
			if compression == build.Gzip {
				if err := os.WriteFile(entry, planted.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
				if _, layer := run("planted", cache); layer != digest.FromBytes(planted.Bytes()) {
					t.Fatalf("the build did not use the cache entry: layer %s, planted %s", layer, digest.FromBytes(planted.Bytes()))
				}
			}

			// A fifo is not opened for reading (it would block), and is
			// replaced.
			if err := os.Remove(entry); err != nil {
				t.Fatal(err)
			}
			if err := syscall.Mkfifo(entry, 0o644); err != nil {
				t.Fatal(err)
			}
			if res, _ := run("fifo", cache); res.Digest != clean.Digest {
				t.Errorf("fifo entry: the build made %s, want %s", res.Digest, clean.Digest)
			}
			if got, err := os.ReadFile(entry); err != nil || !bytes.Equal(got, blob) {
				t.Errorf("fifo entry: not replaced (%v)", err)
			}

			// Damaged entries are not used, and are replaced.
			for name, bad := range map[string][]byte{
				"truncated": blob[:len(blob)/2],
				"flipped":   append(append(bytes.Clone(blob[:len(blob)/2]), blob[len(blob)/2]^0xff), blob[len(blob)/2+1:]...),
				"trailing":  append(bytes.Clone(blob), 0),
				"other tar": compress(t, compression, append(bytes.Clone(tarBytes), make([]byte, 512)...)),
				"empty":     nil,
			} {
				if err := os.WriteFile(entry, bad, 0o644); err != nil {
					t.Fatal(err)
				}
				if res, _ := run("damaged", cache); res.Digest != clean.Digest {
					t.Errorf("%s entry: the build made %s, want %s", name, res.Digest, clean.Digest)
				}
				if got, err := os.ReadFile(entry); err != nil || !bytes.Equal(got, blob) {
					t.Errorf("%s entry: not replaced (%v)", name, err)
				}
			}
		})
	}
}

func inflate(t *testing.T, compression string, blob []byte) []byte {
	t.Helper()
	var r io.Reader
	switch compression {
	case build.Gzip:
		zr, err := gzip.NewReader(bytes.NewReader(blob))
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	default:
		zr, err := zstdReader(blob)
		if err != nil {
			t.Fatal(err)
		}
		r = zr
	}
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func zstdReader(blob []byte) (io.Reader, error) {
	return zstd.NewReader(bytes.NewReader(blob))
}

// compress compresses b as a build could have.
func compress(t *testing.T, compression string, b []byte) []byte {
	t.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	if compression == build.Gzip {
		w = gzip.NewWriter(&buf)
	} else {
		zw, err := zstd.NewWriter(&buf)
		if err != nil {
			t.Fatal(err)
		}
		w = zw
	}
	if _, err := w.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}
