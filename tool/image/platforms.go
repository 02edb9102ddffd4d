package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"

	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"
)

// Platforms lists the platforms of ref, "os/arch[/variant]" in the order
// its index or manifest list names them (entries without a platform, such
// as attestations, are left out). A single image has the one platform of
// its config.
func Platforms(ctx context.Context, ref string, opts Options) (_ []string, err error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err
	}
	var out []string
	err = opts.Retry.do(ctx, func() error {
		out, err = platforms(ctx, r, opts)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("listing the platforms of %s: %w", ref, err)
	}
	return out, nil
}

func platforms(ctx context.Context, r Ref, opts Options) (_ []string, err error) {
	sys, err := opts.systemContext()
	if err != nil {
		return nil, err
	}
	bound, store, err := bind(r, opts)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, shutdownStore(store)) }()
	src, err := bound.NewImageSource(ctx, sys)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, src.Close()) }()
	blob, mime, err := src.GetManifest(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	if !manifest.MIMETypeIsMultiImage(mime) {
		img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, nil))
		if err != nil {
			return nil, err
		}
		cfg, err := img.OCIConfig(ctx)
		if err != nil {
			return nil, fmt.Errorf("reading config: %w", err)
		}
		return []string{platformString(cfg.OS, cfg.Architecture, cfg.Variant)}, nil
	}
	list, err := manifest.ListFromBlob(blob, mime)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", mime, err)
	}
	var out []string
	for _, d := range list.Instances() {
		inst, err := list.Instance(d)
		if err != nil {
			return nil, err
		}
		if p := inst.ReadOnly.Platform; p != nil && p.OS != "" && p.OS != "unknown" && p.Architecture != "unknown" {
			out = append(out, platformString(p.OS, p.Architecture, p.Variant))
		}
	}
	return out, nil
}

// PlatformImage is one platform of AppendPlatforms: a base, opened for that
// platform, and what to append to it.
type PlatformImage struct {
	Base   *Image
	Append AppendOptions
}

// AppendPlatforms writes one appended image per entry (as Append would write
// it alone) and an OCI image index listing them, each with its base's
// platform, in the order given, to dest; it returns the list's digest.
// The same entries give the same digest. progress, when set, is told of
// every blob; the entries' own Progress is not used.
func AppendPlatforms(ctx context.Context, entries []PlatformImage, dest string, annotations map[string]string, progress func(BlobProgress), opts Options) (_ digest.Digest, err error) {
	if len(entries) == 0 {
		return "", errors.New("an index needs at least one image")
	}
	r, err := ParseReference(dest)
	if err != nil {
		return "", err
	}
	if r.transport == transportDockerArchive {
		return "", fmt.Errorf("%s: docker-archive: cannot hold an image index", dest)
	}
	src, err := newListSource(entries, annotations)
	if err != nil {
		return "", err
	}
	co, err := copyOptions(r, opts, entries[0].Append.Created)
	if err != nil {
		return "", err
	}
	co.ImageListSelection = copy.CopyAllImages
	bases := make([]*Image, len(entries))
	for i, e := range entries {
		bases[i] = e.Base
	}
	st, err := newStaging(r, bases, opts)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dest, err)
	}
	defer func() { err = errors.Join(err, st.close()) }()
	written, err := copyImage(ctx, readyToCopy(ctx, st.reference(), co, nil, bases...), src.ref, co, progress, opts.Retry)
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", dest, err)
	}
	if d, err := manifest.Digest(written); err != nil || d != src.digest {
		return "", fmt.Errorf("writing %s: the destination stored index %s instead of %s (%v)", dest, d, src.digest, err)
	}
	if err := st.commit(ctx); err != nil {
		return "", fmt.Errorf("%s: %w", dest, err)
	}
	return src.digest, nil
}

// listSource serves an image list (an OCI image index) over several
// appendSources.
type listSource struct {
	images []*appendSource
	list   []byte
	digest digest.Digest
	ref    listRef
}

func newListSource(entries []PlatformImage, annotations map[string]string) (*listSource, error) {
	s := &listSource{}
	idx := imgspecv1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imgspecv1.MediaTypeImageIndex}
	if len(annotations) > 0 {
		idx.Annotations = annotations
	}
	for i, e := range entries {
		a, err := newAppendSource(e.Base, e.Append)
		if err != nil {
			return nil, fmt.Errorf("image %d: %w", i, err)
		}
		if slices.ContainsFunc(s.images, func(o *appendSource) bool { return o.manifestDigest == a.manifestDigest }) {
			return nil, fmt.Errorf("image %d is the same image as an earlier one (%s)", i, a.manifestDigest)
		}
		s.images = append(s.images, a)
		cfg := e.Base.Config()
		idx.Manifests = append(idx.Manifests, imgspecv1.Descriptor{
			MediaType: imgspecv1.MediaTypeImageManifest,
			Digest:    a.manifestDigest,
			Size:      int64(len(a.manifest)),
			Platform: &imgspecv1.Platform{OS: cfg.OS, Architecture: cfg.Architecture, Variant: cfg.Variant,
				OSVersion: cfg.OSVersion, OSFeatures: cfg.OSFeatures},
			Annotations: instanceAnnotations(e),
		})
	}
	var err error
	if s.list, err = json.Marshal(idx); err != nil {
		return nil, err
	}
	s.digest = digest.FromBytes(s.list)
	s.ref = listRef{s}
	return s, nil
}

// zstdInstanceAnnotation marks an index entry whose image has zstd
// layers, as containers/image writes it (and, with digests preserved,
// insists on finding it): io.github.containers.compression.zstd.
const zstdInstanceAnnotation = "io.github.containers.compression.zstd"

func instanceAnnotations(e PlatformImage) map[string]string {
	zstd := slices.ContainsFunc(e.Append.Layers, func(l NewLayer) bool { return l.MediaType == imgspecv1.MediaTypeImageLayerZstd }) ||
		slices.ContainsFunc(e.Base.descs, func(d imgspecv1.Descriptor) bool { return strings.HasSuffix(d.MediaType, "+zstd") })
	if !zstd {
		return nil
	}
	return map[string]string{zstdInstanceAnnotation: "true"}
}

func (s *listSource) Reference() types.ImageReference { return s.ref }

// Close does nothing: the bases belong to AppendPlatforms's caller.
func (s *listSource) Close() error { return nil }

func (s *listSource) GetManifest(ctx context.Context, instance *digest.Digest) ([]byte, string, error) {
	if instance == nil {
		return s.list, imgspecv1.MediaTypeImageIndex, nil
	}
	for _, a := range s.images {
		if a.manifestDigest == *instance {
			return a.GetManifest(ctx, instance)
		}
	}
	return nil, "", fmt.Errorf("no manifest %s in the index", *instance)
}

func (s *listSource) GetBlob(ctx context.Context, info types.BlobInfo, cache types.BlobInfoCache) (io.ReadCloser, int64, error) {
	for _, a := range s.images {
		if a.has(info.Digest) {
			return a.GetBlob(ctx, info, cache)
		}
	}
	return nil, 0, fmt.Errorf("blob %s is not part of the index", info.Digest)
}

func (s *listSource) HasThreadSafeGetBlob() bool {
	return !slices.ContainsFunc(s.images, func(a *appendSource) bool { return !a.HasThreadSafeGetBlob() })
}

func (s *listSource) GetSignatures(context.Context, *digest.Digest) ([][]byte, error) {
	return nil, nil
}

func (s *listSource) LayerInfosForCopy(context.Context, *digest.Digest) ([]types.BlobInfo, error) {
	return nil, nil
}

// listRef is the types.ImageReference of an listSource, only ever
// copy.Image's source.
type listRef struct{ src *listSource }

func (r listRef) Transport() types.ImageTransport { return appendTransport{} }

func (r listRef) StringWithinTransport() string { return "index+" + r.src.digest.String() }

func (r listRef) DockerReference() reference.Named { return nil }

func (r listRef) PolicyConfigurationIdentity() string { return "" }

func (r listRef) PolicyConfigurationNamespaces() []string { return nil }

func (r listRef) NewImage(ctx context.Context, sys *types.SystemContext) (types.ImageCloser, error) {
	return nil, errors.New("an appended index is not a single image")
}

func (r listRef) NewImageSource(context.Context, *types.SystemContext) (types.ImageSource, error) {
	return r.src, nil
}

func (r listRef) NewImageDestination(context.Context, *types.SystemContext) (types.ImageDestination, error) {
	return nil, errors.New("an appended index cannot be a destination")
}

func (r listRef) DeleteImage(context.Context, *types.SystemContext) error {
	return errors.New("an appended index cannot be deleted")
}
