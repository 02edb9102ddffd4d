package baseindex_test

import (
	"bytes"
	"context"
	"fmt"
	"testing"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// packLayers is a base with every kind of record a view holds: files
// whose content the index keeps (passwd, a unit, a preset), an empty
// directory, symlinks, hard links to files and to a symlink, an
// ostree-ext-shaped object store whose objects are hard-linked from
// /usr, a hard link whose target a later layer replaced, owners, and
// whiteouts.
func packLayers(t *testing.T) []*testLayer {
	t.Helper()
	bottom := []ent{
		file("etc/passwd", "root:x:0:0::/root:/bin/bash\n"),
		file("etc/group", "root:x:0:\n"),
		file("usr/lib/systemd/system/kubelet.service", "[Unit]\nDescription=kubelet\n"),
		file("usr/lib/systemd/system-preset/90-default.preset", "enable kubelet.service\n"),
		dir("var/empty"),
		symlink("usr/local", "../var/usrlocal"),
		symlink("etc/localtime", "/usr/share/zoneinfo/UTC"),
		hardlink("usr/bin/localtime-link", "etc/localtime"),
		file("usr/bin/old", "old"),
		hardlink("usr/bin/keeps-old", "usr/bin/old"),
		file("etc/gone", "x").withOwner(1000, 1000),
	}
	for i := range 50 {
		obj := fmt.Sprintf("sysroot/ostree/repo/objects/%02x/%062x.file", i, i*7919)
		bottom = append(bottom, file(obj, fmt.Sprintf("content %d", i)),
			hardlink(fmt.Sprintf("usr/share/app/f%03d", i), obj))
	}
	top := []ent{
		file("usr/bin/old", "new"),
		whiteout("etc/.wh.gone"),
		file("opt/owned", "x").withOwner(0, 27),
	}
	return gzLayers(t, bottom, top)
}

// publishedView builds layers' index in a new cache and returns its
// publishable view.
func publishedView(t testing.TB, layers []*testLayer) []byte {
	t.Helper()
	dir := t.TempDir()
	if _, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{CacheDir: dir}); err != nil {
		t.Fatal(err)
	}
	b, err := baseindex.PublishableView(dir, descriptors(layers))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPackView: a packed view unpacks to the same bytes, which a cache
// then imports, and it is smaller than the view.
func TestPackView(t *testing.T) {
	for name, layers := range map[string][]*testLayer{
		"every kind of record": packLayers(t),
		"long names":           func() []*testLayer { l, _ := viewLayers(t); return l }(),
		"an empty layer":       gzLayers(t, []ent{}),
	} {
		t.Run(name, func(t *testing.T) {
			view := publishedView(t, layers)
			packed, err := baseindex.PackView(view)
			if err != nil {
				t.Fatal(err)
			}
			got, err := baseindex.UnpackView(packed, int64(len(view)))
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, view) {
				t.Fatal("UnpackView(PackView(view)) is not the view")
			}
			if len(packed) >= len(view) {
				t.Errorf("packed %d bytes, the view %d", len(packed), len(view))
			}
			if err := baseindex.ImportView(t.TempDir(), descriptors(layers), got); err != nil {
				t.Errorf("ImportView(unpacked) = %v", err)
			}
			if _, err := baseindex.UnpackView(packed, int64(len(view))-1); err == nil {
				t.Error("UnpackView with a limit under the view's size = nil error")
			}
		})
	}
}

// TestPackViewRefusesMalformed: what is not a whole view is not packed
// (and see TestPackViewRefusesMovedString).
func TestPackViewRefusesMalformed(t *testing.T) {
	view := publishedView(t, packLayers(t))
	if _, err := baseindex.PackView(view[:len(view)-1]); err == nil {
		t.Error("PackView(truncated view) = nil error")
	}
	if _, err := baseindex.PackView([]byte("not a view")); err == nil {
		t.Error("PackView(garbage) = nil error")
	}
}

// TestUnpackViewDamaged: a packed view with any one byte changed either
// fails to unpack or unpacks to a view that ImportView refuses: it never
// unpacks to another view that is accepted.
func TestUnpackViewDamaged(t *testing.T) {
	layers := packLayers(t)
	view := publishedView(t, layers)
	packed, err := baseindex.PackView(view)
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	step := max(1, len(packed)/3000)
	for off := 0; off < len(packed); off += step {
		for _, x := range []byte{1, 0x80} {
			b := bytes.Clone(packed)
			b[off] ^= x
			got, err := baseindex.UnpackView(b, int64(len(view))*2)
			if err != nil {
				continue
			}
			if bytes.Equal(got, view) {
				continue // a byte that does not matter (none should, but it is harmless)
			}
			if err := baseindex.ImportView(cache, descriptors(layers), got); err == nil {
				t.Fatalf("byte %d ^ %#x: the packed view unpacks to another view, which ImportView accepts", off, x)
			}
		}
	}
}
