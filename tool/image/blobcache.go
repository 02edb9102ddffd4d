package image

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"strings"

	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
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

// locationsRecorded waits for recordLocations, if it was started.
func (im *Image) locationsRecorded() {
	if im.recorded != nil {
		<-im.recorded
	}
}

func recordLocations(sys *types.SystemContext, named reference.Named, layers []LayerInfo) {
	cache, closeCache := openBlobInfoCache(sys)
	defer closeCache()
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
// TestColdBuildMountsBaseLayers fails if this stops working.
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
// no data, and each layer's three wait for one another.
const maxParallelMounts = 16

// MountInto starts making the image's layers present in the docker://
// destination dest, in the background: containers/image mounts each from
// the image's repository into dest's (docs/design.md, "Registries"), three
// requests a layer, which copy.Image would otherwise make at the end of a
// build (144 for an ostree-ext-shaped base of 48 layers). Started once the
// base's manifest is read (BaseOptions.MountInto), they go on while the
// build reads the base's index and renders, and Append's copy then finds
// each layer there with one request. It does nothing unless the image is
// a docker:// one on dest's registry in another repository. What it
// cannot mount, copy.Image uploads as before; a build that fails after
// it leaves mounted blobs, which no manifest names, in dest's repository,
// as a failed push does. Append waits for it before it copies, and Close
// stops it.
func (im *Image) MountInto(ctx context.Context, dest string, opts Options) {
	r, err := ParseReference(dest)
	if err != nil || r.transport != transportDocker || im.src == nil || im.mounted != nil {
		return
	}
	from := im.src.Reference().DockerReference()
	ref, _, err := bind(r, opts)
	if err != nil || from == nil || ref.DockerReference() == nil {
		return
	}
	to := ref.DockerReference()
	if reference.Domain(from) != reference.Domain(to) || from.Name() == to.Name() {
		return
	}
	sys, err := opts.destinationContext()
	if err != nil {
		return
	}
	// Not ctx's cancellation: it may be the opening's own (OpenBaseWhile),
	// done once the base is open. Close stops the mounts, and a copy that
	// waits for them and is cancelled (mountsDone).
	ctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	m := &mounting{done: make(chan struct{}), cancel: cancel}
	im.mounted = m
	go func() {
		defer close(m.done)
		defer cancel()
		im.locationsRecorded() // the mounts' sources come from these records
		mountLayers(ctx, ref, sys, im.layers)
	}()
}

// mounting is a MountInto under way.
type mounting struct {
	done   chan struct{}
	cancel context.CancelFunc
}

// mountLayers asks dest to reuse each layer, maxParallelMounts at a time.
// The first error stops the others: what is wrong with the registry, the
// copy reports.
func mountLayers(ctx context.Context, ref types.ImageReference, sys *types.SystemContext, layers []LayerInfo) {
	d, err := ref.NewImageDestination(ctx, sys)
	if err != nil {
		slog.Debug("mounting the base's layers in the destination ahead of the copy", "err", err)
		return
	}
	defer d.Close()
	cache, closeCache := openBlobInfoCache(sys)
	defer closeCache()
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(maxParallelMounts)
	for _, l := range layers {
		g.Go(func() error {
			ok, _, err := d.TryReusingBlob(ctx, types.BlobInfo{Digest: l.Digest, Size: l.Size, MediaType: l.MediaType}, cache, false)
			if err != nil {
				slog.Debug("the base's layers were not mounted ahead of the copy", "layer", l.Digest, "err", err)
				return err
			}
			if !ok {
				slog.Debug("a base layer was not mounted ahead of the copy", "layer", l.Digest)
			}
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
