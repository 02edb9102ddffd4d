package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"

	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/blobinfocache/memory"
	"go.podman.io/image/v5/pkg/compression"
	"go.podman.io/image/v5/types"
	"golang.org/x/sync/errgroup"
)

// recordLocations tells the blob-info cache where a docker:// image's
// layers live and how they are compressed (docs/design.md, Registries:
// push only what is new). containers/image mounts a blob from another
// repository of the destination's registry only when its cache knows both;
// it learns them when it downloads a blob, which an append never does for
// base layers, so without this a build with an empty cache (every CI
// runner's) would upload the whole base again.
//
// It runs in the background: containers/image commits each record in
// its own transaction, with an fsync, three a layer (about 70 ms for a
// 48-layer base), which a build spends while it reads the base's index
// and renders. Append waits for it (locationsRecorded) before it copies,
// and Close before it closes the image.
func (im *Image) recordLocations(sys *types.SystemContext) {
	named := im.src.Reference().DockerReference()
	if named == nil {
		return
	}
	done := make(chan struct{})
	im.recorded = done
	go func() {
		defer close(done)
		recordLocations(sys, named, im.layers)
	}()
}

// recordUnmounted starts recordLocations for an image whose Open left the
// records to MountInto's outcome (Options.recordsLater), before a copy to
// dest that may have to mount the image's layers itself: dest is in
// another repository of the image's registry, and MountInto did not mount
// them all there. containers/image then mounts what is left, from these
// records. Otherwise they would serve nothing (on another registry they
// give no candidates, in the image's own repository the layers are
// there), and a cold build is spared their commits (three a layer, an
// fsync each). Call it after mountsDone; nothing once ctx is done.
func (im *Image) recordUnmounted(ctx context.Context, dest types.ImageReference) {
	if im.recordSys == nil || im.recorded != nil || ctx.Err() != nil {
		return
	}
	to := dest.DockerReference()
	if !mountable(im.src.Reference().DockerReference(), to) {
		return
	}
	if m := im.mounted; m != nil && m.repo == to.Name() {
		if !slices.ContainsFunc(im.layers, func(l LayerInfo) bool { _, ok := m.present[l.Digest]; return !ok }) {
			return
		}
	}
	im.recordLocations(im.recordSys)
}

// locationsRecorded waits for recordLocations, if it was started.
func (im *Image) locationsRecorded() {
	if im.recorded != nil {
		<-im.recorded
	}
}

func recordLocations(sys *types.SystemContext, named reference.Named, layers []LayerInfo) {
	cache, closeCache := openBlobInfoCache(sys)
	defer closeCache()
	recordLayers(cache, named, layers)
}

// recordLayers records in cache where each of layers lives (named's
// repository) and how it is compressed: what containers/image needs to
// mount it from there.
func recordLayers(cache types.BlobInfoCache, named reference.Named, layers []LayerInfo) {
	scope := types.BICTransportScope{Opaque: reference.Domain(named)}
	loc := types.BICLocationReference{Opaque: named.Name()}
	for _, l := range layers {
		cache.RecordKnownLocation(docker.Transport, scope, l.Digest, loc)
		cache.RecordDigestUncompressedPair(l.Digest, l.DiffID)
		if err := recordCompressor(cache, l.Digest, compressorName(l.MediaType)); err != nil {
			slog.Debug("blob-info cache: not recording the compression of a base layer; it will be uploaded, not mounted",
				"layer", l.Digest, "error", err)
		}
	}
}

// compressorName is the cache's name for a layer media type's compression.
func compressorName(mediaType string) string {
	switch {
	case strings.HasSuffix(mediaType, "+gzip"):
		return compression.Gzip.Name()
	case strings.HasSuffix(mediaType, "+zstd"):
		return compression.Zstd.Name()
	}
	return "uncompressed" // containers/image's internal blobinfocache.Uncompressed
}

// recordCompressor calls the cache's RecordDigestCompressorData, which
// every cache containers/image makes has but whose argument type is
// internal to containers/image: it is built by reflection, field by field.
// TestAppendMountsFromRecords fails if this stops working.
func recordCompressor(cache types.BlobInfoCache, d digest.Digest, name string) error {
	m := reflect.ValueOf(cache).MethodByName("RecordDigestCompressorData")
	if !m.IsValid() || m.Type().NumIn() != 2 || m.Type().In(1).Kind() != reflect.Struct {
		return errors.New("the cache has no RecordDigestCompressorData(digest, data)")
	}
	data := reflect.New(m.Type().In(1)).Elem()
	for field, v := range map[string]string{
		"BaseVariantCompressor":     name,
		"SpecificVariantCompressor": "unknown", // internal blobinfocache.UnknownCompression: the base variant itself
	} {
		f := data.FieldByName(field)
		if !f.IsValid() || f.Kind() != reflect.String || !f.CanSet() {
			return fmt.Errorf("the cache's compressor data has no string field %s", field)
		}
		f.SetString(v)
	}
	m.Call([]reflect.Value{reflect.ValueOf(d), data})
	return nil
}

// maxParallelMounts is how many of the base's layers MountInto asks the
// registry for at once: more than a copy's six, as these requests carry
// no data.
const maxParallelMounts = 16

// MountInto starts making the image's layers present in the docker://
// destination dest, in the background: each is mounted from the image's
// repository into dest's (docs/design.md, "Registries") with one request
// (crossMount), which copy.Image would otherwise do at the end of a build
// with three (144 for an ostree-ext-shaped base of 48 layers). Started
// once the base's manifest is read (BaseOptions.MountInto), the mounts go
// on while the build reads the base's index and renders, and Append's
// copy is then told that those layers are there (withPresent). It does
// nothing unless the image is a docker:// one on dest's registry in
// another repository. What it cannot mount, copy.Image mounts or uploads
// as before; a build that fails after it leaves mounted blobs, which no
// manifest names, in dest's repository, as a failed push does. Append
// waits for it before it copies, and Close stops it.
func (im *Image) MountInto(ctx context.Context, dest string, opts Options) {
	r, err := ParseReference(dest)
	if err != nil || r.transport != transportDocker || im.src == nil || im.mounted != nil {
		return
	}
	from := im.src.Reference().DockerReference()
	ref, _, err := bind(r, opts)
	if err != nil || !mountable(from, ref.DockerReference()) {
		return
	}
	to := ref.DockerReference()
	sys, err := opts.destinationContext()
	if err != nil {
		return
	}
	// Not ctx's cancellation: it may be the opening's own (OpenBaseWhile),
	// done once the base is open. Close stops the mounts, and a copy that
	// waits for them and is cancelled (mountsDone).
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &mounting{done: make(chan struct{}), cancel: cancel, repo: to.Name()}
	im.mounted = m
	go func() {
		defer close(m.done)
		defer cancel()
		m.present = mountLayers(ctx, ref, sys, from, im.layers)
	}()
}

// mountable reports whether blobs of repository from can be mounted into
// to: both are named, on one registry, and not the same repository
// (where they are already).
func mountable(from, to reference.Named) bool {
	return from != nil && to != nil && reference.Domain(from) == reference.Domain(to) && from.Name() != to.Name()
}

// mounting is a MountInto under way.
type mounting struct {
	done   chan struct{}
	cancel context.CancelFunc
	// repo is the repository mounted into; present, once done is closed,
	// the layers that are there (by digest, their sizes).
	repo    string
	present map[digest.Digest]int64
}

// mountLayers makes each of layers, which live in from's repository,
// present in ref's: crossMount's one request a layer, or, when it cannot
// set up its client, containers/image's TryReusingBlob,
// maxParallelMounts at a time. The first error stops the others: what is
// wrong with the registry, the copy reports. It returns the layers that
// are there.
func mountLayers(ctx context.Context, ref types.ImageReference, sys *types.SystemContext, from reference.Named, layers []LayerInfo) map[digest.Digest]int64 {
	ok := make([]bool, len(layers))
	err := crossMount(ctx, sys, from, ref.DockerReference(), layers, ok)
	switch {
	case errors.Is(err, errNoMountClient):
		slog.Debug("mounting the base's layers through containers/image", "err", err)
		reuseLayers(ctx, ref, sys, from, layers, ok)
	case err != nil:
		slog.Debug("the base's layers were not all mounted ahead of the copy", "err", err)
	}
	present := map[digest.Digest]int64{}
	for i, l := range layers {
		if ok[i] {
			present[l.Digest] = l.Size
		}
	}
	return present
}

// reuseLayers asks ref's destination to reuse each of layers,
// maxParallelMounts at a time: containers/image's HEAD at the
// destination, HEAD at from and mount.
//
// The candidates come from a cache in memory, given the records
// recordLocations writes to the blob-info cache: the mounts need not wait
// for those commits (about 90 ms for 48 layers), which copy.Image reads
// later.
//
// It sets ok[i] for each layers[i] that is there.
func reuseLayers(ctx context.Context, ref types.ImageReference, sys *types.SystemContext, from reference.Named, layers []LayerInfo, ok []bool) {
	d, err := ref.NewImageDestination(ctx, sys)
	if err != nil {
		slog.Debug("mounting the base's layers in the destination ahead of the copy", "err", err)
		return
	}
	defer d.Close()
	cache := memory.New()
	recordLayers(cache, from, layers)
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(maxParallelMounts)
	for i, l := range layers {
		g.Go(func() error {
			reused, _, err := d.TryReusingBlob(ctx, types.BlobInfo{Digest: l.Digest, Size: l.Size, MediaType: l.MediaType}, cache, false)
			if err != nil {
				slog.Debug("the base's layers were not mounted ahead of the copy", "layer", l.Digest, "err", err)
				return err
			}
			if !reused {
				slog.Debug("a base layer was not mounted ahead of the copy", "layer", l.Digest)
			}
			ok[i] = reused
			return nil
		})
	}
	_ = g.Wait()
}

// mountsDone waits for MountInto, if it was started, or stops it once
// ctx is done.
func (im *Image) mountsDone(ctx context.Context) {
	if m := im.mounted; m != nil {
		select {
		case <-m.done:
		case <-ctx.Done():
			m.cancel()
			<-m.done
		}
	}
}

// mountsStopped stops MountInto, if it was started, and waits for it.
func (im *Image) mountsStopped() {
	if m := im.mounted; m != nil {
		m.cancel()
		<-m.done
	}
}
