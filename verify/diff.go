package verify

import (
	"context"
	"errors"

	"github.com/mcbake/mcbake/image"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
)

// DiffOptions name the layered image (or its manifest file) and the base
// a node would revert to.
type DiffOptions struct {
	Base string
	// Exactly one of Image (a layered image reference) and ManifestFile.
	Image, ManifestFile string
	Images              image.Options
	CacheDir            string
	// Progress, when set, is told of the bytes read from each base layer.
	Progress func(layer string, total, n int64)
}

// ErrImageOrManifest is returned by Diff unless exactly one of the
// layered image and its manifest file is given.
var ErrImageOrManifest = errors.New("give exactly one of the layered image and its manifest file")

// Diff reads the layered image's ownership manifest (from the image or
// the file), opens and indexes the base, and predicts the revert with
// revert.Diff.
func Diff(ctx context.Context, o DiffOptions) (_ *revert.Report, err error) {
	if (o.Image == "") == (o.ManifestFile == "") {
		return nil, ErrImageOrManifest
	}
	m, ref, err := layeredManifest(ctx, o)
	if err != nil {
		return nil, err
	}
	b, err := image.OpenBase(ctx, o.Base, image.BaseOptions{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	return revert.Diff(m, ref, imageRef(o.Base, b.ID()), b.Tree())
}

func layeredManifest(ctx context.Context, o DiffOptions) (*manifest.Manifest, revert.ImageRef, error) {
	if o.ManifestFile != "" {
		m, err := manifest.ReadFile(o.ManifestFile)
		return m, revert.ImageRef{Reference: o.ManifestFile}, err
	}
	m, _, id, err := image.ManifestOf(ctx, o.Image, o.Images)
	return m, imageRef(o.Image, id), err
}

func imageRef(ref string, id image.ID) revert.ImageRef {
	return revert.ImageRef{Reference: ref, Digest: id.Digest, Config: id.Config, DiffIDs: id.DiffIDs}
}
