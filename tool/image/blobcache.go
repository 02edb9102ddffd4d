package image

import (
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
	cache := blobInfoCache(sys)
	if c, ok := cache.(interface{ Open() }); ok {
		c.Open()
	}
	if c, ok := cache.(interface{ Close() }); ok {
		defer c.Close()
	}
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
