package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/blobinfocache/none"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
	"go.podman.io/storage"
)

// ErrPlatformNotFound is returned by Open when an index or manifest list has
// no image for the requested platform, or a single image is for another one.
var ErrPlatformNotFound = errors.New("no image for the requested platform")

// LayerInfo describes one layer of an opened image.
type LayerInfo struct {
	Digest    digest.Digest // of the blob as OpenLayer serves it
	Size      int64
	MediaType string        // OCI form, e.g. application/vnd.oci.image.layer.v1.tar+gzip
	DiffID    digest.Digest // of the uncompressed tar
}

// Image is an opened source image, resolved to one platform. Get one from
// Open and Close it when done.
type Image struct {
	ref       string
	src       types.ImageSource
	store     storage.Store // containers-storage only; shut down by Close
	layoutDir string        // oci: only: the layout holding the blobs
	digest    digest.Digest
	// manifestMIME and manifestSize describe the platform's manifest,
	// with digest: a published index's subject (PublishIndex).
	manifestMIME string
	manifestSize int64
	config       []byte // the config in OCI form, as JSON
	configDesc   digest.Digest
	diffIDs      []digest.Digest // the config's
	layers       []LayerInfo
	descs        []imgspecv1.Descriptor // layers as OCI descriptors (with URLs, annotations)
	// unlisted lists the layers of a store image opened without them
	// (openManifestOnly), and is nil once they are listed.
	unlisted    func(context.Context) error
	annotations map[string]string
	getters     getters // containers-storage only: the layers' file getters opened so far
	// stall is the stall limit of blob reads (docker: only; 0 = none), and
	// registry the registry they read from.
	stall    time.Duration
	registry string
	// recorded is closed once recordLocations is done; mounted is a
	// MountInto under way (docker: only). recordSys is the context for
	// recordUnmounted, when Open left the records for it.
	recorded  chan struct{}
	mounted   *mounting
	recordSys *types.SystemContext
}

// Open opens ref (a "transport:..." reference), checks it against the
// signature policy, and resolves an index or manifest list to opts.Platform.
// OCI and Docker schema2 images are supported. Its errors name ref once
// ("opening REF: cause"); callers need not repeat it.
func Open(ctx context.Context, ref string, opts Options) (_ *Image, err error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err // names ref already
	}
	return openImage(ctx, r, opts, true)
}

// openManifestOnly opens ref as Open does, but a containers-storage
// image's layers are listed only when they are first needed (TopLayer):
// containers/image lists them with one locked store call per layer, and
// ManifestOf, which finds the manifest in its cache most of the time,
// needs only the config and the top layer's digest.
func openManifestOnly(ctx context.Context, ref string, opts Options) (*Image, error) {
	r, err := ParseReference(ref)
	if err != nil {
		return nil, err // names ref already
	}
	return openImage(ctx, r, opts, false)
}

func openImage(ctx context.Context, r Ref, opts Options, layers bool) (_ *Image, err error) {
	var im *Image
	err = opts.Retry.do(ctx, func() error {
		im, err = openRef(ctx, r, opts, layers)
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", r.raw, err)
	}
	return im, nil
}

func openRef(ctx context.Context, r Ref, opts Options, layers bool) (_ *Image, err error) {
	sys, err := opts.systemContext()
	if err != nil {
		return nil, err
	}
	pc, err := opts.policyContext()
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, pc.Destroy()) }()
	return open(ctx, r, opts, sys, pc, layers)
}

func open(ctx context.Context, r Ref, opts Options, sys *types.SystemContext, pc *signature.PolicyContext, layers bool) (_ *Image, err error) {
	bound, store, err := bind(r, opts)
	if err != nil {
		return nil, err
	}
	im := &Image{ref: r.raw, store: store}
	defer func() {
		if err != nil {
			err = errors.Join(err, im.Close())
		}
	}()
	if r.transport == transportOCI {
		if im.layoutDir, err = r.absPath(); err != nil {
			return nil, err
		}
	}
	// NewImageSource returns a typed nil on error: keep it out of im.src,
	// or Close would call a method on it.
	src, err := bound.NewImageSource(ctx, sys)
	if err != nil {
		return nil, err
	}
	im.src = src
	if err := checkPolicy(ctx, pc, im.src); err != nil {
		return nil, err
	}
	instance, err := chooseInstance(ctx, im.src, sys)
	if err != nil {
		return nil, err
	}
	if err := im.load(ctx, sys, instance, opts.Platform != "", layers || store == nil); err != nil {
		return nil, err
	}
	if r.transport == transportDocker {
		if opts.recordsLater {
			im.recordSys = sys
		} else {
			im.recordLocations(sys)
		}
		im.stall, im.registry = opts.stallTimeout(), registryOf(im.src)
	}
	return im, nil
}

// checkPolicy evaluates the signature policy on the image as served.
func checkPolicy(ctx context.Context, pc *signature.PolicyContext, src types.ImageSource) error {
	allowed, err := pc.IsRunningImageAllowed(ctx, image.UnparsedInstance(src, nil))
	if err != nil {
		return fmt.Errorf("signature policy: %w", err)
	}
	if !allowed {
		return errors.New("signature policy rejected the image")
	}
	return nil
}

// chooseInstance returns the instance digest for sys's platform when src is
// an index or manifest list, and nil for a single image.
func chooseInstance(ctx context.Context, src types.ImageSource, sys *types.SystemContext) (*digest.Digest, error) {
	blob, mime, err := src.GetManifest(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("reading manifest: %w", err)
	}
	if !manifest.MIMETypeIsMultiImage(mime) {
		return nil, nil
	}
	list, err := manifest.ListFromBlob(blob, mime)
	if err != nil {
		return nil, fmt.Errorf("parsing %s: %w", mime, err)
	}
	d, err := list.ChooseInstance(sys)
	if err != nil {
		return nil, fmt.Errorf("%w %s (available: %s)", ErrPlatformNotFound,
			platformString(sys.OSChoice, sys.ArchitectureChoice, sys.VariantChoice), availablePlatforms(list))
	}
	return &d, nil
}

func availablePlatforms(list manifest.List) string {
	var out []string
	for _, d := range list.Instances() {
		inst, err := list.Instance(d)
		if err != nil || inst.ReadOnly.Platform == nil {
			continue
		}
		p := inst.ReadOnly.Platform
		out = append(out, platformString(p.OS, p.Architecture, p.Variant))
	}
	if len(out) == 0 {
		return "none declared"
	}
	return strings.Join(out, ", ")
}

func platformString(os, arch, variant string) string {
	s := os + "/" + arch
	if variant != "" {
		s += "/" + variant
	}
	return s
}

var supportedManifests = []string{imgspecv1.MediaTypeImageManifest, manifest.DockerV2Schema2MediaType}

// load reads the chosen instance's manifest, config and, unless layers
// is false, layer list (see openManifestOnly).
func (im *Image) load(ctx context.Context, sys *types.SystemContext, instance *digest.Digest, checkPlatform, layers bool) error {
	unparsed := image.UnparsedInstance(im.src, instance)
	blob, mime, err := unparsed.Manifest(ctx)
	if err != nil {
		return fmt.Errorf("reading manifest: %w", err)
	}
	if !slices.Contains(supportedManifests, mime) {
		return fmt.Errorf("unsupported manifest type %q (want an OCI or Docker schema2 image)", mime)
	}
	img, err := image.FromUnparsedImage(ctx, sys, unparsed)
	if err != nil {
		return fmt.Errorf("parsing manifest: %w", err)
	}
	cfg, err := img.OCIConfig(ctx)
	if err != nil {
		return fmt.Errorf("reading config: %w", err)
	}
	if checkPlatform && instance == nil {
		if err := matchPlatform(cfg, sys); err != nil {
			return err
		}
	}
	im.configDesc = img.ConfigInfo().Digest
	if im.config, err = json.Marshal(cfg); err != nil {
		return fmt.Errorf("encoding config: %w", err)
	}
	if im.digest, err = manifestDigest(blob, instance); err != nil {
		return err
	}
	im.manifestMIME, im.manifestSize = mime, int64(len(blob))
	if im.annotations, err = manifestAnnotations(blob, mime); err != nil {
		return err
	}
	im.diffIDs = slices.Clone(cfg.RootFS.DiffIDs)
	if !layers {
		if n, m := len(img.LayerInfos()), len(im.diffIDs); n != m {
			return fmt.Errorf("manifest has %d layers but config has %d diff_ids", n, m)
		}
		im.unlisted = func(ctx context.Context) error { return im.loadLayers(ctx, img, im.diffIDs) }
		return nil
	}
	return im.loadLayers(ctx, img, im.diffIDs)
}

// listLayers lists the layers of an image opened without them.
func (im *Image) listLayers(ctx context.Context) error {
	if im.unlisted == nil {
		return nil
	}
	if err := im.unlisted(ctx); err != nil {
		return fmt.Errorf("listing layers: %w", err)
	}
	im.unlisted = nil
	return nil
}

// topLayerDigest is the digest of the top layer as Layers gives it, ""
// when there is none. A store image's layers are served uncompressed,
// under their diff IDs (LayerInfosForCopy), so its layers need not be
// listed for it.
func (im *Image) topLayerDigest() digest.Digest {
	if im.unlisted != nil {
		if n := len(im.diffIDs); n > 0 {
			return im.diffIDs[n-1]
		}
		return ""
	}
	if n := len(im.layers); n > 0 {
		return im.layers[n-1].Digest
	}
	return ""
}

func manifestDigest(blob []byte, instance *digest.Digest) (digest.Digest, error) {
	if instance != nil {
		return *instance, nil
	}
	d, err := manifest.Digest(blob)
	if err != nil {
		return "", fmt.Errorf("computing manifest digest: %w", err)
	}
	return d, nil
}

func manifestAnnotations(blob []byte, mime string) (map[string]string, error) {
	if mime != imgspecv1.MediaTypeImageManifest {
		return nil, nil
	}
	var m imgspecv1.Manifest
	if err := json.Unmarshal(blob, &m); err != nil {
		return nil, fmt.Errorf("parsing manifest: %w", err)
	}
	return m.Annotations, nil
}

// matchPlatform refuses a single-platform image whose config names another
// platform than the one explicitly requested. Missing fields match anything.
func matchPlatform(cfg *imgspecv1.Image, sys *types.SystemContext) error {
	mismatch := func(have, want string) bool { return have != "" && want != "" && have != want }
	if mismatch(cfg.OS, sys.OSChoice) || mismatch(cfg.Architecture, sys.ArchitectureChoice) ||
		mismatch(cfg.Variant, sys.VariantChoice) {
		return fmt.Errorf("%w %s: the image is for %s", ErrPlatformNotFound,
			platformString(sys.OSChoice, sys.ArchitectureChoice, sys.VariantChoice),
			platformString(cfg.OS, cfg.Architecture, cfg.Variant))
	}
	return nil
}

// loadLayers records the layers as the source can serve them (for
// containers-storage that is uncompressed, see LayerInfosForCopy).
func (im *Image) loadLayers(ctx context.Context, img types.Image, diffIDs []digest.Digest) error {
	infos, err := img.LayerInfosForCopy(ctx)
	if err != nil {
		return fmt.Errorf("listing layers: %w", err)
	}
	if infos == nil {
		infos = img.LayerInfos()
	}
	if len(infos) != len(diffIDs) {
		return fmt.Errorf("manifest has %d layers but config has %d diff_ids", len(infos), len(diffIDs))
	}
	for i, info := range infos {
		l, desc, err := im.layer(ctx, info, diffIDs[i])
		if err != nil {
			return fmt.Errorf("layer %d (%s): %w", i, info.Digest, err)
		}
		im.layers = append(im.layers, l)
		im.descs = append(im.descs, desc)
	}
	return nil
}

func (im *Image) layer(ctx context.Context, info types.BlobInfo, diffID digest.Digest) (LayerInfo, imgspecv1.Descriptor, error) {
	if err := info.Digest.Validate(); err != nil {
		return LayerInfo{}, imgspecv1.Descriptor{}, err
	}
	if err := diffID.Validate(); err != nil {
		return LayerInfo{}, imgspecv1.Descriptor{}, fmt.Errorf("diff_id: %w", err)
	}
	mt, err := ociLayerType(info.MediaType, info.Digest == diffID)
	if err != nil {
		return LayerInfo{}, imgspecv1.Descriptor{}, err
	}
	if info.Size < 0 {
		if info.Size, err = im.blobSize(ctx, info); err != nil {
			return LayerInfo{}, imgspecv1.Descriptor{}, err
		}
	}
	desc := imgspecv1.Descriptor{
		MediaType:   mt,
		Digest:      info.Digest,
		Size:        info.Size,
		URLs:        slices.Clone(info.URLs),
		Annotations: maps.Clone(info.Annotations),
	}
	return LayerInfo{Digest: info.Digest, Size: info.Size, MediaType: mt, DiffID: diffID}, desc, nil
}

// blobSize reads a blob whose size the source does not know.
func (im *Image) blobSize(ctx context.Context, info types.BlobInfo) (n int64, err error) {
	rc, _, err := im.getBlob(ctx, info, none.NoCache)
	if err != nil {
		return 0, err
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	return io.Copy(io.Discard, newVerifier(rc, info.Digest, -1))
}

// dockerLayerTypes maps Docker schema2 layer media types to OCI ones.
var dockerLayerTypes = map[string]string{
	manifest.DockerV2SchemaLayerMediaTypeUncompressed: imgspecv1.MediaTypeImageLayer,
	manifest.DockerV2Schema2LayerMediaType:            imgspecv1.MediaTypeImageLayerGzip,
	manifest.DockerV2Schema2ForeignLayerMediaType:     "application/vnd.oci.image.layer.nondistributable.v1.tar",
	manifest.DockerV2Schema2ForeignLayerMediaTypeGzip: "application/vnd.oci.image.layer.nondistributable.v1.tar+gzip",
}

// ociLayerType returns the OCI media type for a layer. A blob whose digest is
// its diff_id is an uncompressed tar whatever its manifest claims
// (docker-archive: labels such blobs "tar.gzip").
func ociLayerType(mt string, uncompressed bool) (string, error) {
	if t, ok := dockerLayerTypes[mt]; ok {
		mt = t
	}
	if !strings.HasPrefix(mt, "application/vnd.oci.image.layer.") {
		return "", fmt.Errorf("unsupported layer media type %q", mt)
	}
	if uncompressed {
		mt = strings.TrimSuffix(strings.TrimSuffix(mt, "+gzip"), "+zstd")
	}
	return mt, nil
}

// errClosed is what reading an image's layers after Close returns (an
// index of them may outlive the image).
var errClosed = errors.New("the image is closed")

// Close releases the image source and, for containers-storage, the store.
// It is safe to call more than once.
func (im *Image) Close() error {
	im.mountsStopped()
	im.locationsRecorded()
	var errs []error
	if im.src != nil {
		errs = append(errs, im.src.Close())
		im.src = nil
	}
	errs = append(errs, im.getters.close(), shutdownStore(im.store))
	im.store = nil
	return errors.Join(errs...)
}

// Reference returns the reference as given to Open.
func (im *Image) Reference() string { return im.ref }

// Digest returns the digest of the platform-specific manifest.
func (im *Image) Digest() digest.Digest { return im.digest }

// ConfigDigest is the digest of the config blob as the manifest names it:
// copies of one image in other formats or compressions keep it (and the
// layers' diff IDs) while their manifest digests differ.
func (im *Image) ConfigDigest() digest.Digest { return im.configDesc }

// DiffIDs are the layers' diff IDs, base first.
func (im *Image) DiffIDs() []digest.Digest { return slices.Clone(im.diffIDs) }

// Config returns a fresh copy of the image config in OCI form.
func (im *Image) Config() *imgspecv1.Image {
	var c imgspecv1.Image
	if err := json.Unmarshal(im.config, &c); err != nil {
		// im.config was produced by json.Marshal of this very type.
		panic(fmt.Sprintf("images: re-decoding config: %v", err))
	}
	return &c
}

// Layers returns the layers, bottom first.
func (im *Image) Layers() []LayerInfo { return slices.Clone(im.layers) }

// Labels returns a copy of the config labels (nil when there are none).
func (im *Image) Labels() map[string]string { return im.Config().Config.Labels }

// Annotations returns a copy of the manifest annotations (nil for Docker
// manifests and when there are none).
func (im *Image) Annotations() map[string]string { return maps.Clone(im.annotations) }

// OpenLayer returns the blob of layer d as stored (compressed or not, see
// LayerInfo.MediaType). The caller must close it. Reading fails at the end of
// the stream if the content does not match d.
func (im *Image) OpenLayer(ctx context.Context, d digest.Digest) (io.ReadCloser, error) {
	rc, i, err := im.openBlob(ctx, d)
	if err != nil {
		return nil, err
	}
	return verifyingReadCloser{newVerifier(rc, d, im.layers[i].Size), rc}, nil
}

// openBlob returns layer d's blob as the source serves it, unchecked, and
// the layer's position.
func (im *Image) openBlob(ctx context.Context, d digest.Digest) (io.ReadCloser, int, error) {
	i := slices.IndexFunc(im.layers, func(l LayerInfo) bool { return l.Digest == d })
	if i < 0 {
		return nil, 0, fmt.Errorf("%s is not a layer of %s", d, im.ref)
	}
	if im.src == nil {
		return nil, 0, fmt.Errorf("opening layer %s: %w", d, errClosed)
	}
	rc, _, err := im.getBlob(ctx, im.blobInfo(i), none.NoCache)
	if err != nil {
		return nil, 0, fmt.Errorf("opening layer %s: %w", d, err)
	}
	return rc, i, nil
}

// blobInfo returns layer i as the source expects to be asked for it.
func (im *Image) blobInfo(i int) types.BlobInfo {
	d := im.descs[i]
	return types.BlobInfo{Digest: d.Digest, Size: d.Size, MediaType: d.MediaType, URLs: d.URLs, Annotations: d.Annotations}
}

// TopLayer opens the image's last layer's compressed blob (the layer an
// mcbake build appends). The caller closes it.
func (im *Image) TopLayer(ctx context.Context) (io.ReadCloser, error) {
	if err := im.listLayers(ctx); err != nil {
		return nil, err
	}
	ls := im.Layers()
	if len(ls) == 0 {
		return nil, errors.New("image has no layers")
	}
	return im.OpenLayer(ctx, ls[len(ls)-1].Digest)
}
