package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/internal/base"
	"github.com/mcbake/mcbake/internal/buildahengine"
	"github.com/mcbake/mcbake/internal/layered"
)

// Buildah builds the layered image with the buildah engine: it renders
// the build context of WriteContext (with the instructions of the file
// containerfileAppend, "" = none, at the end of the Containerfile) into a
// temporary directory and builds it with buildah's library into
// opts.Output. The owned files are the append engine's; the base's layers
// are reused, and the new layer holds what the Containerfile changed.
//
// buildah's store is under opts.CacheDir (else $XDG_CACHE_HOME/mcbake)
// unless opts.Images names a store or the base or the output is in
// containers-storage, where the configured store is used.
func Buildah(ctx context.Context, opts Options, containerfileAppend string) (_ *Result, err error) {
	p, diffIDs, err := prepareBase(ctx, opts)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "mcbake-buildah-")
	if err != nil {
		return nil, err
	}
	// The context can hold directories without u+w (modes from the
	// MachineConfigs or the base): RemoveTree removes them as non-root too.
	defer func() { err = errors.Join(err, atomicdir.RemoveTree(tmp)) }()
	dir := filepath.Join(tmp, "context")
	if err := WriteContext(dir, p, containerfileAppend); err != nil {
		return nil, fmt.Errorf("writing the build context: %w", err)
	}
	eo, err := engineOptions(opts, p)
	if err != nil {
		return nil, err
	}
	eo.BaseDiffIDs = diffIDs
	dgst, err := buildahengine.Build(ctx, dir, eo)
	if err != nil {
		return nil, fmt.Errorf("building %s with buildah: %w", opts.Output, err)
	}
	return &Result{Digest: dgst, Manifest: p.Manifest, ManifestDigest: layered.Digest(p.ManifestJSON)}, nil
}

// RenderOnly is `mcbake build --render-only`: it renders the
// MachineConfigs against opts.Base and writes the build context of
// WriteContext into the directory opts.Output (not an image reference),
// for buildah, podman, OpenShift Builds or Konflux to build.
func RenderOnly(ctx context.Context, opts Options, containerfileAppend string) (*Prepared, error) {
	p, _, err := prepareBase(ctx, opts)
	if err != nil {
		return nil, err
	}
	if err := WriteContext(opts.Output, p, containerfileAppend); err != nil {
		return nil, fmt.Errorf("writing the build context %s: %w", opts.Output, err)
	}
	return p, nil
}

// prepareBase opens, indexes and closes the base (buildah opens it again,
// possibly in the same store) and renders against it. It also returns the
// base's diff IDs, which the built image must start with.
func prepareBase(ctx context.Context, opts Options) (p *Prepared, diffIDs []digest.Digest, err error) {
	b, err := base.Open(ctx, opts.Base, opts.baseOptions())
	if err != nil {
		return nil, nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	for _, l := range b.Layers() {
		diffIDs = append(diffIDs, l.DiffID)
	}
	p, err = Prepare(b, opts)
	return p, diffIDs, err
}

// engineOptions turns build options into the buildah engine's.
func engineOptions(opts Options, p *Prepared) (buildahengine.Options, error) {
	cache := opts.CacheDir
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return buildahengine.Options{}, fmt.Errorf("choosing a directory for buildah's store (set the cache directory): %w", err)
		}
		cache = filepath.Join(dir, "mcbake")
	}
	return buildahengine.Options{
		Output:      opts.Output,
		Images:      opts.Images,
		Store:       engineStore(opts, cache),
		BlobDir:     filepath.Join(cache, "buildah", "blobs"),
		Timestamp:   mtime(opts.Timestamp),
		Compression: opts.Compression,
		Annotations: p.Annotations(),
	}, nil
}

// engineStore is the store the user named, the configured one when the
// base or the output is in containers-storage, else one under cache.
func engineStore(opts Options, cache string) buildahengine.Store {
	im := opts.Images
	if im.StorageRoot != "" || im.StorageRunRoot != "" || im.StorageDriver != "" {
		return buildahengine.Store{Root: im.StorageRoot, RunRoot: im.StorageRunRoot, Driver: im.StorageDriver}
	}
	const storage = "containers-storage:"
	if strings.HasPrefix(opts.Base, storage) || strings.HasPrefix(opts.Output, storage) {
		return buildahengine.Store{}
	}
	return buildahengine.Store{Root: filepath.Join(cache, "buildah", "storage")}
}
