package revert_test

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"testing"

	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/ocilayout"
	"github.com/mcbake/mcbake/internal/testing/testbase"
)

// compareIndex writes the test base with opts as an OCI layout and
// indexes it as a build indexes a base (internal/baseindex), without a
// cache. The tests that build images on it are in tool/e2e/revert.
func compareIndex(t *testing.T, opts testbase.Options) fstree.Tree {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "base")
	if _, err := testbase.Write(dir, opts); err != nil {
		t.Fatalf("testbase.Write: %v", err)
	}
	layers, err := layoutLayers(dir)
	if err != nil {
		t.Fatalf("reading %s: %v", dir, err)
	}
	ix, err := baseindex.Build(context.Background(), layers, baseindex.Options{})
	if err != nil {
		t.Fatalf("indexing %s: %v", dir, err)
	}
	return ix.Tree()
}

// layoutLayers returns the layers of the image index.json names (of this
// machine's platform, when it names an index).
func layoutLayers(dir string) ([]baseindex.Layer, error) {
	var idx v1.Index
	if err := ocilayout.ReadJSON(filepath.Join(dir, "index.json"), &idx); err != nil {
		return nil, err
	}
	if len(idx.Manifests) != 1 {
		return nil, fmt.Errorf("index.json has %d entries, want 1", len(idx.Manifests))
	}
	d := idx.Manifests[0]
	if d.MediaType == v1.MediaTypeImageIndex || d.MediaType == "application/vnd.docker.distribution.manifest.list.v2+json" {
		var list v1.Index
		if err := ocilayout.ReadJSON(ocilayout.BlobPath(dir, d.Digest.String()), &list); err != nil {
			return nil, err
		}
		found := false
		for _, m := range list.Manifests {
			if m.Platform != nil && m.Platform.OS == "linux" && m.Platform.Architecture == runtime.GOARCH {
				d, found = m, true
				break
			}
		}
		if !found {
			return nil, fmt.Errorf("no manifest for linux/%s", runtime.GOARCH)
		}
	}
	var m v1.Manifest
	if err := ocilayout.ReadJSON(ocilayout.BlobPath(dir, d.Digest.String()), &m); err != nil {
		return nil, err
	}
	var cfg v1.Image
	if err := ocilayout.ReadJSON(ocilayout.BlobPath(dir, m.Config.Digest.String()), &cfg); err != nil {
		return nil, err
	}
	if len(cfg.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("%d diff_ids for %d layers", len(cfg.RootFS.DiffIDs), len(m.Layers))
	}
	var layers []baseindex.Layer
	for i, l := range m.Layers {
		blob := ocilayout.BlobPath(dir, l.Digest.String())
		layers = append(layers, baseindex.Layer{
			Digest: l.Digest, MediaType: l.MediaType, Size: l.Size, DiffID: cfg.RootFS.DiffIDs[i],
			Open: func(context.Context) (io.ReadCloser, error) { return os.Open(blob) },
		})
	}
	return layers, nil
}
