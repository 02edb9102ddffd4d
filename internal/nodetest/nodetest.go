// Package nodetest holds the test helpers that look at a node's root the
// way the node package does: open it, and find where a manifest entry
// lies on it.
package nodetest

import (
	"errors"
	"testing"

	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/render"
)

// OpenRoot opens dir as a node root, closed when the test ends.
func OpenRoot(t testing.TB, dir string) *node.Root {
	t.Helper()
	r, err := node.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("closing %s: %v", dir, err)
		}
	})
	return r
}

// Resolve resolves the entry's parent directories through the symlinks of
// the root newRoot (a reverted deployment); a directory entry whose path
// is itself a symlink to a directory is followed too, as mkdir -p does.
func Resolve(t testing.TB, newRoot string, me manifest.Entry) string {
	t.Helper()
	rp, err := render.Locate(OpenRoot(t, newRoot), me.Path, me.Type == manifest.Directory)
	if errors.Is(err, render.ErrTooManyLinks) {
		return me.Path // a loop: nothing is at the path
	}
	if err != nil {
		t.Fatalf("resolving %s in the reverted deployment: %v", me.Path, err)
	}
	return rp
}
