package baseindex_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// cacheLayers are layers exercising everything a cache file records:
// whiteouts, opaque markers, hardlinks (one whose target a later layer
// replaces: it keeps the first content's digest), kept contents, owners
// and modes.
var cacheLayers = [][]ent{
	{
		dir("./").withMode(0o555),
		file("etc/passwd", "root:x:0:0::/root:/bin/bash\n"),
		file("etc/group", ""),
		dir("d/"), file("d/x", "x"), file("d/y", "y"), hardlink("d/z", "d/y"),
		file("sysroot/ostree/repo/objects/aa.file", "[Unit]\nDescription=a\n"),
		hardlink("usr/lib/systemd/system/a.service", "sysroot/ostree/repo/objects/aa.file"),
		symlink("usr/local", "../var/usrlocal"),
		file("usr/bin/sudo", "elf").withMode(0o4755).withOwner(0, 10),
		file("home/core/.ssh/authorized_keys", "ssh-ed25519 AAAA").withMode(0o600).withOwner(1000, 1000),
	},
	{
		whiteout("d/.wh.x"), file("d/y", "another y"),
		dir("e/"), whiteout("e/.wh..wh..opq"),
		file("etc/systemd/system-preset/10.preset", "enable a.service\n"),
		hardlink("etc/systemd/system/a.service", "usr/lib/systemd/system/a.service"),
	},
}

// snapshot is everything an index says about the layers' paths.
func snapshot(t *testing.T, ix *baseindex.Index) []string {
	t.Helper()
	lines := listing(t, ix, bodies(cacheLayers))
	for _, p := range []string{"etc/passwd", "etc/group", "usr/lib/systemd/system/a.service",
		"etc/systemd/system/a.service", "etc/systemd/system-preset/10.preset"} {
		c, ok := ix.Content(p)
		lines = append(lines, "content "+p+" "+string(c)+map[bool]string{true: " (kept)"}[ok])
	}
	return lines
}

func cacheFile(dir string, l *testLayer) string {
	return filepath.Join(dir, "layers", "sha256", l.Digest.Encoded())
}

func TestCacheAvoidsOpeningLayers(t *testing.T) {
	dir := t.TempDir()
	layers := gzLayers(t, cacheLayers...)
	opts := baseindex.Options{CacheDir: dir}
	cold, err := baseindex.Build(context.Background(), descriptors(layers), opts)
	if err != nil {
		t.Fatalf("cold Build() error = %v", err)
	}
	for _, l := range layers {
		if _, err := os.Stat(cacheFile(dir, l)); err != nil {
			t.Errorf("cache file of %s: %v", l.Digest, err)
		}
	}
	warm, err := baseindex.Build(context.Background(), unopenable(t, layers), opts)
	if err != nil {
		t.Fatalf("warm Build() error = %v", err)
	}
	if diff := cmp.Diff(snapshot(t, cold), snapshot(t, warm)); diff != "" {
		t.Errorf("warm index mismatch (-cold +warm):\n%s", diff)
	}
	uncached, err := baseindex.Build(context.Background(), descriptors(gzLayers(t, cacheLayers...)), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(t, uncached), snapshot(t, cold)); diff != "" {
		t.Errorf("cached index mismatch (-uncached +cached):\n%s", diff)
	}
}

func TestCorruptCacheIsRebuilt(t *testing.T) {
	// corrupt returns the bytes to put in a layer's cache file, given its
	// valid cache file and the valid cache file of another layer.
	tests := []struct {
		name    string
		corrupt func(b, other []byte) []byte
	}{
		{name: "flipped payload byte", corrupt: func(b, _ []byte) []byte { b[len(b)-3] ^= 1; return b }},
		{name: "flipped checksum byte", corrupt: func(b, _ []byte) []byte { b[30] ^= 1; return b }},
		{name: "truncated", corrupt: func(b, _ []byte) []byte { return b[:len(b)-1] }},
		{name: "truncated header", corrupt: func(b, _ []byte) []byte { return b[:20] }},
		{name: "empty", corrupt: func(_, _ []byte) []byte { return nil }},
		{name: "other version", corrupt: func(b, _ []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 99); return b }},
		{name: "not a cache file", corrupt: func(_, _ []byte) []byte { return []byte(`{"entries":[]}`) }},
		{name: "another layer's cache", corrupt: func(_, other []byte) []byte { return other }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			layers := gzLayers(t, cacheLayers...)
			opts := baseindex.Options{CacheDir: dir}
			want, err := baseindex.Build(context.Background(), descriptors(layers), opts)
			if err != nil {
				t.Fatal(err)
			}
			target := cacheFile(dir, layers[1])
			b, err := os.ReadFile(target)
			if err != nil {
				t.Fatal(err)
			}
			other, err := os.ReadFile(cacheFile(dir, layers[0]))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(target, tt.corrupt(b, other), 0o644); err != nil {
				t.Fatal(err)
			}
			removeViews(t, dir)

			got, err := baseindex.Build(context.Background(), descriptors(layers), opts)
			if err != nil {
				t.Fatalf("Build() with a corrupt cache error = %v", err)
			}
			if opens := [2]int32{layers[0].opens.Load(), layers[1].opens.Load()}; opens != [2]int32{1, 2} {
				t.Errorf("layer opens = %v, want [1 2]: only the corrupt layer read again", opens)
			}
			if diff := cmp.Diff(snapshot(t, want), snapshot(t, got)); diff != "" {
				t.Errorf("rebuilt index mismatch (-want +got):\n%s", diff)
			}
			if _, err := baseindex.Build(context.Background(), unopenable(t, layers), opts); err != nil {
				t.Errorf("Build() after the rebuild error = %v", err)
			}
		})
	}
}

// removeViews removes the merged views, so that a Build reads the layers'
// cache files.
func removeViews(t *testing.T, dir string) {
	t.Helper()
	if err := os.RemoveAll(filepath.Join(dir, "views")); err != nil {
		t.Fatal(err)
	}
}

// viewFiles returns the merged views cached in dir.
func viewFiles(t *testing.T, dir string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "views", "sha256", "*"))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestViewIsOneRead: a warm Build reads the merged view and no layer's
// cache file, and gives the same index as a cold one, with the same
// pointer for a path every time it is looked up.
func TestViewIsOneRead(t *testing.T) {
	dir := t.TempDir()
	layers := gzLayers(t, cacheLayers...)
	opts := baseindex.Options{CacheDir: dir}
	cold, err := baseindex.Build(context.Background(), descriptors(layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(viewFiles(t, dir)); n != 1 {
		t.Fatalf("%d merged views cached, want 1", n)
	}
	if err := os.RemoveAll(filepath.Join(dir, "layers")); err != nil {
		t.Fatal(err)
	}
	warm, err := baseindex.Build(context.Background(), unopenable(t, layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(t, cold), snapshot(t, warm)); diff != "" {
		t.Errorf("index from the view mismatch (-built +view):\n%s", diff)
	}
	a, _ := warm.Lookup("etc/passwd")
	b, _ := warm.Lookup("/etc/passwd")
	if a != b {
		t.Error("Lookup() of one path returned two nodes")
	}
	if got := warm.ReadDir("etc/passwd"); got != nil {
		t.Errorf("ReadDir(a file) = %v, want nil", got)
	}
	if got := warm.ReadDir("missing"); got != nil {
		t.Errorf("ReadDir(a missing path) = %v, want nil", got)
	}
	// Another chain (the bottom layer alone) has its own view.
	if _, err := baseindex.Build(context.Background(), descriptors(layers[:1]), opts); err != nil {
		t.Fatal(err)
	}
	if n := len(viewFiles(t, dir)); n != 2 {
		t.Errorf("%d merged views cached, want 2", n)
	}
}

func TestCorruptViewIsRebuilt(t *testing.T) {
	tests := []struct {
		name    string
		corrupt func(b []byte) []byte
	}{
		{name: "flipped payload byte", corrupt: func(b []byte) []byte { b[len(b)-3] ^= 1; return b }},
		{name: "flipped checksum byte", corrupt: func(b []byte) []byte { b[30] ^= 1; return b }},
		{name: "truncated", corrupt: func(b []byte) []byte { return b[:len(b)-1] }},
		{name: "truncated header", corrupt: func(b []byte) []byte { return b[:20] }},
		{name: "empty", corrupt: func([]byte) []byte { return nil }},
		{name: "other version", corrupt: func(b []byte) []byte { binary.LittleEndian.PutUint32(b[16:], 99); return b }},
		{name: "a layer's cache file", corrupt: func([]byte) []byte { return nil }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			layers := gzLayers(t, cacheLayers...)
			opts := baseindex.Options{CacheDir: dir}
			want, err := baseindex.Build(context.Background(), descriptors(layers), opts)
			if err != nil {
				t.Fatal(err)
			}
			view := viewFiles(t, dir)[0]
			b, err := os.ReadFile(view)
			if err != nil {
				t.Fatal(err)
			}
			corrupt := tt.corrupt(bytes.Clone(b))
			if tt.name == "a layer's cache file" {
				if corrupt, err = os.ReadFile(cacheFile(dir, layers[0])); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.WriteFile(view, corrupt, 0o644); err != nil {
				t.Fatal(err)
			}
			// The layers' cache files rebuild the view.
			got, err := baseindex.Build(context.Background(), unopenable(t, layers), opts)
			if err != nil {
				t.Fatalf("Build() with a corrupt view error = %v", err)
			}
			if diff := cmp.Diff(snapshot(t, want), snapshot(t, got)); diff != "" {
				t.Errorf("rebuilt index mismatch (-want +got):\n%s", diff)
			}
			if fixed, err := os.ReadFile(view); err != nil || !bytes.Equal(fixed, b) {
				t.Errorf("view after the rebuild: %v, same bytes as before: %v", err, bytes.Equal(fixed, b))
			}
		})
	}
}

func TestCacheConcurrentBuilds(t *testing.T) {
	dir := t.TempDir()
	layers := gzLayers(t, cacheLayers...)
	want, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	wantSnap := snapshot(t, want)
	const builders = 8
	results := make([]*baseindex.Index, builders)
	errs := make([]error, builders)
	var wg sync.WaitGroup
	for i := range builders {
		wg.Go(func() {
			results[i], errs[i] = baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{CacheDir: dir})
		})
	}
	wg.Wait()
	for i := range builders {
		if errs[i] != nil {
			t.Fatalf("Build() #%d error = %v", i, errs[i])
		}
		if diff := cmp.Diff(wantSnap, snapshot(t, results[i])); diff != "" {
			t.Errorf("Build() #%d index mismatch (-want +got):\n%s", i, diff)
		}
	}
	entries, err := os.ReadDir(filepath.Join(dir, "layers", "sha256"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != len(layers) {
		var names []string
		for _, e := range entries {
			names = append(names, e.Name())
		}
		t.Errorf("cache directory holds %v, want one file per layer and no temporary files", names)
	}
	if _, err := baseindex.Build(context.Background(), unopenable(t, layers), baseindex.Options{CacheDir: dir}); err != nil {
		t.Errorf("Build() after the concurrent builds error = %v", err)
	}
}

// TestCacheDirNotWritable: a cache that cannot be written (here a file
// where its directories go) only costs time: the build succeeds with the
// index an uncached build makes.
func TestCacheDirNotWritable(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"layers", "views"} { // files where the cache wants directories
		if err := os.WriteFile(filepath.Join(dir, d), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	layers := descriptors(gzLayers(t, cacheLayers...))
	var logged bytes.Buffer
	defer slog.SetDefault(slog.Default())
	slog.SetDefault(slog.New(slog.NewTextHandler(&logged, nil)))
	got, err := baseindex.Build(context.Background(), layers, baseindex.Options{CacheDir: dir})
	if err != nil {
		t.Fatalf("Build() with a cache it cannot write: %v", err)
	}
	if n := strings.Count(logged.String(), "the index cache could not be written"); n != 1 {
		t.Errorf("%d warnings about the cache, want one a build:\n%s", n, logged.String())
	}
	want, err := baseindex.Build(context.Background(), layers, baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(snapshot(t, want), snapshot(t, got)); diff != "" {
		t.Errorf("index built with an unwritable cache differs (-uncached +got):\n%s", diff)
	}
}

// TestBuildTightensGC: the garbage collector runs at 30% while a large
// index built in memory lives, and as before once it is garbage; a small
// one, or one read from the view, changes nothing.
func TestBuildTightensGC(t *testing.T) {
	if os.Getenv("GOGC") != "" {
		t.Skip("GOGC is set: Build leaves the collector alone")
	}
	gcPercent := func() int { p := debug.SetGCPercent(100); debug.SetGCPercent(p); return p }
	before := gcPercent()
	if _, err := baseindex.Build(context.Background(), descriptors(gzLayers(t, cacheLayers...)), baseindex.Options{}); err != nil {
		t.Fatal(err)
	}
	if got := gcPercent(); got != before {
		t.Errorf("GC percent with a small index = %d, want %d", got, before)
	}
	dir := t.TempDir()
	layers := descriptors(hardlinkBase(t, 130_000))
	ix, err := baseindex.Build(context.Background(), layers, baseindex.Options{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	if got := gcPercent(); got != 30 {
		t.Errorf("GC percent with an index in memory = %d, want 30", got)
	}
	runtime.KeepAlive(ix)
	ix = nil
	for i := 0; i < 100 && gcPercent() != before; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	if got := gcPercent(); got != before {
		t.Errorf("GC percent once the index is garbage = %d, want %d", got, before)
	}
	if _, err := baseindex.Build(context.Background(), layers, baseindex.Options{CacheDir: dir}); err != nil {
		t.Fatal(err)
	}
	if got := gcPercent(); got != before {
		t.Errorf("GC percent with an index from the view = %d, want %d", got, before)
	}
}

// TestCacheSweepsDeadTemps: a cache write a killed run left half-done
// (its temporary file, no longer locked) is removed by the next write
// into the same directory; a live run's locked one is not.
func TestCacheSweepsDeadTemps(t *testing.T) {
	dir := t.TempDir()
	layers := descriptors(gzLayers(t, cacheLayers...))
	if _, err := baseindex.Build(context.Background(), layers[:1], baseindex.Options{CacheDir: dir}); err != nil {
		t.Fatal(err)
	}
	layerDir := filepath.Join(dir, "layers", "sha256")
	dead := filepath.Join(layerDir, ".mcbake-cache-0123456789abcdef")
	if err := os.WriteFile(dead, []byte("half a cache file"), 0o644); err != nil {
		t.Fatal(err)
	}
	live := filepath.Join(layerDir, ".mcbake-cache-fedcba9876543210")
	if err := os.WriteFile(live, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	if _, err := baseindex.Build(context.Background(), layers, baseindex.Options{CacheDir: dir}); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("a dead run's temporary file is still there after the next write (stat: %v)", err)
	}
	if _, err := os.Stat(live); err != nil {
		t.Errorf("a live run's temporary file was removed: %v", err)
	}
}
