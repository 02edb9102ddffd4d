package baseindex_test

import (
	"archive/tar"
	"bytes"
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/mcbake/mcbake/internal/baseindex"
)

var (
	benchMiB   = flag.Int("bench-mib", 128, "uncompressed MiB of content in the synthetic base of BenchmarkBuildCold and BenchmarkGunzip")
	benchFiles = flag.Int("bench-files", 50000, "files in the synthetic bases")
	benchDump  = flag.String("bench-dump", "", "directory to write the synthetic layers of BenchmarkBuildCold to, to time gzip -dc on them")
)

const benchLayers = 8

// synthBase returns a deterministic synthetic base: files regular files
// spread over directories and layers, totalling size bytes of content
// that compresses about like binaries do.
func synthBase(tb testing.TB, files int, size int64) []*testLayer {
	tb.Helper()
	rng := rand.New(rand.NewPCG(1, 2))
	pool := contentPool(rng, 8<<20)
	sizes := fileSizes(rng, files, size)
	per := (files + benchLayers - 1) / benchLayers
	layers := make([]*testLayer, 0, benchLayers)
	for l := range benchLayers {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		writeSynthLayer(tb, tw, rng, pool, l, sizes[min(l*per, files):min((l+1)*per, files)])
		if err := tw.Close(); err != nil {
			tb.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			tb.Fatal(err)
		}
		layers = append(layers, newLayer(buf.Bytes(), mediaTypes[gzipped]))
	}
	return layers
}

// contentPool returns n bytes mixing random bytes and repeated words.
func contentPool(rng *rand.Rand, n int) []byte {
	words := make([][]byte, 512)
	for i := range words {
		words[i] = make([]byte, 3+rng.IntN(8))
		for j := range words[i] {
			words[i][j] = byte(rng.IntN(256))
		}
	}
	pool := make([]byte, 0, n+64)
	for len(pool) < n {
		if rng.IntN(10) < 1 {
			for range 64 {
				pool = append(pool, byte(rng.IntN(256)))
			}
			continue
		}
		for range 8 {
			pool = append(pool, words[rng.IntN(len(words))]...)
		}
	}
	return pool[:n]
}

// fileSizes returns n log-uniform sizes summing to about total.
func fileSizes(rng *rand.Rand, n int, total int64) []int64 {
	w := make([]float64, n)
	sum := 0.0
	for i := range w {
		w[i] = math.Exp(rng.Float64() * math.Log(5000))
		sum += w[i]
	}
	out := make([]int64, n)
	for i := range w {
		out[i] = int64(float64(total) * w[i] / sum)
	}
	return out
}

func writeSynthLayer(tb testing.TB, tw *tar.Writer, rng *rand.Rand, pool []byte, layer int, sizes []int64) {
	tb.Helper()
	const perDir = 25
	for i, size := range sizes {
		d := fmt.Sprintf("usr/l%d/d%03d/s%03d", layer, i/perDir/40, i/perDir%40)
		if i%perDir == 0 {
			writeEntry(tb, tw, &tar.Header{Name: d + "/", Typeflag: tar.TypeDir, Mode: 0o755}, nil)
		}
		off := rng.IntN(len(pool))
		content := make([]byte, 0, size)
		for int64(len(content)) < size {
			n := min(int(size)-len(content), len(pool)-off)
			content = append(content, pool[off:off+n]...)
			off = 0
		}
		hdr := &tar.Header{Name: fmt.Sprintf("%s/f%06d", d, i), Typeflag: tar.TypeReg, Mode: 0o644, Size: size}
		writeEntry(tb, tw, hdr, content)
	}
}

func writeEntry(tb testing.TB, tw *tar.Writer, hdr *tar.Header, content []byte) {
	if err := tw.WriteHeader(hdr); err != nil {
		tb.Fatal(err)
	}
	if _, err := tw.Write(content); err != nil {
		tb.Fatal(err)
	}
}

var (
	coldOnce   sync.Once
	coldLayers []*testLayer
)

// coldBase is the synthetic base of the cold benchmarks, built once.
func coldBase(b *testing.B) []*testLayer {
	coldOnce.Do(func() {
		coldLayers = synthBase(b, *benchFiles, int64(*benchMiB)<<20)
		if *benchDump != "" {
			for i, l := range coldLayers {
				if err := os.WriteFile(filepath.Join(*benchDump, fmt.Sprintf("layer%d.tar.gz", i)), l.blob, 0o644); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	return coldLayers
}

// BenchmarkBuildCold indexes the synthetic base without a cache. Compare
// with BenchmarkGunzip, which only decompresses the same layers one after
// the other, as gzip -dc does.
func BenchmarkBuildCold(b *testing.B) {
	layers := coldBase(b)
	b.SetBytes(int64(*benchMiB) << 20)
	b.ResetTimer()
	for b.Loop() {
		ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
		if err != nil {
			b.Fatal(err)
		}
		if ix.Len() < *benchFiles {
			b.Fatalf("Len() = %d, want at least %d", ix.Len(), *benchFiles)
		}
	}
}

func BenchmarkGunzip(b *testing.B) {
	layers := coldBase(b)
	b.SetBytes(int64(*benchMiB) << 20)
	b.ResetTimer()
	for b.Loop() {
		for _, l := range layers {
			zr, err := gzip.NewReader(bytes.NewReader(l.blob))
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.Copy(io.Discard, zr); err != nil {
				b.Fatal(err)
			}
		}
	}
}

// BenchmarkBuildWarm builds the index of a 50k-entry base from a warm
// cache; the target is under 50 ms.
func BenchmarkBuildWarm(b *testing.B) {
	layers := synthBase(b, *benchFiles, int64(*benchFiles)*100)
	dir := b.TempDir()
	opts := baseindex.Options{CacheDir: dir}
	if _, err := baseindex.Build(context.Background(), descriptors(layers), opts); err != nil {
		b.Fatal(err)
	}
	for _, l := range layers {
		l.blob = nil // reading a layer now fails on its digest
	}
	b.ResetTimer()
	for b.Loop() {
		ix, err := baseindex.Build(context.Background(), descriptors(layers), opts)
		if err != nil {
			b.Fatal(err)
		}
		if ix.Len() < *benchFiles {
			b.Fatalf("Len() = %d, want at least %d", ix.Len(), *benchFiles)
		}
	}
}

// hardlinkBase returns a deterministic base laid out as ostree-ext writes
// one, two entries per file: each file is an object under
// sysroot/ostree/repo/objects followed by a hardlink at its real path, and
// a tenth of the objects are symlinks.
func hardlinkBase(tb testing.TB, files int) []*testLayer {
	tb.Helper()
	per := (files + benchLayers - 1) / benchLayers
	layers := make([]*testLayer, 0, benchLayers)
	for l := range benchLayers {
		var buf bytes.Buffer
		zw := gzip.NewWriter(&buf)
		tw := tar.NewWriter(zw)
		for i := l * per; i < min((l+1)*per, files); i++ {
			writeObject(tb, tw, i)
		}
		if err := tw.Close(); err != nil {
			tb.Fatal(err)
		}
		if err := zw.Close(); err != nil {
			tb.Fatal(err)
		}
		layers = append(layers, newLayer(buf.Bytes(), mediaTypes[gzipped]))
	}
	return layers
}

// writeObject writes file i as an ostree object and a hardlink to it.
func writeObject(tb testing.TB, tw *tar.Writer, i int) {
	sum := sha(strconv.Itoa(i))[len("sha256:"):]
	obj := fmt.Sprintf("sysroot/ostree/repo/objects/%s/%s.file", sum[:2], sum[2:])
	if i%10 == 0 {
		writeEntry(tb, tw, &tar.Header{Name: obj, Typeflag: tar.TypeSymlink, Linkname: "../lib64/libfoo.so.1", Mode: 0o777}, nil)
	} else {
		body := []byte("content " + strconv.Itoa(i))
		writeEntry(tb, tw, &tar.Header{Name: obj, Typeflag: tar.TypeReg, Mode: 0o755, Size: int64(len(body))}, body)
	}
	real := fmt.Sprintf("usr/lib/pkg%04d/sub%02d/file-%06d.so", i/300, i/30%10, i)
	writeEntry(tb, tw, &tar.Header{Name: real, Typeflag: tar.TypeLink, Linkname: obj}, nil)
}

// BenchmarkBuildWarmHardlinks builds the index of an ostree-ext-like base
// of -bench-files files, twice as many entries, from a warm cache.
func BenchmarkBuildWarmHardlinks(b *testing.B) {
	layers := hardlinkBase(b, *benchFiles)
	opts := baseindex.Options{CacheDir: b.TempDir()}
	if _, err := baseindex.Build(context.Background(), descriptors(layers), opts); err != nil {
		b.Fatal(err)
	}
	for _, l := range layers {
		l.blob = nil // reading a layer now fails on its digest
	}
	b.ResetTimer()
	for b.Loop() {
		ix, err := baseindex.Build(context.Background(), descriptors(layers), opts)
		if err != nil {
			b.Fatal(err)
		}
		if ix.Len() != 2*(*benchFiles) {
			b.Fatalf("Len() = %d, want %d", ix.Len(), 2*(*benchFiles))
		}
	}
}

// BenchmarkUnpackView: what a runner that pulls a published index spends
// on it, for an ostree-ext-like base of -bench-files files: the view
// compressed with zstd as it is, decompressed ("view"), against the view
// packed and compressed, decompressed and unpacked ("packed"). Each
// reports its compressed bytes.
func BenchmarkUnpackView(b *testing.B) {
	view := publishedView(b, hardlinkBase(b, *benchFiles))
	packed, err := baseindex.PackView(view)
	if err != nil {
		b.Fatal(err)
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		b.Fatal(err)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		b.Fatal(err)
	}
	defer dec.Close()
	for _, tc := range []struct {
		name   string
		blob   []byte
		unpack bool
	}{
		{"view", enc.EncodeAll(view, nil), false},
		{"packed", enc.EncodeAll(packed, nil), true},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				got, err := dec.DecodeAll(tc.blob, nil)
				if err == nil && tc.unpack {
					got, err = baseindex.UnpackView(got, int64(len(view)))
				}
				if err != nil || len(got) != len(view) {
					b.Fatalf("got %d bytes of view, want %d: %v", len(got), len(view), err)
				}
			}
			b.ReportMetric(float64(len(tc.blob)), "bytes")
		})
	}
}
