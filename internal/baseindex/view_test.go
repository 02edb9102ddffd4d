package baseindex_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// viewLayers make a view of many blocks whose last block holds nothing
// but the end of the target of zzz/b: the last string written, after
// that of zzz/a, as long.
func viewLayers(t *testing.T) ([]*testLayer, string) {
	entries := []ent{file("etc/passwd", "root:x:0:0::/root:/bin/bash\n")}
	for i := range 400 {
		entries = append(entries, file(fmt.Sprintf("usr/share/many/file-with-a-long-name-%04d", i), "x"))
	}
	long := "/" + strings.Repeat("t", 4000)
	entries = append(entries, symlink("zzz/a", long), symlink("zzz/b", long))
	return gzLayers(t, entries), long
}

// damageLastBlock flips the view file's last byte.
func damageLastBlock(t *testing.T, dir string) string {
	t.Helper()
	view := viewFiles(t, dir)[0]
	b, err := os.ReadFile(view)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)-1] ^= 1
	if err := os.WriteFile(view, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return view
}

// damagedCache is a cache directory with viewLayers' index, its view's
// last block then damaged (damageLastBlock).
type damagedCache struct {
	dir, view string
	layers    []*testLayer
	long      string // viewLayers' long symlink target
	opts      baseindex.Options
	good      []byte // the view before the damage
}

func newDamagedCache(t *testing.T) damagedCache {
	t.Helper()
	d := damagedCache{dir: t.TempDir()}
	d.layers, d.long = viewLayers(t)
	d.opts = baseindex.Options{CacheDir: d.dir}
	if _, err := baseindex.Build(context.Background(), descriptors(d.layers), d.opts); err != nil {
		t.Fatal(err)
	}
	var err error
	if d.good, err = os.ReadFile(viewFiles(t, d.dir)[0]); err != nil {
		t.Fatal(err)
	}
	d.view = damageLastBlock(t, d.dir)
	return d
}

// failing returns the layers with an Open that fails as a blob gone
// does: fs.ErrNotExist.
func failing(layers []*testLayer) []baseindex.Layer {
	out := descriptors(layers)
	for i := range out {
		out[i].Open = func(context.Context) (io.ReadCloser, error) {
			return nil, fmt.Errorf("no blob here: %w", fs.ErrNotExist)
		}
	}
	return out
}

// TestViewChecksOnlyWhatItReads: a warm Build checks none of the view's
// blocks but its head, and a lookup checks the few it reads.
// warmView builds viewLayers' index into a new cache, then again from
// its view (the layers cannot be opened), and returns that index and the
// long symlink target.
func warmView(t *testing.T) (*baseindex.Index, string) {
	t.Helper()
	layers, long := viewLayers(t)
	opts := baseindex.Options{CacheDir: t.TempDir()}
	if _, err := baseindex.Build(context.Background(), descriptors(layers), opts); err != nil {
		t.Fatal(err)
	}
	warm, err := baseindex.Build(context.Background(), unopenable(t, layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	return warm, long
}

func TestViewChecksOnlyWhatItReads(t *testing.T) {
	warm, _ := warmView(t)
	checked, blocks := baseindex.CheckedBlocks(warm)
	if blocks < 10 || checked != 0 {
		t.Fatalf("after a warm Build, %d of %d blocks checked, want 0 of at least 10", checked, blocks)
	}
	if n, ok := warm.Lookup("etc/passwd"); !ok || n.Size != 28 {
		t.Fatalf("Lookup(etc/passwd) = %+v, %v", n, ok)
	}
	if checked, _ = baseindex.CheckedBlocks(warm); checked == 0 || checked > blocks/2 {
		t.Errorf("one lookup checked %d of %d blocks", checked, blocks)
	}
}

// TestDamagedViewBlockRebuilds: a block that does not match its checksum,
// found by a lookup after Build returned, has the index built again from
// the layers' cache files, which answers that lookup and every later one;
// the view is cached again.
func TestDamagedViewBlockRebuilds(t *testing.T) {
	d := newDamagedCache(t)
	layers, long, opts, view, good := d.layers, d.long, d.opts, d.view, d.good
	warm, err := baseindex.Build(context.Background(), unopenable(t, layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := warm.Lookup("etc/passwd"); !ok || warm.Err() != nil {
		t.Fatalf("Lookup(etc/passwd) in the intact blocks: %v, Err() = %v", ok, warm.Err())
	}
	n, ok := warm.Lookup("zzz/b")
	if !ok || n.Target != long {
		t.Fatalf("Lookup(zzz/b) over the damaged block = %v, %v; want the symlink", n, ok)
	}
	if err := warm.Err(); err != nil {
		t.Fatalf("Err() = %v after a rebuild from the layers' cache files", err)
	}
	if e, ok, err := warm.Tree().Lstat("/zzz/b"); err != nil || !ok || e.Target != long {
		t.Errorf("Tree().Lstat(/zzz/b) = %v, %v, %v", e, ok, err)
	}
	if b, err := os.ReadFile(view); err != nil || string(b) != string(good) {
		t.Errorf("the view after the rebuild: %v; same bytes as the first: %v", err, string(b) == string(good))
	}
}

// TestDamagedViewBlockRebuildStops: a rebuild runs with Build's context,
// so that an interrupted command does not wait for it: once that is
// cancelled, the rebuild fails with the cancellation, and the damaged view
// is removed all the same.
func TestDamagedViewBlockRebuildStops(t *testing.T) {
	d := newDamagedCache(t)
	layers, opts, view := d.layers, d.opts, d.view
	ctx, cancel := context.WithCancel(context.Background())
	warm, err := baseindex.Build(ctx, unopenable(t, layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	_, _, err = warm.Tree().Lstat("/zzz/b")
	if err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Fatalf("Tree().Lstat(/zzz/b) over the damaged block after a cancel: %v, want the cancellation", err)
	}
	if _, err := os.Stat(view); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the damaged view: %v, want it removed", err)
	}
}

// TestDamagedViewBlockFails: when the index cannot be built again, the
// damage is Err, which every method of the Tree returns, naming the view file;
// the view is removed, so that the next Build builds it.
func TestDamagedViewBlockFails(t *testing.T) {
	d := newDamagedCache(t)
	dir, layers, opts, view := d.dir, d.layers, d.opts, d.view
	if err := os.RemoveAll(filepath.Join(dir, "layers")); err != nil {
		t.Fatal(err)
	}
	warm, err := baseindex.Build(context.Background(), failing(layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	root := warm.Tree()
	if _, ok, err := root.Lstat("/etc/passwd"); !ok || err != nil {
		t.Fatalf("Tree().Lstat(/etc/passwd) in the intact blocks = %v, %v", ok, err)
	}
	_, _, err = root.Lstat("/zzz/b")
	if err == nil || !strings.Contains(err.Error(), view+": block ") || !strings.Contains(err.Error(), "no blob here") {
		t.Fatalf("Tree().Lstat(/zzz/b) error = %v, want the damaged block of %s and the rebuild's error", err, view)
	}
	if !errors.Is(warm.Err(), err) && warm.Err().Error() != err.Error() {
		t.Errorf("Err() = %v, want %v", warm.Err(), err)
	}
	// Not a missing path, which the Tree's callers skip.
	if errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the error is fs.ErrNotExist: %v", err)
	}
	// Once damaged, every method fails, even for what the view had.
	if _, _, err := root.Lstat("/etc/passwd"); err == nil {
		t.Error("Tree().Lstat(/etc/passwd) after the damage: no error")
	}
	if _, err := root.ReadFile("/etc/passwd"); err == nil || errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Tree().ReadFile(/etc/passwd) after the damage: %v, want an error that is not fs.ErrNotExist", err)
	}
	if _, err := root.ReadDir("/etc"); err == nil {
		t.Error("Tree().ReadDir(/etc) after the damage: no error")
	}
	if _, err := os.Stat(view); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the damaged view: %v, want it removed", err)
	}
}

// TestDamagedViewReadOnlyCache: a damaged view in a cache that cannot be
// changed (a read-only mount) is still built again, in memory: nothing
// fails but the warnings.
func TestDamagedViewReadOnlyCache(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot mount the cache read-only")
	}
	d := newDamagedCache(t)
	dir, layers, long, opts := d.dir, d.layers, d.long, d.opts
	if err := unix.Mount(dir, dir, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { unix.Unmount(dir, unix.MNT_DETACH) })
	if err := unix.Mount("", dir, "", unix.MS_BIND|unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("read-only remount: %v", err)
	}
	warm, err := baseindex.Build(context.Background(), unopenable(t, layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	if n, ok := warm.Lookup("zzz/b"); !ok || n.Target != long || warm.Err() != nil {
		t.Fatalf("Lookup(zzz/b) over the damaged block in a read-only cache = %v, %v; Err() = %v", n, ok, warm.Err())
	}
}

// TestViewLookupsAgain: the view remembers what it found, and answers a
// path asked for again, found or not, as the first time (a missing path
// next to one that is there too).
func TestViewLookupsAgain(t *testing.T) {
	warm, long := warmView(t)
	for range 2 {
		for _, p := range []string{"etc/passwe", "etc/passwd/x", "usr/share/many/file-with-a-long-name-0400", "zzz/c"} {
			if n, ok := warm.Lookup(p); ok {
				t.Errorf("Lookup(%s) = %+v, want nothing", p, n)
			}
		}
		if n, ok := warm.Lookup("zzz/b"); !ok || n.Target != long {
			t.Errorf("Lookup(zzz/b) = %+v, %v; want the symlink", n, ok)
		}
		if b, ok := warm.Content("etc/passwd"); !ok || string(b) != "root:x:0:0::/root:/bin/bash\n" {
			t.Errorf("Content(etc/passwd) = %q, %v", b, ok)
		}
		if n, ok := warm.Lookup("usr/share/many/file-with-a-long-name-0399"); !ok || n.Size != 1 {
			t.Errorf("Lookup(...-0399) = %+v, %v", n, ok)
		}
	}
}
