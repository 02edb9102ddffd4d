package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/tool/image"
)

// AllPlatforms, alone in ImageOptions.Platforms, builds every platform the
// base's image list names.
const AllPlatforms = "all"

// multiPlatform builds one image per platform and writes them under one
// image list (an OCI image index). Each platform's base is opened and
// indexed on its own, and stays open until the list is written.
func multiPlatform(ctx context.Context, opts ImageOptions) (_ *Result, err error) {
	if err := opts.loadMachineConfigs(); err != nil {
		return nil, err
	}
	platforms, err := opts.platforms(ctx)
	if err != nil {
		return nil, err
	}
	tmpDir, err := atomicdir.MkdirTemp("", "mcbake-build-")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tmpDir.RemoveAll()) }()
	tmp := tmpDir.Path
	res := &Result{}
	var entries []image.PlatformImage
	var bases []*image.Base
	defer func() {
		for _, b := range bases {
			err = errors.Join(err, b.Close())
		}
	}()
	for i, pl := range platforms {
		o := opts
		o.Images.Platform = pl
		o.SharedIndex.Later = true // published once the index is written
		bo := o.baseOptions()
		bo.MountInto = opts.Output
		b, err := image.OpenBase(ctx, opts.Base, bo)
		if err != nil {
			return nil, err
		}
		bases = append(bases, b)
		dir := filepath.Join(tmp, strconv.Itoa(i))
		if err := os.Mkdir(dir, 0o700); err != nil {
			return nil, err
		}
		p, ao, err := prepareAppend(ctx, b, o, dir, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pl, err)
		}
		entries = append(entries, image.PlatformImage{Base: b.Image, Append: ao})
		res.Platforms = append(res.Platforms, PlatformResult{Platform: pl, Manifest: p.Manifest, ManifestDigest: digest.FromBytes(p.ManifestJSON)})
	}
	if res.Digest, err = image.AppendPlatforms(ctx, entries, opts.Output, nil, opts.PushProgress, opts.Images); err != nil {
		return nil, err
	}
	for _, b := range bases {
		b.PublishIndex(ctx)
	}
	res.Manifest, res.ManifestDigest = res.Platforms[0].Manifest, res.Platforms[0].ManifestDigest
	return res, nil
}

// platforms resolves ImageOptions.Platforms: AllPlatforms lists the base's.
func (o ImageOptions) platforms(ctx context.Context) ([]string, error) {
	if len(o.Platforms) != 1 || o.Platforms[0] != AllPlatforms {
		return o.Platforms, nil
	}
	ps, err := image.Platforms(ctx, o.Base, o.Images)
	if err != nil {
		return nil, err
	}
	if len(ps) == 0 {
		return nil, fmt.Errorf("%s lists no platforms", o.Base)
	}
	return ps, nil
}
