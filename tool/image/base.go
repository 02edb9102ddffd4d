package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/baseindex"
)

// BaseOptions say how to open and index a base image.
type BaseOptions struct {
	Images Options
	// CacheDir holds the index cache ("" = no cache).
	CacheDir string
	// Progress, when set, is told of the bytes read from each layer.
	Progress func(layer string, total, n int64)
	// Fallback, when set, is told why a layer's table of contents or
	// tar-split could not be used and its blob is read instead; when nil,
	// that is logged at debug level.
	Fallback func(layer string, err error)
	// Read, when set, is told how each layer the cache did not hold was
	// read: "toc", "tar-split" or "blob".
	Read func(layer string, how string)
}

// Base is an opened, indexed base image.
type Base struct {
	*Image
	Index *baseindex.Index
}

// Tree is the base's merged filesystem as fstree.Tree: what the renderer,
// the base-state comparison and revert prediction read.
func (b *Base) Tree() fstree.Tree { return b.Index.Tree() }

// OpenBaseWhile opens the base ref in a goroutine while work runs on
// the calling one, which starts it at once (docs/design.md, The warm
// path): a build loads its MachineConfigs, a diff reads the layered
// image's manifest. An error of work cancels the opening and is the one
// returned, the base closed if it opened, as when they ran one after the
// other. The caller calls release once it has closed the base: the index
// keeps the context it was opened with, which stops a rebuild of a
// damaged cached view when ctx is cancelled, and must not be cancelled
// before.
func OpenBaseWhile(ctx context.Context, ref string, opts BaseOptions, work func() error) (_ *Base, release func(), _ error) {
	ctx, cancel := context.WithCancelCause(ctx)
	var b *Base
	var err error
	opened := make(chan struct{})
	go func() {
		defer close(opened)
		b, err = OpenBase(ctx, ref, opts)
	}()
	werr := work()
	if werr != nil {
		cancel(werr)
	}
	<-opened
	if werr != nil {
		if b != nil {
			werr = errors.Join(werr, b.Close())
		}
		cancel(nil)
		return nil, nil, werr
	}
	if err != nil {
		cancel(nil)
		return nil, nil, err
	}
	return b, func() { cancel(nil) }, nil
}

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

// IndexLayers indexes an opened image's layers (docs/design.md, "Indexing
// a base"): from a zstd:chunked or eStargz layer's table of contents, a
// containers-storage layer's tar-split and unpacked files, or else the
// blob. The index reads a containers-storage image's unpacked files for
// deferred digests as long as im is open.
func IndexLayers(ctx context.Context, im *Image, opts BaseOptions) (*baseindex.Index, error) {
	sizes := map[digest.Digest]int64{}
	for _, l := range im.Layers() {
		sizes[l.Digest] = l.Size
	}
	bo := baseindex.Options{CacheDir: opts.CacheDir, Fallback: func(d digest.Digest, err error) {
		slog.Debug("reading the layer's blob", "layer", d, "reason", err)
	}}
	if opts.Progress != nil {
		bo.Progress = func(d digest.Digest, n int64) { opts.Progress(d.String(), sizes[d], n) }
	}
	if opts.Fallback != nil {
		bo.Fallback = func(d digest.Digest, err error) { opts.Fallback(d.String(), err) }
	}
	if opts.Read != nil {
		bo.Read = func(d digest.Digest, how string) { opts.Read(d.String(), how) }
	}
	return baseindex.Build(ctx, im.indexLayers(), bo)
}
