package image

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"

	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/types"
)

// appendSource is an in-process types.ImageSource serving the appended
// image: the new manifest and config from memory, the new layers from the
// caller's files, and every base layer from the base's own source. Closing it
// does not close the base.
type appendSource struct {
	base           *Image
	ref            appendRef
	manifest       []byte
	manifestDigest digest.Digest
	config         []byte
	configDigest   digest.Digest
	layers         []NewLayer
}

func newAppendSource(base *Image, ao AppendOptions) (*appendSource, error) {
	if base == nil || base.src == nil {
		return nil, errors.New("base image is not open")
	}
	config, err := appendedConfig(base, ao)
	if err != nil {
		return nil, fmt.Errorf("building config: %w", err)
	}
	m, err := appendedManifest(base, ao, config)
	if err != nil {
		return nil, fmt.Errorf("building manifest: %w", err)
	}
	s := &appendSource{
		base:           base,
		manifest:       m,
		manifestDigest: digest.FromBytes(m),
		config:         config,
		configDigest:   digest.FromBytes(config),
		layers:         slices.Clone(ao.Layers),
	}
	s.ref = appendRef{s}
	return s, nil
}

func (s *appendSource) Reference() types.ImageReference { return s.ref }

// Close does nothing: the base belongs to Append's caller.
func (s *appendSource) Close() error { return nil }

func (s *appendSource) GetManifest(_ context.Context, instance *digest.Digest) ([]byte, string, error) {
	if instance != nil && *instance != s.manifestDigest {
		return nil, "", fmt.Errorf("no manifest %s in the appended image", *instance)
	}
	return s.manifest, imgspecv1.MediaTypeImageManifest, nil
}

func (s *appendSource) GetBlob(ctx context.Context, info types.BlobInfo, cache types.BlobInfoCache) (io.ReadCloser, int64, error) {
	if info.Digest == s.configDigest {
		return io.NopCloser(bytes.NewReader(s.config)), int64(len(s.config)), nil
	}
	if l, ok := s.newLayer(info.Digest); ok {
		f, err := os.Open(l.Path)
		if err != nil {
			return nil, 0, err
		}
		return f, l.Size, nil
	}
	i := slices.IndexFunc(s.base.descs, func(d imgspecv1.Descriptor) bool { return d.Digest == info.Digest })
	if i < 0 {
		return nil, 0, fmt.Errorf("blob %s is not part of the appended image", info.Digest)
	}
	return s.base.getBlob(ctx, s.base.blobInfo(i), cache)
}

func (s *appendSource) HasThreadSafeGetBlob() bool { return s.base.src.HasThreadSafeGetBlob() }

func (s *appendSource) GetSignatures(context.Context, *digest.Digest) ([][]byte, error) {
	return nil, nil
}

// LayerInfosForCopy returns nil: the manifest is exactly what gets copied.
func (s *appendSource) LayerInfosForCopy(context.Context, *digest.Digest) ([]types.BlobInfo, error) {
	return nil, nil
}

// appendRef is the types.ImageReference of an appendSource. It only serves
// as copy.Image's source.
type appendRef struct{ src *appendSource }

func (r appendRef) Transport() types.ImageTransport { return appendTransport{} }

func (r appendRef) StringWithinTransport() string {
	return r.src.base.ref + "+" + r.src.layers[len(r.src.layers)-1].Digest.String()
}

func (r appendRef) DockerReference() reference.Named { return nil }

func (r appendRef) PolicyConfigurationIdentity() string { return "" }

func (r appendRef) PolicyConfigurationNamespaces() []string { return nil }

func (r appendRef) NewImage(ctx context.Context, sys *types.SystemContext) (types.ImageCloser, error) {
	return image.FromSource(ctx, sys, r.src)
}

func (r appendRef) NewImageSource(context.Context, *types.SystemContext) (types.ImageSource, error) {
	return r.src, nil
}

func (r appendRef) NewImageDestination(context.Context, *types.SystemContext) (types.ImageDestination, error) {
	return nil, errors.New("an appended image cannot be a destination")
}

func (r appendRef) DeleteImage(context.Context, *types.SystemContext) error {
	return errors.New("an appended image cannot be deleted")
}

// appendTransport names appendRef's transport; its references exist only in
// process and are never parsed.
type appendTransport struct{}

func (appendTransport) Name() string { return "mcbake-append" }

func (appendTransport) ParseReference(string) (types.ImageReference, error) {
	return nil, errors.New("mcbake-append references cannot be parsed")
}

func (appendTransport) ValidatePolicyConfigurationScope(string) error {
	return errors.New("mcbake-append has no policy scopes")
}

// has reports whether d is a blob of the appended image.
func (s *appendSource) has(d digest.Digest) bool {
	_, isNew := s.newLayer(d)
	return d == s.configDigest || isNew ||
		slices.ContainsFunc(s.base.descs, func(desc imgspecv1.Descriptor) bool { return desc.Digest == d })
}

// newLayer returns the new layer whose blob is d.
func (s *appendSource) newLayer(d digest.Digest) (NewLayer, bool) {
	i := slices.IndexFunc(s.layers, func(l NewLayer) bool { return l.Digest == d })
	if i < 0 {
		return NewLayer{}, false
	}
	return s.layers[i], true
}
