// Package nodetest looks at a node's root the way package node does.
//
// Its test helpers open a root, and find where a manifest entry lies on it.
package nodetest

import (
	"encoding/json"
	"errors"
	"testing"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/node"
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
	rp, err := fstree.Locate(OpenRoot(t, newRoot), me.Path, me.Type)
	if errors.Is(err, fstree.ErrTooManyLinks) {
		return me.Path // a loop: nothing is at the path
	}
	if err != nil {
		t.Fatalf("resolving %s in the reverted deployment: %v", me.Path, err)
	}
	return rp
}

// StoredByDaemon is mc as the machine-config-daemon stores it at
// /etc/machine-config-daemon/currentconfig (docs/node.md, The revert
// guard): json.Marshal of the object a lister returned, so no apiVersion
// and no kind, with the server's metadata, and spec.osImageURL the image
// the node moves to.
func StoredByDaemon(t testing.TB, mc *machineconfig.MachineConfig, osImageURL string) []byte {
	t.Helper()
	b, err := mc.JSON()
	if err != nil {
		t.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		t.Fatal(err)
	}
	delete(obj, "apiVersion")
	delete(obj, "kind")
	meta := obj["metadata"].(map[string]any)
	meta["uid"], meta["resourceVersion"], meta["generation"] = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0", "4711", 1
	meta["creationTimestamp"] = "2026-12-01T10:00:00Z"
	obj["spec"].(map[string]any)["osImageURL"] = osImageURL
	obj["status"] = map[string]any{}
	if b, err = json.Marshal(obj); err != nil {
		t.Fatal(err)
	}
	return b
}
