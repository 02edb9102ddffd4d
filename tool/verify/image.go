package verify

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/opencontainers/go-digest"
)

// maxManifest bounds the embedded manifest read from the layer.
const maxManifest = 64 << 20

// imageInput is what verify reads of a layered image.
type imageInput struct {
	ref    string
	digest digest.Digest
	// isBase is set when the image is the base (same digest): nothing else
	// is read then.
	isBase bool
	labels map[string]string
	layer  *layerScan
	// guard is the revert guard's layer under the top layer, when the
	// image's history names one (guardLayer).
	guard *layerScan
	// manifest is the embedded manifest when it was found and decoded.
	manifest *manifest.Manifest
	// builtByOthers is set for an image without mcbake's manifest label
	// (the MCO's on-cluster build, a Containerfile running
	// ignition-apply); tree is then its indexed filesystem, from which
	// revert analysis reads its defaults.
	builtByOthers bool
	tree          fstree.Tree
	// close closes the image tree reads (nil when there is none): the
	// index of a containers-storage image reads its unpacked files for
	// deferred digests.
	close func() error
}

// closeImage closes what in keeps open.
func (in *imageInput) closeImage() error {
	if in == nil || in.close == nil {
		return nil
	}
	return in.close()
}

// layerScan is a layer's content: every entry by absolute path
// (whiteouts as Absent entries at the path they remove), and the embedded
// manifest's bytes, nil when absent.
type layerScan struct {
	entries  map[string]manifest.Entry
	manifest []byte
}

// readImage opens a layered image and reads its labels and top layer. An
// image with the base's digest is only marked as such; an image without
// mcbake's manifest label is marked built by others and its layers are
// indexed.
func readImage(ctx context.Context, ref string, opts image.BaseOptions, baseDigest digest.Digest) (_ *imageInput, err error) {
	im, err := image.Open(ctx, ref, opts.Images)
	if err != nil {
		return nil, err // image.Open names ref
	}
	in := &imageInput{ref: ref, digest: im.Digest(), labels: im.Labels()}
	defer func() {
		if in.close == nil || err != nil {
			err = errors.Join(err, im.Close())
		}
	}()
	if in.digest == baseDigest {
		in.isBase = true
		return in, nil
	}
	if in.labels[image.LabelManifestDigest] == "" {
		ix, err := image.IndexLayers(ctx, im, opts)
		if err != nil {
			return nil, fmt.Errorf("indexing %s: %w", ref, err)
		}
		in.builtByOthers, in.tree, in.close = true, ix.Tree(), im.Close
		return in, nil
	}
	layers := im.Layers()
	if len(layers) == 0 {
		return nil, fmt.Errorf("%s: image has no layers", ref)
	}
	if in.layer, err = readLayer(ctx, im, layers[len(layers)-1].Digest); err != nil {
		return nil, fmt.Errorf("%s: reading the top layer: %w", ref, err)
	}
	if i := guardLayer(im); i >= 0 {
		if in.guard, err = readLayer(ctx, im, layers[i].Digest); err != nil {
			return nil, fmt.Errorf("%s: reading the revert guard's layer: %w", ref, err)
		}
	}
	return in, nil
}

// guardLayer returns the index of im's revert guard layer, the one under
// the top layer whose history entry is guard.LayerHistory (mcbake build
// puts the guard's files there), or -1 when it has none. A build appends
// a history entry for each layer it adds, so the last entries are its
// layers' even when the base's history is incomplete.
func guardLayer(im *image.Image) int {
	var created []string // of the layers, the last ones at least
	for _, h := range im.Config().History {
		if !h.EmptyLayer {
			created = append(created, h.CreatedBy)
		}
	}
	n, c := len(im.Layers()), len(created)
	if n < 2 || c < 2 || created[c-2] != guard.LayerHistory {
		return -1
	}
	return n - 2
}

func readLayer(ctx context.Context, im *image.Image, d digest.Digest) (_ *layerScan, err error) {
	rc, err := im.OpenLayer(ctx, d)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	return scanLayer(rc)
}

// scanLayer reads a (compressed) layer: every entry's metadata and content
// digest, and the embedded manifest's bytes.
func scanLayer(r io.Reader) (_ *layerScan, err error) {
	dr, err := decompress.Reader(r)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, dr.Close()) }()
	s := &layerScan{entries: map[string]manifest.Entry{}}
	isManifest := func(p string) bool { return p == image.ManifestPath }
	err = baseindex.Walk(dr, isManifest, maxManifest, func(e manifest.Entry, content []byte) error {
		if isManifest(e.Path) && e.Type == manifest.File {
			s.manifest = content
		}
		s.entries[e.Path] = e
		return nil
	})
	return s, err
}
