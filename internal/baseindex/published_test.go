package baseindex_test

import (
	"context"
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// published builds viewLayers' index in a new cache and returns the
// layers and the bytes of its publishable view.
func published(t *testing.T) ([]*testLayer, []byte) {
	t.Helper()
	layers, _ := viewLayers(t)
	return layers, publishedView(t, layers)
}

// cached reports whether dir holds a whole, intact view of the chain of
// layers.
func cached(dir string, layers []baseindex.Layer) bool {
	_, err := baseindex.PublishableView(dir, layers)
	return err == nil
}

// TestImportView: a view published by one cache and imported into an
// empty one is what a Build there reads, without opening a layer, and
// it answers as the scanned index does.
func TestImportView(t *testing.T) {
	layers, b := published(t)
	dir := t.TempDir()
	if cached(dir, descriptors(layers)) {
		t.Fatal("an empty cache holds the view")
	}
	if err := baseindex.ImportView(dir, descriptors(layers), b); err != nil {
		t.Fatalf("ImportView() = %v", err)
	}
	if !cached(dir, descriptors(layers)) {
		t.Fatal("the cache does not hold the imported view")
	}
	got, err := baseindex.Build(context.Background(), unopenable(t, layers), baseindex.Options{CacheDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	want, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"etc/passwd", "zzz/b", "usr/share/many/file-with-a-long-name-0399"} {
		g, gok := got.Lookup(p)
		w, wok := want.Lookup(p)
		if gok != wok || !gok {
			t.Fatalf("Lookup(%q) found = %v, want %v", p, gok, wok)
		}
		if diff := cmp.Diff(w.Entry(), g.Entry()); diff != "" {
			t.Errorf("Lookup(%q) (-want +got):\n%s", p, diff)
		}
	}
}

// TestImportViewRefused: a damaged view, a truncated one and the view of
// another chain of layers are refused, and nothing is cached.
func TestImportViewRefused(t *testing.T) {
	layers, b := published(t)
	other := gzLayers(t, []ent{file("etc/passwd", "root:x:0:0::/root:/bin/sh\n")})
	flip := func(off int) []byte {
		c := append([]byte(nil), b...)
		c[off] ^= 1
		return c
	}
	for _, tc := range []struct {
		name   string
		layers []*testLayer
		view   []byte
	}{
		{"last block", layers, flip(len(b) - 1)},
		{"first record", layers, flip(len(b) / 2)},
		{"version", layers, flip(16)},
		{"key", layers, flip(32)},
		{"truncated", layers, b[:len(b)-100]},
		{"empty", layers, nil},
		{"another base", other, b},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			err := baseindex.ImportView(dir, descriptors(tc.layers), tc.view)
			if !errors.Is(err, baseindex.ErrRefused) {
				t.Fatalf("ImportView() = %v, want ErrRefused", err)
			}
			if cached(dir, descriptors(tc.layers)) {
				t.Error("a refused view was cached")
			}
		})
	}
}

// TestBuildImport: Build calls Options.Import when its cache holds no
// usable view, and only then: a view it imports is read as the cached
// one (no layer opened), a false one leaves a scan, and a damaged cached
// view is removed before Import is called.
func TestBuildImport(t *testing.T) {
	layers, b := published(t)
	importing := func(dir string, ok bool, calls *int) func(context.Context) bool {
		return func(context.Context) bool {
			*calls++
			if !ok {
				return false
			}
			if err := baseindex.ImportView(dir, descriptors(layers), b); err != nil {
				t.Errorf("ImportView() = %v", err)
			}
			return true
		}
	}
	t.Run("imported", func(t *testing.T) {
		dir, calls := t.TempDir(), 0
		ix, err := baseindex.Build(context.Background(), unopenable(t, layers), baseindex.Options{CacheDir: dir, Import: importing(dir, true, &calls)})
		if err != nil || calls != 1 || !ix.FromCache() {
			t.Fatalf("Build() = %v, Import called %d times, FromCache %v; want nil, 1, true", err, calls, ix != nil && ix.FromCache())
		}
		// Then the view is cached: no Import.
		ix, err = baseindex.Build(context.Background(), unopenable(t, layers), baseindex.Options{CacheDir: dir, Import: importing(dir, true, &calls)})
		if err != nil || calls != 1 || !ix.FromCache() {
			t.Errorf("warm Build() = %v, Import called %d times in all, FromCache %v; want nil, 1, true", err, calls, ix != nil && ix.FromCache())
		}
	})
	t.Run("none", func(t *testing.T) {
		dir, calls := t.TempDir(), 0
		ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{CacheDir: dir, Import: importing(dir, false, &calls)})
		if err != nil || calls != 1 || ix.FromCache() {
			t.Fatalf("Build() = %v, Import called %d times, FromCache %v; want nil, 1, false", err, calls, ix != nil && ix.FromCache())
		}
	})
	t.Run("damaged", func(t *testing.T) {
		dir, calls := t.TempDir(), 0
		if err := baseindex.ImportView(dir, descriptors(layers), b); err != nil {
			t.Fatal(err)
		}
		damageLastBlock(t, dir)
		ix, err := baseindex.Build(context.Background(), unopenable(t, layers), baseindex.Options{CacheDir: dir, Import: importing(dir, true, &calls)})
		if err != nil || calls != 1 || !ix.FromCache() {
			t.Fatalf("Build() = %v, Import called %d times, FromCache %v; want nil, 1, true", err, calls, ix != nil && ix.FromCache())
		}
		if _, ok := ix.Lookup("etc/passwd"); !ok {
			t.Error("the imported index has no etc/passwd")
		}
	})
}
