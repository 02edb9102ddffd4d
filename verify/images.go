package verify

import (
	"context"
	"errors"
	"fmt"

	"github.com/mcbake/mcbake/internal/base"
	"github.com/mcbake/mcbake/internal/images"
	"github.com/mcbake/mcbake/internal/layered"
	"github.com/mcbake/mcbake/internal/manifest"
)

// DiffOptions name the layered image (or its manifest file) and the base
// a node would revert to.
type DiffOptions struct {
	Base string
	// Exactly one of Image (a layered image reference) and ManifestFile.
	Image, ManifestFile string
	Images              images.Options
	CacheDir            string
	// Progress, when set, is told of the bytes read from each base layer.
	Progress func(layer string, total, n int64)
}

// DiffImages reads the layered image's ownership manifest (from the image
// or the file), opens and indexes the base, and runs Diff.
func DiffImages(ctx context.Context, o DiffOptions) (*Report, error) {
	if (o.Image == "") == (o.ManifestFile == "") {
		return nil, errors.New("give exactly one of --image IMAGE or --manifest FILE")
	}
	m, image, err := layeredManifest(ctx, o)
	if err != nil {
		return nil, err
	}
	b, err := base.Open(ctx, o.Base, base.Options{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress})
	if err != nil {
		return nil, err
	}
	defer b.Close()
	return Diff(m, image, ImageRef{Reference: o.Base, Digest: b.Digest().String()}, b.Index), nil
}

func layeredManifest(ctx context.Context, o DiffOptions) (*manifest.Manifest, ImageRef, error) {
	if o.ManifestFile != "" {
		m, err := manifest.ReadFile(o.ManifestFile)
		return m, ImageRef{Reference: o.ManifestFile}, err
	}
	m, _, dgst, err := ReadEmbedded(ctx, o.Image, o.Images)
	return m, ImageRef{Reference: o.Image, Digest: dgst}, err
}

// ReadEmbedded opens a layered image and reads its embedded ownership
// manifest (checked against its label); it also returns the manifest's
// raw bytes and the image's digest.
func ReadEmbedded(ctx context.Context, ref string, opts images.Options) (_ *manifest.Manifest, _ []byte, digest string, err error) {
	im, err := images.Open(ctx, ref, opts)
	if err != nil {
		return nil, nil, "", fmt.Errorf("opening %s: %w", ref, err)
	}
	defer func() { err = errors.Join(err, im.Close()) }()
	m, raw, err := layered.ReadManifest(ctx, im)
	if err != nil {
		return nil, nil, "", fmt.Errorf("%s: %w", ref, err)
	}
	return m, raw, im.Digest().String(), nil
}
