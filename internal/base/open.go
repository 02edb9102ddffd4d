package base

import (
	"context"
	"fmt"
	"io"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/images"
)

// Options say how to open and index a base image.
type Options struct {
	Images images.Options
	// CacheDir holds the index cache ("" = no cache).
	CacheDir string
	// Progress, when set, is told of the bytes read from each layer.
	Progress func(layer string, total, n int64)
}

// Image is an opened, indexed base image.
type Image struct {
	*images.Image
	Index *baseindex.Index
}

// Open opens ref and indexes its layers (or reads the cached index). The
// caller closes the Image.
func Open(ctx context.Context, ref string, opts Options) (*Image, error) {
	im, err := images.Open(ctx, ref, opts.Images)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", ref, err)
	}
	ix, err := Index(ctx, im, opts)
	if err != nil {
		im.Close()
		return nil, fmt.Errorf("indexing %s: %w", ref, err)
	}
	return &Image{Image: im, Index: ix}, nil
}

// Index indexes an opened image's layers.
func Index(ctx context.Context, im *images.Image, opts Options) (*baseindex.Index, error) {
	var layers []baseindex.Layer
	sizes := map[digest.Digest]int64{}
	for _, l := range im.Layers() {
		l := l
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
