// Package diff predicts what a revert to the base does to an image's owned paths.
//
// It is the image half of mcbake diff and plan: it reads the layered
// image's manifest (or derives the owned paths of an image built by
// others) and the base's index, and calls the library's prediction.
package diff

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/image"
)

// Options name the layered image (or its manifest file) and the base
// a node would revert to.
type Options struct {
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
	// Skipped is told of the objects of other kinds skipped in a
	// directory (machineconfig.LoadOptions.Skipped).
	Skipped func(*machineconfig.FieldError)
	// Pool is the MachineConfigPool they are merged for ("" = inferred
	// from their role labels, see machineconfig.ForPool).
	Pool   string
	Images image.Options
	// CacheDir holds the index cache and the cache of layered images'
	// manifests ("" = none).
	CacheDir string
	// Progress, when set, is told of the bytes read from each base layer.
	Progress func(layer string, total, n int64)
	// SharedIndex says where the base's index is published and read
	// from (image.SharedIndex); the layered image's is not.
	SharedIndex image.SharedIndex
}

// ErrImageOrManifest is returned by Run unless exactly one of the
// layered image and its manifest file is given.
var ErrImageOrManifest = errors.New("give exactly one of the layered image and its manifest file")

// Run reads the layered image's ownership manifest (from the image or
// the file), opens and indexes the base, and predicts the revert with
// revert.Diff. An image without a manifest (built by others) needs
// MachineConfigs: the error then wraps image.ErrNotLayered.
func Run(ctx context.Context, o Options) (_ *revert.Report, err error) {
	if (o.Image == "") == (o.ManifestFile == "") {
		return nil, ErrImageOrManifest
	}
	in, err := openInputs(ctx, o)
	if err != nil {
		return nil, err
	}
	b := in.base
	defer func() { err = errors.Join(err, b.Close()) }()
	if in.derived {
		return diffDerived(ctx, o, b.ID(), b.Tree())
	}
	return revert.Diff(ctx, in.m, in.ref, b.ID(), b.Tree())
}

// diffInputs are what Run compares: the layered image's manifest and
// the base.
type diffInputs struct {
	m   *manifest.Manifest
	ref manifest.ImageRef
	// derived is set for an image without a manifest, given
	// MachineConfigs: the owned paths are derived from them.
	derived bool
	base    *image.Base
}

// openInputs opens the base while the layered image's manifest is read
// (image.OpenBaseWhile): neither needs the other, and a
// containers-storage store they share is loaded once. An error reading
// the manifest (or the MachineConfigs it is compared with) cancels the
// opening and is the one returned, as when they ran one after the
// other.
func openInputs(ctx context.Context, o Options) (in diffInputs, err error) {
	// The image may be read and closed before the goroutine opens the base.
	defer image.HoldStore(o.Base, o.Images)()
	in.base, err = image.OpenBaseWhile(ctx, o.Base, o.sharedBaseOptions(), func() error { return in.readManifest(ctx, o) })
	if err != nil {
		return diffInputs{}, err
	}
	return in, nil
}

// readManifest reads the layered image's manifest, and warns of each
// difference from the MachineConfigs given; an image without one, given
// MachineConfigs, is derived.
func (in *diffInputs) readManifest(ctx context.Context, o Options) error {
	m, ref, err := layeredManifest(ctx, o)
	in.derived = errors.Is(err, image.ErrNotLayered) && len(o.MachineConfigs) > 0
	if err != nil && !in.derived {
		return err
	}
	in.m, in.ref = m, ref
	if !in.derived && len(o.MachineConfigs) > 0 {
		return warnOtherMachineConfigs(m, o)
	}
	return nil
}

// warnOtherMachineConfigs reads the MachineConfigs given for an image
// with a manifest and logs a warning for each difference from those the
// manifest records, which the prediction follows.
func warnOtherMachineConfigs(m *manifest.Manifest, o Options) error {
	mcs, err := o.load()
	if err != nil {
		return err
	}
	of := o.Image
	if of == "" {
		of = o.ManifestFile
	}
	for _, d := range revert.Staleness(m, mcs) {
		msg := d.Message + " (" + of + " records its own MachineConfigs, which the prediction follows)"
		if d.Source.File != "" {
			msg = d.Source.File + ": " + msg
		}
		slog.Warn(msg)
	}
	return nil
}

// load reads the MachineConfigs given, for the pool, remembering the
// Ignition configs that parse cleanly in the cache directory.
func (o Options) load() ([]*machineconfig.MachineConfig, error) {
	return machineconfig.LoadWith(o.MachineConfigs, o.Stdin, machineconfig.LoadOptions{Pool: o.Pool, CacheDir: o.CacheDir, Skipped: o.Skipped})
}

func (o Options) baseOptions() image.BaseOptions {
	return image.BaseOptions{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress}
}

// sharedBaseOptions are the options of the base: baseOptions with the
// shared index.
func (o Options) sharedBaseOptions() image.BaseOptions {
	bo := o.baseOptions()
	bo.Shared = o.SharedIndex
	return bo
}

// diffDerived predicts the revert of an image without an ownership
// manifest: the MachineConfigs rendered against the image's own tree
// (indexed from its layers) are what the node owns (see revert.Derive).
func diffDerived(ctx context.Context, o Options, base manifest.ImageRef, tree fstree.Tree) (_ *revert.Report, err error) {
	mcs, err := o.load()
	if err != nil {
		return nil, err
	}
	l, err := image.OpenBase(ctx, o.Image, o.baseOptions())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, l.Close()) }()
	owned, err := revert.Derive(ctx, machineconfig.Merge(mcs), l.Tree(), tree)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", o.Image, err)
	}
	return revert.DiffDerived(ctx, owned, l.ID(), base, l.Tree(), tree)
}

func layeredManifest(ctx context.Context, o Options) (*manifest.Manifest, manifest.ImageRef, error) {
	if o.ManifestFile != "" {
		m, err := manifest.ReadFile(o.ManifestFile)
		return m, manifest.ImageRef{Reference: o.ManifestFile}, err
	}
	m, _, id, err := image.ManifestOf(ctx, o.Image, o.Images, o.CacheDir)
	return m, id, err
}
