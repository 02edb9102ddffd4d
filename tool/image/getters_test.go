package image

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"testing"

	drivers "go.podman.io/storage/drivers"
)

// fakeDriver hands out getters over dir, counting them.
type fakeDriver struct {
	dir    string
	made   map[string]int
	closed int
}

func (d *fakeDriver) DiffGetter(id string) (drivers.FileGetCloser, error) {
	d.made[id]++
	return &fakeGetter{d: d}, nil
}

type fakeGetter struct{ d *fakeDriver }

func (g *fakeGetter) Get(p string) (io.ReadCloser, error) { return os.Open(filepath.Join(g.d.dir, p)) }
func (g *fakeGetter) Close() error                        { g.d.closed++; return nil }

// TestGettersOpenOncePerLayer: a layer's file getter is made on its first
// read and reused, only regular files are opened, and closing the image's
// getters closes each one once and makes no more.
func TestGettersOpenOncePerLayer(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "f"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "d"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := &fakeDriver{dir: dir, made: map[string]int{}}
	var gs getters
	for _, id := range []string{"a", "a", "b", "a"} {
		rc, err := gs.open(d, id, "f")
		if err != nil {
			t.Fatalf("open(%s, f): %v", id, err)
		}
		if b, err := io.ReadAll(rc); err != nil || string(b) != "x" {
			t.Errorf("open(%s, f) read %q, %v", id, b, err)
		}
		rc.Close()
	}
	if _, err := gs.open(d, "a", "d"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("open(a, d) = %v, want not a regular file (fs.ErrNotExist)", err)
	}
	if d.made["a"] != 1 || d.made["b"] != 1 {
		t.Errorf("getters made %v, want one per layer", d.made)
	}
	if err := gs.close(); err != nil || d.closed != 2 {
		t.Errorf("close() = %v after closing %d getters, want 2", err, d.closed)
	}
	if err := gs.close(); err != nil || d.closed != 2 {
		t.Errorf("a second close() = %v, closed %d, want nothing more", err, d.closed)
	}
	if _, err := gs.open(d, "a", "f"); err == nil || d.made["a"] != 1 {
		t.Errorf("open after close() = %v, %d getters of a made; want an error and no new getter", err, d.made["a"])
	}
}
