package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/image"
)

// DiffOptions name the layered image (or its manifest file) and the base
// a node would revert to.
type DiffOptions struct {
	Base string
	// Exactly one of Image (a layered image reference) and ManifestFile.
	Image, ManifestFile string
	// MachineConfigs (files, directories or "-" for Stdin, as for
	// machineconfig.Load) are what the node runs. When Image has no
	// ownership manifest (an image built by others), the owned paths are
	// derived from them (revert.DiffDerived); when the image or the file
	// has one, the prediction follows the manifest, and each difference
	// from the MachineConfigs it records is logged as a warning (the
	// digests differ for the same MachineConfig fetched from a cluster,
	// which adds its own metadata).
	MachineConfigs []string
	Stdin          io.Reader
	// Pool is the MachineConfigPool they are merged for ("" = inferred
	// from their role labels, see machineconfig.ForPool).
	Pool   string
	Images image.Options
	// CacheDir holds the index cache and the cache of layered images'
	// manifests ("" = none).
	CacheDir string
	// Progress, when set, is told of the bytes read from each base layer.
	Progress func(layer string, total, n int64)
}

// ErrImageOrManifest is returned by Diff unless exactly one of the
// layered image and its manifest file is given.
var ErrImageOrManifest = errors.New("give exactly one of the layered image and its manifest file")

// Diff reads the layered image's ownership manifest (from the image or
// the file), opens and indexes the base, and predicts the revert with
// revert.Diff. An image without a manifest (built by others) needs
// MachineConfigs: the error then wraps image.ErrNotLayered.
func Diff(ctx context.Context, o DiffOptions) (_ *revert.Report, err error) {
	if (o.Image == "") == (o.ManifestFile == "") {
		return nil, ErrImageOrManifest
	}
	m, ref, err := layeredManifest(ctx, o)
	derived := errors.Is(err, image.ErrNotLayered) && len(o.MachineConfigs) > 0
	if err != nil && !derived {
		return nil, err
	}
	if !derived && len(o.MachineConfigs) > 0 {
		if err := warnOtherMachineConfigs(m, o); err != nil {
			return nil, err
		}
	}
	b, err := image.OpenBase(ctx, o.Base, o.baseOptions())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	if derived {
		return diffDerived(ctx, o, imageRef(o.Base, b.ID()), b.Tree())
	}
	return revert.Diff(m, ref, imageRef(o.Base, b.ID()), b.Tree())
}

// warnOtherMachineConfigs reads the MachineConfigs given for an image
// with a manifest and logs a warning for each difference from those the
// manifest records, which the prediction follows.
func warnOtherMachineConfigs(m *manifest.Manifest, o DiffOptions) error {
	mcs, err := o.load()
	if err != nil {
		return err
	}
	of := o.Image
	if of == "" {
		of = o.ManifestFile
	}
	for _, d := range staleness(m, mcs) {
		msg := d.msg + " (" + of + " records its own MachineConfigs, which the prediction follows)"
		if d.src.File != "" {
			msg = d.src.File + ": " + msg
		}
		slog.Warn(msg, "rule", RuleStaleImage)
	}
	return nil
}

// load reads the MachineConfigs given, for the pool, remembering the
// Ignition configs that parse cleanly in the cache directory.
func (o DiffOptions) load() ([]*machineconfig.MachineConfig, error) {
	return machineconfig.LoadWith(o.MachineConfigs, o.Stdin, machineconfig.LoadOptions{Pool: o.Pool, CacheDir: o.CacheDir})
}

func (o DiffOptions) baseOptions() image.BaseOptions {
	return image.BaseOptions{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress}
}

// diffDerived predicts the revert of an image without an ownership
// manifest: the MachineConfigs rendered against the image's own tree
// (indexed from its layers) are what the node owns (see derive).
func diffDerived(ctx context.Context, o DiffOptions, base revert.ImageRef, tree render.Root) (_ *revert.Report, err error) {
	mcs, err := o.load()
	if err != nil {
		return nil, err
	}
	l, err := image.OpenBase(ctx, o.Image, o.baseOptions())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	owned, err := derive(machineconfig.Merge(mcs), l.Tree(), tree)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Image, err)
	}
	return revert.DiffDerived(owned, imageRef(o.Image, l.ID()), base, l.Tree(), tree)
}

func layeredManifest(ctx context.Context, o DiffOptions) (*manifest.Manifest, revert.ImageRef, error) {
	if o.ManifestFile != "" {
		m, err := manifest.ReadFile(o.ManifestFile)
		return m, revert.ImageRef{Reference: o.ManifestFile}, err
	}
	m, _, id, err := image.ManifestOf(ctx, o.Image, o.Images, o.CacheDir)
	return m, imageRef(o.Image, id), err
}

func imageRef(ref string, id image.ID) revert.ImageRef {
	return revert.ImageRef{Reference: ref, Digest: id.Digest, Config: id.Config, DiffIDs: id.DiffIDs}
}
