// Package baseindex indexes a base OS image's final filesystem metadata
// without extracting it: it streams each layer blob once, checks its
// digest, decompresses it (gzip, zstd or none), reads its tar stream and
// merges the layers by the OCI whiteout rules into an Index of every
// path's type, mode, owner, size, symlink target and content digest. It
// keeps the content of the few files rendering needs (passwd, group,
// systemd presets and units), resolves paths through the image's own
// symlinks, and caches each layer's entries on disk by digest so that a
// second build reads no layer.
package baseindex

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"runtime"

	digest "github.com/opencontainers/go-digest"
	"golang.org/x/sync/errgroup"
)

// Layer is one layer blob of an image, bottom layer first in Build's list.
type Layer struct {
	// Digest is the digest of the compressed blob, checked while reading.
	Digest digest.Digest
	// MediaType is the descriptor's media type: an OCI or Docker layer
	// type, or "". The compression is detected from the magic bytes.
	MediaType string
	// Size is the compressed blob's size, checked when it is not 0.
	Size int64
	// Open returns the compressed blob. Build closes it. It is not called
	// when the layer's index is cached.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// Options tunes Build.
type Options struct {
	// CacheDir holds the per-layer index cache, under
	// CacheDir/layers/<algorithm>/<hex>; "" disables the cache. Commands
	// pass $XDG_CACHE_HOME/mcbake.
	CacheDir string
	// Progress, if set, is called with the count of compressed bytes read
	// so far of a layer. It is called from several goroutines at once.
	Progress func(layer digest.Digest, n int64)
}

// Build indexes layers, bottom layer first. It reads up to GOMAXPROCS
// layers at a time, each to its end, and fails if a blob does not match
// its digest or is not a valid compressed tar stream. Cached layers are
// not opened. Concurrent Builds may share a CacheDir.
func Build(ctx context.Context, layers []Layer, opts Options) (*Index, error) {
	data := make([][]Node, len(layers))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, l := range layers {
		g.Go(func() error {
			entries, err := loadLayer(gctx, l, opts)
			if err != nil {
				return fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			data[i] = entries
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return merge(layers, data)
}

// loadLayer returns a layer's entries from the cache, or scans the blob
// and caches them.
func loadLayer(ctx context.Context, l Layer, opts Options) ([]Node, error) {
	if err := l.Digest.Validate(); err != nil {
		return nil, err
	}
	var cached string
	if opts.CacheDir != "" {
		cached = filepath.Join(opts.CacheDir, "layers", l.Digest.Algorithm().String(), l.Digest.Encoded())
		if entries, ok := readCache(cached, l.Digest); ok {
			return entries, nil
		}
	}
	entries, err := scanLayer(ctx, l, opts.Progress)
	if err != nil {
		return nil, err
	}
	if cached != "" {
		if err := writeCache(cached, l.Digest, entries); err != nil {
			return nil, fmt.Errorf("writing index cache: %w", err)
		}
	}
	return entries, nil
}

// merge applies the layers' entries in order.
func merge(layers []Layer, data [][]Node) (*Index, error) {
	size := 0
	for _, entries := range data {
		size += len(entries)
	}
	ix := newIndex(size)
	for i, entries := range data {
		if err := ix.apply(entries); err != nil {
			return nil, fmt.Errorf("layer %s: %w", layers[i].Digest, err)
		}
	}
	return ix, nil
}
