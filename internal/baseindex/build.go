// Package baseindex indexes a base OS image's filesystem without extracting it.
//
// It merges the layers by the OCI whiteout rules into an Index of every
// path's type, mode, owner, size, symlink target and content digest
// (docs/design.md, "Indexing a base"). A layer is read from the cheapest
// source that vouches for it: a zstd:chunked or eStargz table of contents
// (Layer.TOC), a containers-storage tar-split and unpacked files
// (Layer.Unpacked), or else its blob, streamed once, digest-checked and
// decompressed (gzip, zstd or none). It keeps the content of the few
// files rendering needs (passwd, group, systemd presets and units),
// resolves paths through the image's own symlinks, and caches each
// layer's entries and the merged view of the whole chain on disk, so
// that a second build is one read.
package baseindex

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"

	"github.com/mcbake/mcbake/internal/gcpolicy"

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
	// DiffID is the digest of the uncompressed stream the image's config
	// gives; when it is set, a scan of the blob checks it, and the cache
	// of a layer read from its blob is kept for the pair. A TOC does not
	// vouch for it (it is never decompressed whole); containers-storage
	// has checked it for a layer it keeps unpacked.
	DiffID digest.Digest
	// Open returns the compressed blob. Build closes it, and checks the
	// size and digest of what it reads: Open need not. It is not called
	// when the layer's index is cached, nor when TOC or Unpacked serve.
	Open func(ctx context.Context) (io.ReadCloser, error)
	// TOC, when set, reads the layer from its table of contents, if its
	// annotations name one; Build scans the blob when the TOC is missing
	// or unusable.
	TOC *TOC
	// Unpacked, when set, reads the layer from its tar-split and its
	// unpacked files; Build scans the blob when there is no tar-split or
	// it does not match the files. The digests of the regular files it
	// does not read are deferred until asked for (Node.Deferred).
	Unpacked *Unpacked
}

// Options tunes Build.
type Options struct {
	// CacheDir holds the per-layer index cache, under
	// CacheDir/layers/<algorithm>/<hex>; "" disables the cache. Commands
	// pass $XDG_CACHE_HOME/mcbake.
	CacheDir string
	// Progress, if set, is called with the count of compressed bytes read
	// so far of a layer (its size once a TOC or tar-split served it). It
	// is called from several goroutines at once.
	Progress func(layer digest.Digest, n int64)
	// Fallback, if set, is told why a layer's TOC or tar-split was not
	// used and its blob is scanned instead. It is called from several
	// goroutines at once.
	Fallback func(layer digest.Digest, err error)
	// Read, if set, is told how each layer missing from the cache was
	// read: "toc", "tar-split" or "blob". It is called from several
	// goroutines at once.
	Read func(layer digest.Digest, how string)
	// Import, if set, is called when the cache holds no usable view of
	// the chain (none, or a damaged one, then removed), before a layer is
	// read: it may cache one from elsewhere (ImportView) and report true,
	// and Build reads that one as its own. Only with a CacheDir.
	Import func(ctx context.Context) bool

	// cacheFailed is told, once a Build, that a cache file could not be
	// written (Build sets it).
	cacheFailed func(error)
}

// Build indexes layers, bottom layer first. It reads up to GOMAXPROCS
// (at most maxParallelLayers) layers at a time, each to its end, and fails if a blob does not match
// its digest or is not a valid compressed tar stream. Cached layers are
// not opened. Concurrent Builds may share a CacheDir. Each layer is merged
// as soon as it and the layers below it are read, and then forgotten.
//
// With a CacheDir, the merged index of the chain is cached too, and a
// Build of a cached chain reads that one file and no layer's. Once the
// index it builds in memory has 250k nodes, and until the index is
// garbage, Build has the garbage collector run when the heap has grown by
// 30% rather than doubled (debug.SetGCPercent(30), then restored),
// unless the environment sets GOGC: the index is then most of the heap,
// and this keeps a 500k-entry base under 200 MB. An index read from the
// cache's merged view is mapped, and changes nothing; its checksums are
// all checked first, and should a block be damaged, the view is removed
// (with a warning) and the index built again as if it were missing
// (opts.Import first). No work is left for later: ctx is not used once
// Build returns.
func Build(ctx context.Context, layers []Layer, opts Options) (*Index, error) {
	for _, l := range layers {
		if err := l.Digest.Validate(); err != nil {
			return nil, fmt.Errorf("layer %s: %w", l.Digest, err)
		}
	}
	var cached string
	key := viewKey(layers)
	if opts.CacheDir != "" {
		cached = viewFile(opts.CacheDir, key)
		ix, ok, damage := readView(cached, key, layers)
		if ok {
			return ix, nil
		}
		if damage != nil {
			slog.Warn("the cached index of the base is damaged; rebuilding it", "err", damage)
			// Removed first, so that a rebuild that fails leaves nothing
			// damaged for the next run; a cache that cannot be changed
			// only costs time.
			if err := os.Remove(cached); err != nil && !errors.Is(err, fs.ErrNotExist) {
				slog.Warn("the damaged cached index could not be removed", "err", err)
			}
		}
		if opts.Import != nil && opts.Import(ctx) {
			if ix, ok, _ := readView(cached, key, layers); ok {
				return ix, nil
			}
		}
		if damage != nil {
			ix, err := buildAndCache(ctx, layers, opts, key, cached)
			if err != nil {
				return nil, fmt.Errorf("%w; building the index again: %w", damage, err)
			}
			return ix, nil
		}
	}
	return buildAndCache(ctx, layers, opts, key, cached)
}

// buildAndCache builds the index of layers and caches its view at cached
// (when not "").
func buildAndCache(ctx context.Context, layers []Layer, opts Options, key [sha256.Size]byte, cached string) (*Index, error) {
	var warned sync.Once
	opts.cacheFailed = func(err error) { warned.Do(func() { cacheWarning(err) }) }
	var gc gcHold
	ix, err := build(ctx, layers, opts, &gc)
	if err == nil && cached != "" {
		if werr := writeView(cached, key, ix); werr != nil {
			opts.cacheFailed(werr)
		}
	}
	if err != nil {
		gc.release()
		return nil, err
	}
	if gc.held() {
		// The collector stays tight for as long as the index is kept:
		// what a caller does with it allocates on top of it.
		runtime.AddCleanup(ix, func(gc *gcHold) { gc.release() }, &gc)
	}
	return ix, nil
}

// build loads and merges the layers, tightening the collector with gc
// once the index is large.
func build(ctx context.Context, layers []Layer, opts Options, gc *gcHold) (*Index, error) {
	if err := ctx.Err(); err != nil {
		return nil, err // cancelled before it starts: not even cached layers
	}
	loads := make([]pendingLayer, len(layers))
	for i := range loads {
		loads[i].done = make(chan struct{})
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	// A layer holds its token from its load's start until it is merged:
	// loaded layers waiting for a slow one below them count too.
	tokens := make(chan struct{}, min(runtime.GOMAXPROCS(0), maxParallelLayers))
	loaded := make(chan error, 1)
	go func() { loaded <- loadLayers(ctx, layers, opts, loads, tokens) }()
	ix, mergeErr := mergeLoaded(layers, loads, gc, tokens)
	if mergeErr != nil && !errors.Is(mergeErr, errLoad) {
		cancel() // the loads left are not needed
		<-loaded
		return nil, mergeErr
	}
	if err := <-loaded; err != nil { // the error of the load that failed
		return nil, err
	}
	ix.files = unpackedFiles(layers)
	return ix, nil
}

// buildGC is the garbage collector's percentage while a large index is
// built and kept: the index is then most of the heap, and with the
// default (100) a heap twice its size is reached before a collection;
// 30% more is enough. tightGCNodes is how many nodes make an index large
// (about 50 MB): below it, the default costs less CPU and little memory.
const (
	buildGC      = 30
	tightGCNodes = 250_000
)

// gcHold holds the garbage collector's percentage at buildGC, with every
// other hold, unless the program's environment sets GOGC
// (gcpolicy.Hold).
type gcHold struct{ done func() }

func (h *gcHold) held() bool { return h.done != nil }

func (h *gcHold) hold() {
	if h.done == nil {
		h.done = gcpolicy.Hold(buildGC)
	}
}

func (h *gcHold) release() {
	if h.done != nil {
		h.done()
		h.done = nil
	}
}

// unpackedFiles returns the layers' unpacked files, for deferred digests.
func unpackedFiles(layers []Layer) []func(string) (io.ReadCloser, error) {
	files := make([]func(string) (io.ReadCloser, error), len(layers))
	for i, l := range layers {
		if l.Unpacked != nil {
			files[i] = l.Unpacked.Open
		}
	}
	return files
}

// pendingLayer is a layer being loaded: done is closed once data is set,
// or once its load failed.
type pendingLayer struct {
	done chan struct{}
	data *layerData
}

// maxParallelLayers bounds the layers read at once, whatever the number
// of CPUs: each may hold a zstd window (decompress.MaxZstdWindow) and the
// contents it keeps (maxKeptTotal), about 50 MiB at worst, so that a
// hostile image of many such layers stays under 300 MB.
const maxParallelLayers = 4

// loadLayers loads every layer in order, each once it has a token (as
// many as GOMAXPROCS, at most maxParallelLayers; mergeLoaded gives a
// layer's back once it merged it), and returns the first error. It
// cancels the other loads on an error; the layers it did not start are
// marked done without data.
func loadLayers(ctx context.Context, layers []Layer, opts Options, loads []pendingLayer, tokens chan struct{}) error {
	g, gctx := errgroup.WithContext(ctx)
	for i, l := range layers {
		select {
		case tokens <- struct{}{}:
		case <-gctx.Done():
			for j := i; j < len(layers); j++ {
				close(loads[j].done)
			}
			err := g.Wait()
			if err == nil {
				err = gctx.Err()
			}
			return err
		}
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
func mergeLoaded(layers []Layer, loads []pendingLayer, gc *gcHold, tokens chan struct{}) (*Index, error) {
	m := newMerger()
	for i := range loads {
		<-loads[i].done
		data := loads[i].data
		if data == nil {
			return nil, errLoad
		}
		loads[i].data = nil
		err := m.apply(data, i)
		<-tokens // the layer is merged (or the build fails): the next may load
		if err != nil {
			return nil, fmt.Errorf("layer %s: %w", layers[i].Digest, err)
		}
		if len(m.ix.chunks)*chunkSize > tightGCNodes {
			gc.hold()
		}
	}
	return m.ix, nil
}

// cacheWarning logs that a cache file could not be written (the first
// failure of a Build): the cache only saves time (a full or read-only
// cache directory), so the build goes on, and the next one reads the
// layer again.
func cacheWarning(err error) {
	slog.Warn("the index cache could not be written; going on without it", "err", err)
}

// errLoad stands for the error loadLayers returns.
var errLoad = errors.New("layer not loaded")

// loadLayer returns a layer's entries from the cache, or reads them and
// caches them.
func loadLayer(ctx context.Context, l Layer, opts Options) (*layerData, error) {
	if err := l.Digest.Validate(); err != nil {
		return nil, err
	}
	format, toc, tocErr := layerTOC(l)
	files := cacheFiles(opts.CacheDir, l, toc)
	for _, c := range files {
		if data, ok := readCache(c.file, c.id); ok && (!data.deferred || l.Unpacked != nil) {
			return data, nil
		}
	}
	s, from, err := readLayer(ctx, l, opts, format, tocErr)
	if err != nil {
		return nil, err
	}
	// The exact bytes: a builder's spare capacity would stay alive with
	// the nodes that share the string.
	records, strs := s.records(), strings.Clone(s.strings.String())
	if c, ok := files[from]; ok {
		if err := writeCache(c.file, c.id, strs, records); err != nil && opts.cacheFailed != nil {
			opts.cacheFailed(err)
		}
	}
	// The layer's data is what a warm build reads from the cache.
	data := newLayerData(strs)
	if !data.decode(records) {
		return nil, errCorrupt
	}
	return data, nil
}

// source is what a layer's entries were read from.
type source int

const (
	fromTOC source = iota
	fromBlob
)

// cacheFile is a per-layer cache file and what it is for: the digest of
// the TOC or blob it was read from, and for a blob the diff_id its scan
// checked, if any.
type cacheFile struct {
	file string
	id   string
}

// cacheFiles returns where a layer's entries are cached, the TOC's first:
// entries read from a TOC are cached by the TOC's digest, since it is the
// TOC the annotation vouches for, not the blob, which is never read;
// entries read from the blob or a tar-split (of the uncompressed blob
// containers-storage keeps) by the blob's digest.
func cacheFiles(dir string, l Layer, toc digest.Digest) map[source]cacheFile {
	if dir == "" {
		return nil
	}
	id := l.Digest.String()
	if l.DiffID != "" {
		// The scan that wrote it checked this diff_id; another image may
		// pair the blob with another (cacheFile).
		id += " " + l.DiffID.String()
	}
	files := map[source]cacheFile{fromBlob: {filepath.Join(dir, "layers", l.Digest.Algorithm().String(), l.Digest.Encoded()), id}}
	if toc != "" {
		files[fromTOC] = cacheFile{filepath.Join(dir, "toc", toc.Algorithm().String(), toc.Encoded()), toc.String()}
	}
	return files
}

// layerTOC returns the format and digest of the layer's TOC, if it has
// one Build may read.
func layerTOC(l Layer) (tocFormat, digest.Digest, error) {
	if l.TOC == nil {
		return noTOC, "", nil
	}
	return tocDigest(l.TOC.Annotations)
}

// readLayer reads a layer's entries from its TOC, its tar-split, or its
// blob, in that order, falling back to the next when one is missing or
// unusable.
func readLayer(ctx context.Context, l Layer, opts Options, format tocFormat, tocErr error) (*scanned, source, error) {
	fellBack := func(err error) {
		if opts.Fallback != nil {
			opts.Fallback(l.Digest, err)
		}
	}
	read := func(how string) {
		if opts.Read != nil {
			opts.Read(l.Digest, how)
		}
	}
	if tocErr != nil {
		fellBack(fallback("%v", tocErr))
	} else if format != noTOC {
		s, err := listTOC(ctx, l)
		if err == nil {
			done(l, opts)
			read("toc")
			return s, fromTOC, nil
		}
		if !errors.Is(err, errFallback) {
			return nil, 0, err
		}
		fellBack(err)
	}
	if l.Unpacked != nil {
		s, err := listUnpacked(ctx, l.Unpacked)
		if err == nil {
			done(l, opts)
			read("tar-split")
			return s, fromBlob, nil
		}
		if !errors.Is(err, errFallback) {
			return nil, 0, err
		}
		fellBack(err)
	}
	s, err := scanLayer(ctx, l, opts.Progress, format == estargz)
	if err == nil {
		read("blob")
	}
	return s, fromBlob, err
}

// done reports a layer read through its metadata as read.
func done(l Layer, opts Options) {
	if opts.Progress != nil && l.Size > 0 {
		opts.Progress(l.Digest, l.Size)
	}
}

func listTOC(ctx context.Context, l Layer) (*scanned, error) {
	lst, err := readTOC(ctx, l)
	if err != nil {
		return nil, err
	}
	return scanListing(ctx, lst)
}

func listUnpacked(ctx context.Context, u *Unpacked) (_ *scanned, err error) {
	rc, err := u.TarSplit(ctx)
	if err != nil {
		return nil, fallback("no tar-split: %v", err)
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	lst, err := newTarSplitListing(rc, u.Open)
	if err != nil {
		return nil, err
	}
	return scanListing(ctx, lst)
}
