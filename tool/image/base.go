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
	// Shared says where the base's index is published.
	Shared SharedIndex
	// MountInto, when set, is the destination the image built on the base
	// is written to: OpenBase starts mounting the base's layers there
	// (Image.MountInto) before it indexes them.
	MountInto string
}

// SharedIndex says where a base's index is shared with other machines
// (docs/ci.md, "The published base index").
type SharedIndex struct {
	// Repo, when set, is the repository (HOST/PATH) the base's published
	// index is read from when the cache has none, and published to after
	// a scan when Publish is set, with the destination side's
	// credentials and TLS settings.
	Repo    string
	Publish bool
	// Named says the user named Repo (rather than it being the build's
	// destination): a repository that cannot be read is then a warning.
	Named bool
	// Later leaves the publication to Base.PublishIndex, so that a build
	// publishes only once its image is written.
	Later bool
	// Origin, when set, is told where the index came from; Published,
	// when set, what a publication pushed.
	Origin    func(IndexOrigin)
	Published func(IndexTransfer)
}

// Where an index came from (IndexOrigin.Source).
const (
	FromCache    = "local cache"
	FromRegistry = "registry"
	FromScan     = "scan"
)

// IndexOrigin says where a base's index came from: the local cache, the
// registry (Repository@Manifest, Bytes downloaded) or a scan of the
// layers.
type IndexOrigin struct {
	Source     string
	Repository string
	Manifest   digest.Digest
	Bytes      int64
}

// Base is an opened, indexed base image.
type Base struct {
	*Image
	Index *baseindex.Index
	// opts and origin are how the base was opened and where its index
	// came from, for PublishIndex.
	opts      BaseOptions
	origin    IndexOrigin
	published bool
}

// Tree is the base's merged filesystem as fstree.Tree: what the renderer,
// the base-state comparison and revert prediction read.
func (b *Base) Tree() fstree.Tree { return b.Index.Tree() }

// OpenBaseWhile opens the base ref in a goroutine while work runs on
// the calling one, which starts it at once (docs/design.md, The warm
// path): a build loads its MachineConfigs, a diff reads the layered
// image's manifest. An error of work cancels the opening and is the one
// returned, the base closed if it opened, as when they ran one after the
// other.
func OpenBaseWhile(ctx context.Context, ref string, opts BaseOptions, work func() error) (*Base, error) {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
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
		return nil, werr
	}
	return b, err
}

// OpenBase opens ref and indexes its layers (or reads the cached index).
// The caller closes the Base. With opts.Shared.Later, an index it scanned
// is published by Base.PublishIndex, not here.
func OpenBase(ctx context.Context, ref string, opts BaseOptions) (*Base, error) {
	io := opts.Images
	io.recordsLater = opts.MountInto != ""
	im, err := Open(ctx, ref, io)
	if err != nil {
		return nil, err // Open names ref
	}
	if opts.MountInto != "" {
		im.MountInto(ctx, opts.MountInto, opts.Images)
	}
	ix, origin, err := indexLayers(ctx, im, opts)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("indexing %s: %w", ref, err), im.Close())
	}
	b := &Base{Image: im, Index: ix, opts: opts, origin: origin}
	if !opts.Shared.Later {
		b.PublishIndex(ctx)
	}
	return b, nil
}

// PublishIndex publishes the base's index when OpenBase scanned it and
// the options ask for it (SharedIndex); a failure is a warning, as the
// command's own work does not depend on it. Once per Base.
func (b *Base) PublishIndex(ctx context.Context) {
	o := b.opts.Shared
	if b.origin.Source != FromScan || !o.Publish || o.Repo == "" || b.published {
		return
	}
	b.published = true
	t, err := PublishCachedIndex(ctx, o.Repo, b.Image, nil, b.opts.CacheDir, b.opts.Images)
	if err != nil {
		slog.Warn("the base's index was not published", "repository", o.Repo, "err", err)
		return
	}
	slog.Info("base index published", "index", t.Repository+"@"+t.Manifest.String(), "pushed", t.Pushed, "bytes", t.Bytes)
	if o.Published != nil {
		o.Published(t)
	}
}

// IndexLayers indexes an opened image's layers (docs/design.md, "Indexing
// a base"): from a zstd:chunked or eStargz layer's table of contents, a
// containers-storage layer's tar-split and unpacked files, or else the
// blob; or from the index opts.Shared names, published by another
// machine. The index reads a containers-storage image's unpacked files
// for deferred digests as long as im is open. It publishes an index it
// scanned as opts.Shared says (Later is ignored).
func IndexLayers(ctx context.Context, im *Image, opts BaseOptions) (*baseindex.Index, error) {
	ix, origin, err := indexLayers(ctx, im, opts)
	if err != nil {
		return nil, err
	}
	(&Base{Image: im, Index: ix, opts: opts, origin: origin}).PublishIndex(ctx)
	return ix, nil
}

func indexLayers(ctx context.Context, im *Image, opts BaseOptions) (*baseindex.Index, IndexOrigin, error) {
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
	layers := im.indexLayers()
	var pulled *IndexOrigin
	if opts.Shared.Repo != "" && opts.CacheDir != "" {
		bo.Import = func(ctx context.Context) bool {
			o := pullIndex(ctx, im, layers, opts)
			pulled = &o
			return o.Source == FromRegistry
		}
	}
	ix, err := baseindex.Build(ctx, layers, bo)
	origin := IndexOrigin{Source: FromScan}
	if pulled != nil {
		origin = *pulled
	}
	switch {
	case err != nil:
		return nil, origin, err
	case !ix.FromCache():
		origin.Source = FromScan // a pulled view Build could not read is scanned too
	case pulled == nil:
		origin.Source = FromCache
	}
	logOrigin(origin)
	if opts.Shared.Origin != nil {
		opts.Shared.Origin(origin)
	}
	return ix, origin, nil
}

// pullIndex pulls the published index of layers, which it verifies and
// caches; Build calls it when its cache holds no view of them. A
// published index that is missing or cannot be read leaves a scan, as
// does one that is refused, with a warning; so does a repository the
// user named (SharedIndex.Named) that cannot be read.
func pullIndex(ctx context.Context, im *Image, layers []baseindex.Layer, opts BaseOptions) IndexOrigin {
	t, err := PullIndex(ctx, opts.Shared.Repo, im, baseindex.ViewVersion, opts.Images, func(view []byte) error {
		return baseindex.ImportView(opts.CacheDir, layers, view)
	})
	switch {
	case errors.Is(err, ErrNoPublishedIndex):
		slog.Info("no published index of the base; scanning its layers", "repository", opts.Shared.Repo)
		return IndexOrigin{Source: FromScan, Bytes: t.Bytes}
	case errors.Is(err, ErrIndexRefused) || (err != nil && opts.Shared.Named):
		slog.Warn("the published index of the base is not used; scanning its layers", "repository", opts.Shared.Repo, "err", err)
		return IndexOrigin{Source: FromScan, Bytes: t.Bytes}
	case err != nil:
		slog.Info("the published index of the base cannot be read; scanning its layers", "repository", opts.Shared.Repo, "err", err)
		return IndexOrigin{Source: FromScan, Bytes: t.Bytes}
	}
	return IndexOrigin{Source: FromRegistry, Repository: t.Repository, Manifest: t.Manifest, Bytes: t.Bytes}
}

// PublishCachedIndex publishes the index of im's layers that the cache
// holds (IndexLayers puts it there) to repo.
func PublishCachedIndex(ctx context.Context, repo string, im *Image, layers []baseindex.Layer, cacheDir string, opts Options) (IndexTransfer, error) {
	if layers == nil {
		layers = im.indexLayers()
	}
	view, err := baseindex.PublishableView(cacheDir, layers)
	if err != nil {
		return IndexTransfer{Repository: repo}, err
	}
	return PushIndex(ctx, repo, im, baseindex.ViewVersion, view, opts)
}

func logOrigin(o IndexOrigin) {
	args := []any{"from", o.Source, "bytes", o.Bytes}
	if o.Source == FromRegistry {
		args = append(args, "index", o.Repository+"@"+o.Manifest.String())
	}
	slog.Info("base index", args...)
}

// IndexChain is the chain of im's layers as the base index names it: what
// baseindex.ImportView checks a published index against.
func IndexChain(im *Image) []baseindex.Layer { return im.indexLayers() }
