package image

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/render"
)

// BaseOptions say how to open and index a base image.
type BaseOptions struct {
	Images Options
	// CacheDir holds the index cache ("" = no cache).
	CacheDir string
	// Progress, when set, is told of the bytes read from each layer.
	Progress func(layer string, total, n int64)
}

// Base is an opened, indexed base image.
type Base struct {
	*Image
	Index *baseindex.Index
}

// Tree is the base's merged filesystem as render.Root: what the renderer,
// the base-state comparison and revert prediction read.
func (b *Base) Tree() render.Root { return baseindex.Root{Index: b.Index} }

// OpenBase opens ref and indexes its layers (or reads the cached index).
// The caller closes the Base.
func OpenBase(ctx context.Context, ref string, opts BaseOptions) (*Base, error) {
	im, err := Open(ctx, ref, opts.Images)
	if err != nil {
		return nil, err // Open names ref
	}
	ix, err := IndexLayers(ctx, im, opts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("indexing %s: %w", ref, err), im.Close())
	}
	return &Base{Image: im, Index: ix}, nil
}

// IndexLayers indexes an opened image's layers.
func IndexLayers(ctx context.Context, im *Image, opts BaseOptions) (*baseindex.Index, error) {
	var layers []baseindex.Layer
	sizes := map[digest.Digest]int64{}
	for _, l := range im.Layers() {
		sizes[l.Digest] = l.Size
		layers = append(layers, baseindex.Layer{Digest: l.Digest, MediaType: l.MediaType, Size: l.Size,
			Open: func(ctx context.Context) (io.ReadCloser, error) { return im.OpenLayer(ctx, l.Digest) }})
	}
	bo := baseindex.Options{CacheDir: opts.CacheDir}
	if opts.Progress != nil {
		bo.Progress = func(d digest.Digest, n int64) { opts.Progress(d.String(), sizes[d], n) }
	}
	return baseindex.Build(ctx, layers, bo)
}
