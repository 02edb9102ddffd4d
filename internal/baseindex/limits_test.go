package baseindex_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// TestLimits: what a hostile layer makes the index keep or read is
// refused while it is read, in every form a layer is read from, with an
// error naming the limit (see docs/limits.md).
func TestLimits(t *testing.T) {
	long := strings.Repeat("d/", 2100) + "x" // 4202 bytes as /d/d/.../x
	unit := "[Unit]\n" + strings.Repeat("#", 60<<10)
	var units []ent
	for i := range 300 { // 300 × 60 KiB: 18 MiB kept
		units = append(units, file(fmt.Sprintf("usr/lib/systemd/system/u%03d.service", i), unit))
	}
	tests := []struct {
		name   string
		layers [][]ent
		want   string
	}{
		{
			name:   "path over PATH_MAX",
			layers: [][]ent{{file(long, "")}},
			want:   `path "/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d/d"... is 4202 bytes, longer than PATH_MAX (4095): no node can extract it`,
		},
		{
			name:   "path one byte over PATH_MAX",
			layers: [][]ent{{file(strings.Repeat("d/", 2047)+"x", "")}}, // 4096 bytes as /d/.../x
			want:   `is 4096 bytes, longer than PATH_MAX (4095)`,
		},
		{
			name:   "component over NAME_MAX",
			layers: [][]ent{{file("etc/"+strings.Repeat("n", 256), "")}},
			want:   `a component is 256 bytes, longer than NAME_MAX (255)`,
		},
		{
			name:   "symlink target over PATH_MAX",
			layers: [][]ent{{symlink("etc/l", long)}},
			want:   `symlink target "d/d/d/`,
		},
		{
			name:   "hardlink target over PATH_MAX",
			layers: [][]ent{{file("etc/a", "a"), hardlink("etc/b", long)}},
			want:   `hardlink target: path "/d/d/d/`,
		},
		{
			name:   "kept contents of a layer",
			layers: [][]ent{units},
			want:   `the unit files, presets, passwd and group files of this layer pass 16 MiB at "usr/lib/systemd/system/u273.service"`,
		},
		{
			name:   "kept contents of the merged layers",
			layers: [][]ent{units[:150], units[150:]},
			want:   `the unit files, presets, passwd and group files of the layers merged so far pass 16 MiB at "usr/lib/systemd/system/u273.service"`,
		},
	}
	for _, f := range forms {
		// The longest path a node can create is indexed.
		layers, _ := f.layers(t, [][]ent{{file(strings.Repeat("d/", 2046)+"xy", "")}}) // 4095 bytes as /d/.../xy
		if _, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{}); err != nil {
			t.Errorf("%s: a path of PATH_MAX-1 bytes: %v", f.name, err)
		}
		for _, tt := range tests {
			t.Run(f.name+"/"+tt.name, func(t *testing.T) {
				layers, _ := f.layers(t, tt.layers)
				_, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Build() error = %v, want one containing %q", err, tt.want)
				}
				if len(err.Error()) > 600 {
					t.Errorf("Build() error is %d bytes long, want a short line", len(err.Error()))
				}
			})
		}
	}
}

// TestHardlinkChains: a hardlink at a kept path takes the content of the
// last file before it at its target, through links to links, whatever
// comes after.
func TestHardlinkChains(t *testing.T) {
	layers := gzLayers(t, []ent{
		file("obj/a", "old"),
		file("obj/a", "first"),
		hardlink("obj/b", "obj/a"),
		hardlink("obj/c", "obj/b"),
		file("obj/big", strings.Repeat("b", 70<<10)), // past the recent files
		file("obj/pad1", strings.Repeat("1", 70<<10)),
		file("obj/pad2", strings.Repeat("2", 70<<10)),
		file("obj/pad3", strings.Repeat("3", 70<<10)),
		file("obj/pad4", strings.Repeat("4", 70<<10)),
		hardlink("etc/passwd", "obj/c"),
		file("obj/a", "later"),
	})
	ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := ix.Content("etc/passwd"); !ok || string(got) != "first" {
		t.Errorf("Content(etc/passwd) = %q, %v, want \"first\", true", got, ok)
	}
}

// TestDiffID: a blob's uncompressed stream is checked against the
// diff_id the image's config gives, also when the blob's entries are
// cached from an image that gave the right one.
func TestDiffID(t *testing.T) {
	raw := tarBytes(t, file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"))
	l := newLayer(compress(t, gzipped, raw), mediaTypes[gzipped]).Layer
	dir := t.TempDir()
	l.DiffID = digest.FromBytes(raw)
	if _, err := baseindex.Build(context.Background(), []baseindex.Layer{l}, baseindex.Options{CacheDir: dir}); err != nil {
		t.Fatalf("Build() with the right diff_id: %v", err)
	}
	l.DiffID = digest.FromString("a lie")
	_, err := baseindex.Build(context.Background(), []baseindex.Layer{l}, baseindex.Options{CacheDir: dir})
	want := "diff_id mismatch: the uncompressed layer is " + digest.FromBytes(raw).String() + ", the image config's diff_id says " + l.DiffID.String()
	if err == nil || !strings.Contains(err.Error(), want) || !errors.Is(err, baseindex.ErrDiffIDMismatch) {
		t.Fatalf("Build() with a wrong diff_id error = %v, want one containing %q", err, want)
	}
}

// TestZstdWindow: a zstd frame asking for a window past the limit is
// refused at its header, before the decoder allocates it.
func TestZstdWindow(t *testing.T) {
	raw := tarBytes(t, file("etc/passwd", "root:x:0:0::/root:/bin/sh\n"))
	for _, tt := range []struct {
		windowLog byte
		ok        bool
	}{{25, true}, {26, false}, {29, false}} {
		blob := zstdWithWindow(t, raw, tt.windowLog)
		l := newLayer(blob, mediaTypes[zstded]).Layer
		_, err := baseindex.Build(context.Background(), []baseindex.Layer{l}, baseindex.Options{})
		switch {
		case tt.ok && err != nil:
			t.Errorf("window 2^%d: Build() error = %v", tt.windowLog, err)
		case !tt.ok && (err == nil || !strings.Contains(err.Error(), "a zstd frame needs a window larger than 32 MiB, the limit")):
			t.Errorf("window 2^%d: Build() error = %v, want one about the window limit", tt.windowLog, err)
		}
	}
}

// zstdWithWindow compresses raw into one zstd frame whose header asks for
// a window of 2^windowLog bytes (the content does not need it: the
// header is what the decoder sizes its window by).
func zstdWithWindow(t *testing.T, raw []byte, windowLog byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := zstd.NewWriter(&b, zstd.WithWindowSize(1<<20), zstd.WithSingleSegment(false))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	blob := b.Bytes()
	// Frame_Header_Descriptor: no Single_Segment_flag, so that the
	// Window_Descriptor (exponent: windowLog-10, no mantissa) follows.
	if blob[4]&0x20 != 0 {
		t.Fatalf("zstd frame is single-segment: header %x", blob[:8])
	}
	blob[5] = (windowLog - 10) << 3
	return blob
}

// TestWhiteoutOfALongName: a whiteout of a name of NAME_MAX bytes is
// legal (its ".wh." is not part of any name on disk).
func TestWhiteoutOfALongName(t *testing.T) {
	name := strings.Repeat("n", 255)
	layers := gzLayers(t, []ent{file("etc/"+name, "x")}, []ent{whiteout("etc/.wh." + name)})
	ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatalf("Build() with a whiteout of a 255-byte name: %v", err)
	}
	if n, ok := ix.Lookup("etc/" + name); ok {
		t.Errorf("etc/%.10s... is %v after its whiteout", name, n.Type)
	}
}

// TestHardlinkChainIsLinear: a chain of hardlinks to hardlinks, each the
// target of the next, resolves for the kept path at its end in one pass
// over the entries, not one per link.
func TestHardlinkChainIsLinear(t *testing.T) {
	const n = 50_000
	entries := []ent{file("obj/0", "root:x:0:0::/root:/bin/sh\n")}
	for i := 1; i <= n; i++ {
		entries = append(entries, hardlink(fmt.Sprintf("obj/%d", i), fmt.Sprintf("obj/%d", i-1)))
	}
	for i := range 5 { // past the recent files
		entries = append(entries, file(fmt.Sprintf("pad/%d", i), strings.Repeat("p", 70<<10)))
	}
	entries = append(entries, hardlink("etc/passwd", fmt.Sprintf("obj/%d", n)))
	layers := gzLayers(t, entries)
	start := time.Now()
	ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d chained hardlinks in %v", n, time.Since(start).Round(time.Millisecond))
	if got, ok := ix.Content("etc/passwd"); !ok || string(got) != "root:x:0:0::/root:/bin/sh\n" {
		t.Errorf("Content(etc/passwd) = %q, %v, want the chain's file", got, ok)
	}
}

// TestLoadedLayersAreBounded: layers loaded above a slow one wait, with
// their data, for it to be merged; no more start than the loads allowed
// at once, so that their memory stays bounded.
func TestLoadedLayersAreBounded(t *testing.T) {
	var entries [][]ent
	for i := range 12 {
		entries = append(entries, []ent{file(fmt.Sprintf("etc/f%d", i), "x")})
	}
	layers := gzLayers(t, entries...)
	release := make(chan struct{})
	var opened atomic.Int32
	descs := descriptors(layers)
	slow := descs[0].Open
	descs[0].Open = func(ctx context.Context) (io.ReadCloser, error) {
		<-release
		return slow(ctx)
	}
	for i := 1; i < len(descs); i++ {
		open := descs[i].Open
		descs[i].Open = func(ctx context.Context) (io.ReadCloser, error) {
			opened.Add(1)
			return open(ctx)
		}
	}
	done := make(chan error, 1)
	go func() {
		_, err := baseindex.Build(context.Background(), descs, baseindex.Options{})
		done <- err
	}()
	time.Sleep(300 * time.Millisecond)
	limit := min(runtime.GOMAXPROCS(0), 4)
	if got := int(opened.Load()); got > limit-1 {
		t.Errorf("%d layers above a slow bottom layer were opened, want at most %d (the loads at once, less the slow one)", got, limit-1)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got := int(opened.Load()); got != len(descs)-1 {
		t.Errorf("%d layers opened in all, want %d", got, len(descs)-1)
	}
}
