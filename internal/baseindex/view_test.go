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

// TestDamagedViewBlockRebuilds: a block that does not match its checksum
// has Build build the index again from the layers' cache files, which
// answers every lookup; the view is cached again.
func TestDamagedViewBlockRebuilds(t *testing.T) {
	d := newDamagedCache(t)
	layers, long, opts, view, good := d.layers, d.long, d.opts, d.view, d.good
	warm, err := baseindex.Build(context.Background(), unopenable(t, layers), opts)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := warm.Lookup("etc/passwd"); !ok {
		t.Fatal("Lookup(etc/passwd) found nothing")
	}
	n, ok := warm.Lookup("zzz/b")
	if !ok || n.Target != long {
		t.Fatalf("Lookup(zzz/b) of the damaged block = %v, %v; want the symlink", n, ok)
	}
	if e, ok, err := warm.Tree().Lstat("/zzz/b"); err != nil || !ok || e.Target != long {
		t.Errorf("Tree().Lstat(/zzz/b) = %v, %v, %v", e, ok, err)
	}
	if b, err := os.ReadFile(view); err != nil || string(b) != string(good) {
		t.Errorf("the view after the rebuild: %v; same bytes as the first: %v", err, string(b) == string(good))
	}
}

// TestDamagedViewBlockRebuildStops: the rebuild runs with Build's
// context: once that is cancelled, Build fails with the cancellation,
// and the damaged view is removed all the same.
func TestDamagedViewBlockRebuildStops(t *testing.T) {
	d := newDamagedCache(t)
	layers, opts, view := d.layers, d.opts, d.view
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := baseindex.Build(ctx, unopenable(t, layers), opts)
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Build over the damaged view after a cancel: %v, want the cancellation", err)
	}
	if _, err := os.Stat(view); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the damaged view: %v, want it removed", err)
	}
}

// TestDamagedViewBlockFails: when the index cannot be built again, Build
// fails with the damage, naming the view file, and the rebuild's error;
// the view is removed, so that the next Build builds it.
func TestDamagedViewBlockFails(t *testing.T) {
	d := newDamagedCache(t)
	dir, layers, opts, view := d.dir, d.layers, d.opts, d.view
	if err := os.RemoveAll(filepath.Join(dir, "layers")); err != nil {
		t.Fatal(err)
	}
	_, err := baseindex.Build(context.Background(), failing(layers), opts)
	if err == nil || !strings.Contains(err.Error(), view+": block ") || !strings.Contains(err.Error(), "no blob here") {
		t.Fatalf("Build error = %v, want the damaged block of %s and the rebuild's error", err, view)
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
	if n, ok := warm.Lookup("zzz/b"); !ok || n.Target != long {
		t.Fatalf("Lookup(zzz/b) of the damaged block in a read-only cache = %v, %v", n, ok)
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
