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
	"errors"
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
// not opened. Concurrent Builds may share a CacheDir. Each layer is merged
// as soon as it and the layers below it are read, and then forgotten.
func Build(ctx context.Context, layers []Layer, opts Options) (*Index, error) {
	loads := make([]pendingLayer, len(layers))
	for i := range loads {
		loads[i].done = make(chan struct{})
	}
	loaded := make(chan error, 1)
	go func() { loaded <- loadLayers(ctx, layers, opts, loads) }()
	ix, mergeErr := mergeLoaded(layers, loads)
	if err := <-loaded; err != nil { // a load error comes first
		return nil, err
	}
	if mergeErr != nil {
		return nil, mergeErr
	}
	return ix, nil
}

// pendingLayer is a layer being loaded: done is closed once data is set,
// or once its load failed.
type pendingLayer struct {
	done chan struct{}
	data *layerData
}

// loadLayers loads every layer, up to GOMAXPROCS at a time in order, and
// returns the first error. It cancels the other loads on an error.
func loadLayers(ctx context.Context, layers []Layer, opts Options, loads []pendingLayer) error {
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for i, l := range layers {
		g.Go(func() error {
			defer close(loads[i].done)
			data, err := loadLayer(gctx, l, opts)
			if err != nil {
				return fmt.Errorf("layer %s: %w", l.Digest, err)
			}
			loads[i].data = data
			return nil
		})
	}
	return g.Wait()
}

// mergeLoaded merges the layers in order as their loads finish, and
// drops each layer's data once merged. It stops at the first layer that
// failed to load, returning errLoad, or to merge.
func mergeLoaded(layers []Layer, loads []pendingLayer) (*Index, error) {
	m := newMerger()
	for i := range loads {
		<-loads[i].done
		data := loads[i].data
		if data == nil {
			return nil, errLoad
		}
		loads[i].data = nil
		if err := m.apply(data); err != nil {
			return nil, fmt.Errorf("layer %s: %w", layers[i].Digest, err)
		}
	}
	return m.ix, nil
}

// errLoad stands for the error loadLayers returns.
var errLoad = errors.New("layer not loaded")

// loadLayer returns a layer's entries from the cache, or scans the blob
// and caches them.
func loadLayer(ctx context.Context, l Layer, opts Options) (*layerData, error) {
	if err := l.Digest.Validate(); err != nil {
		return nil, err
	}
	var cached string
	if opts.CacheDir != "" {
		cached = filepath.Join(opts.CacheDir, "layers", l.Digest.Algorithm().String(), l.Digest.Encoded())
		if data, ok := readCache(cached, l.Digest); ok {
			return data, nil
		}
	}
	s, err := scanLayer(ctx, l, opts.Progress)
	if err != nil {
		return nil, err
	}
	records, strs := s.records(), s.strings.String()
	if cached != "" {
		if err := writeCache(cached, l.Digest, strs, records); err != nil {
			return nil, fmt.Errorf("writing index cache: %w", err)
		}
	}
	// The layer's data is what a warm build reads from the cache.
	data := newLayerData(strs)
	if !data.decode(records) {
		return nil, errCorrupt
	}
	return data, nil
}
