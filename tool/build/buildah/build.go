package buildah

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/image"
)

// Engine is the buildah engine as a build.Engine: it writes the build
// context of build.WriteContext (with ContainerfileAppend's instructions
// at the end of the Containerfile) into a temporary directory
// and builds it with buildah's library into opts.Output. The owned files
// are the append engine's; the base's layers are reused, and the new layer
// holds what the Containerfile changed.
//
// buildah's store is under opts.CacheDir (else $XDG_CACHE_HOME/mcbake)
// unless opts.Images names a store or the base or the output is in
// containers-storage, where the configured store is used.
type Engine struct {
	// ContainerfileAppend is a file of extra Containerfile instructions
	// (RPM installs, say) that ends the Containerfile ("" = none).
	ContainerfileAppend string
}

// Build implements build.Engine.
func (e Engine) Build(ctx context.Context, p *build.Prepared, opts build.ImageOptions) (_ digest.Digest, err error) {
	tmpDir, err := atomicdir.MkdirTemp("", "mcbake-buildah-")
	if err != nil {
		return "", err
	}
	// The context can hold directories without u+w (modes from the
	// MachineConfigs or the base): RemoveAll removes them as non-root too.
	defer func() { err = errors.Join(err, tmpDir.RemoveAll()) }()
	tmp := tmpDir.Path
	dir := filepath.Join(tmp, "context")
	if err := build.WriteContext(dir, p, e.ContainerfileAppend); err != nil {
		return "", fmt.Errorf("writing the build context: %w", err)
	}
	eo, err := engineOptions(opts, p)
	if err != nil {
		return "", err
	}
	dgst, err := Build(ctx, dir, eo)
	if err != nil {
		return "", fmt.Errorf("building %s with buildah: %w", opts.Output, err)
	}
	return dgst, nil
}

// engineOptions turns build options into the buildah engine's.
func engineOptions(opts build.ImageOptions, p *build.Prepared) (Options, error) {
	cache := opts.CacheDir
	if cache == "" {
		dir, err := os.UserCacheDir()
		if err != nil {
			return Options{}, fmt.Errorf("choosing a directory for buildah's store (set the cache directory): %w", err)
		}
		cache = filepath.Join(dir, "mcbake")
	}
	return Options{
		Output:      opts.Output,
		Images:      opts.Images,
		Store:       engineStore(opts, cache),
		BlobDir:     filepath.Join(cache, "buildah", "blobs"),
		Timestamp:   p.Time,
		Compression: opts.Compression,
		Annotations: p.Annotations(),
		BaseDiffIDs: p.BaseDiffIDs,
	}, nil
}

// engineStore is the store the user named, the configured one when the
// base or the output is in containers-storage, else one under cache.
func engineStore(opts build.ImageOptions, cache string) image.Store {
	im := opts.Images
	if im.StorageRoot != "" || im.StorageRunRoot != "" || im.StorageDriver != "" {
		return image.Store{Root: im.StorageRoot, RunRoot: im.StorageRunRoot, Driver: im.StorageDriver}
	}
	const storage = "containers-storage:"
	if strings.HasPrefix(opts.Base, storage) || strings.HasPrefix(opts.Output, storage) {
		return image.Store{}
	}
	return image.Store{Root: filepath.Join(cache, "buildah", "storage")}
}
