package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"time"

	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
)

// NewLayer is a layer blob, already written, to put on top of a base image.
type NewLayer struct {
	Path      string        // file holding the compressed layer blob (caller owns it)
	Digest    digest.Digest // of the compressed blob
	DiffID    digest.Digest // of the uncompressed tar
	Size      int64
	MediaType string // application/vnd.oci.image.layer.v1.tar+gzip or +zstd
	History   string // created_by text for the history entry
}

// AppendOptions says what Append adds to the base image.
type AppendOptions struct {
	// Layers are the new layers, put on the base's in this order; at
	// least one.
	Layers      []NewLayer
	Labels      map[string]string // added to config.config.Labels (overriding the base's)
	Annotations map[string]string // the new manifest's annotations (the base's are not inherited)
	// Created sets config.created and the new history entries' created. The
	// zero time keeps the base's created and leaves the entries undated, so the
	// result stays reproducible.
	Created time.Time
	// Progress, when set, is told of every blob written or skipped.
	Progress func(BlobProgress)
	// Ahead are uploads of new layers to a registry destination started
	// before Append (UploadAhead): its copy waits for them, and the layers
	// they put there are not uploaded again.
	Ahead []*Upload
}

// newLayerTypes are the media types Append accepts for the new layer.
var newLayerTypes = []string{
	imgspecv1.MediaTypeImageLayerGzip, imgspecv1.MediaTypeImageLayerZstd, imgspecv1.MediaTypeImageLayer,
}

// beforeCommit, when set by tests, runs after the copy and before the
// staged destination is moved into place.
var beforeCommit func()

// Append writes base plus ao.Layers to dest (a transport reference) and returns
// the digest of the manifest written. See the package comment for what is
// atomic and reproducible. base stays open and usable; the caller closes it.
func Append(ctx context.Context, base *Image, dest string, ao AppendOptions, opts Options) (_ digest.Digest, err error) {
	if err := ao.check(); err != nil {
		return "", err
	}
	r, err := ParseReference(dest)
	if err != nil {
		return "", err
	}
	src, err := newAppendSource(base, ao)
	if err != nil {
		return "", err
	}
	co, err := copyOptions(r, opts, ao.Created)
	if err != nil {
		return "", err
	}
	if err := ctx.Err(); err != nil {
		return "", err
	}
	st, err := newStaging(r, []*Image{base}, opts)
	if err != nil {
		return "", fmt.Errorf("%s: %w", dest, err)
	}
	defer func() { err = errors.Join(err, st.close()) }()
	var written []byte
	switch s := st.(type) {
	case *ociStaging:
		if s.direct(src, opts) {
			written, err = src.manifest, s.writeDirect(ctx, src, ao.Progress)
		}
	case *directStaging:
		if s.present(ctx, src, opts) {
			written = src.manifest
			src.reportPresent(ao.Progress)
		}
	}
	if written == nil && err == nil {
		ahead := slices.DeleteFunc(slices.Clone(ao.Ahead), func(u *Upload) bool { return u == nil })
		ahead = append(ahead, uploadRest(ctx, st.reference(), co, src, ahead, opts)...)
		written, err = copyImage(ctx, readyToCopy(ctx, st.reference(), co, ahead, base), src.ref, co, reportUploaded(ao.Progress, ahead), opts.Retry)
	}
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", dest, err)
	}
	d, err := writtenDigest(written, src, r)
	if err != nil {
		return "", fmt.Errorf("writing %s: %w", dest, err)
	}
	if beforeCommit != nil {
		beforeCommit()
	}
	if err := st.commit(ctx); err != nil {
		return "", fmt.Errorf("%s: %w", dest, err)
	}
	return d, nil
}

// uploadRest starts uploading the new layers that no upload ahead is for
// (unless the repository has them: a rebuild), and the config, to a
// registry destination, in parallel, with one client (docs/design.md,
// "Registries"): copy.Image would upload them one after another, asking
// first whether each is there and in three requests each. Not for a copy
// that signs (withPresent).
func uploadRest(ctx context.Context, dest types.ImageReference, co *copy.Options, src *appendSource, ahead []*Upload, opts Options) []*Upload {
	if dest.Transport().Name() != "docker" || dest.DockerReference() == nil || signs(co) {
		return nil
	}
	var blobs []blobToPut
	for _, l := range src.layers {
		if !slices.ContainsFunc(ahead, func(u *Upload) bool { return u.digest == l.Digest }) {
			blobs = append(blobs, fileBlob(l, true))
		}
	}
	config := src.config
	blobs = append(blobs, blobToPut{digest: src.configDigest, size: int64(len(config)), open: func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(config)), nil
	}})
	return startUploads(ctx, co.DestinationCtx, dest.DockerReference(), opts.stallTimeout(), blobs)
}

// writtenDigest returns the digest of the manifest copy.Image wrote, which
// must be the one built here unless the destination needs a conversion.
func writtenDigest(written []byte, src *appendSource, r Ref) (digest.Digest, error) {
	d, err := manifest.Digest(written)
	if err != nil {
		return "", err
	}
	if r.transport != transportDockerArchive && d != src.manifestDigest {
		return "", fmt.Errorf("the destination stored manifest %s instead of %s", d, src.manifestDigest)
	}
	return d, nil
}

// check validates the new layers.
func (ao AppendOptions) check() error {
	if len(ao.Layers) == 0 {
		return errors.New("no new layer")
	}
	for _, l := range ao.Layers {
		if err := l.check(); err != nil {
			return fmt.Errorf("new layer %s: %w", l.Path, err)
		}
	}
	return nil
}

// check validates the new layer's description and that the file has its size.
func (l NewLayer) check() error {
	if !slices.Contains(newLayerTypes, l.MediaType) {
		return fmt.Errorf("unsupported media type %q", l.MediaType)
	}
	if err := l.Digest.Validate(); err != nil {
		return fmt.Errorf("digest: %w", err)
	}
	if err := l.DiffID.Validate(); err != nil {
		return fmt.Errorf("diff_id: %w", err)
	}
	fi, err := os.Stat(l.Path)
	if err != nil {
		return err
	}
	if !fi.Mode().IsRegular() {
		return errors.New("not a regular file")
	}
	if fi.Size() != l.Size {
		return fmt.Errorf("file has %d bytes, want %d", fi.Size(), l.Size)
	}
	return nil
}

// copyImage copies src to dest, again after each transient failure. The
// base was checked against the signature policy when it was opened; the
// appended image is built here, in process, and has no signatures of its
// own, so the copy accepts it as is.
func copyImage(ctx context.Context, dest, src types.ImageReference, co *copy.Options, progress func(BlobProgress), r Retry) (written []byte, err error) {
	pc, err := signature.NewPolicyContext(acceptAnything())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, pc.Destroy()) }()
	ch, stop := watchProgress(progress)
	defer stop()
	if ch != nil {
		co.Progress, co.ProgressInterval = ch, progressInterval
	}
	attempt := 0
	err = r.do(ctx, func() error {
		d := dest
		if p, ok := dest.(presentRef); ok && attempt > 0 {
			d = p.ImageReference // a retry asks the registry about every blob
		}
		attempt++
		var err error
		written, err = copyImageWAL(ctx, pc, d, src, co)
		return err
	})
	return written, err
}

// copyOptions keeps every digest (no recompression, no re-tarring, no
// manifest conversion) except for docker-archive:, which can only hold
// Docker manifests with uncompressed layers. The source side reads the
// base's blobs, the destination side writes and signs.
func copyOptions(r Ref, opts Options, created time.Time) (*copy.Options, error) {
	srcSys, err := opts.systemContext()
	if err != nil {
		return nil, err
	}
	destSys, err := opts.destinationContext()
	if err != nil {
		return nil, err
	}
	co := &copy.Options{
		SourceCtx:        srcSys,
		DestinationCtx:   destSys,
		RemoveSignatures: true,
		PreserveDigests:  r.transport != transportDockerArchive,
	}
	if err := opts.Sign.apply(co); err != nil {
		return nil, err
	}
	if !created.IsZero() {
		t := created.UTC()
		co.DestinationTimestamp = &t // oci-archive: tar header times
	}
	return co, nil
}

// appendedConfig returns base's config with the new layers, their history entries,
// labels and created time, encoded deterministically.
func appendedConfig(base *Image, ao AppendOptions) ([]byte, error) {
	c := base.Config()
	if c.RootFS.Type == "" {
		c.RootFS.Type = "layers"
	}
	var created *time.Time
	if !ao.Created.IsZero() {
		t := ao.Created.UTC()
		c.Created, created = &t, &t
	}
	for _, l := range ao.Layers {
		c.RootFS.DiffIDs = append(c.RootFS.DiffIDs, l.DiffID)
		c.History = append(c.History, imgspecv1.History{CreatedBy: l.History, Created: created})
	}
	if len(ao.Labels) > 0 {
		if c.Config.Labels == nil {
			c.Config.Labels = map[string]string{}
		}
		maps.Copy(c.Config.Labels, ao.Labels)
	}
	return json.Marshal(c)
}

// appendedManifest returns the OCI manifest for base's layers (descriptors
// unchanged but for OCI media types) plus the new layers.
func appendedManifest(base *Image, ao AppendOptions, config []byte) ([]byte, error) {
	layers := make([]imgspecv1.Descriptor, 0, len(base.descs)+len(ao.Layers))
	for _, d := range base.descs {
		d.URLs, d.Annotations = slices.Clone(d.URLs), maps.Clone(d.Annotations)
		layers = append(layers, d)
	}
	for _, l := range ao.Layers {
		layers = append(layers, imgspecv1.Descriptor{MediaType: l.MediaType, Digest: l.Digest, Size: l.Size})
	}
	m := imgspecv1.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: imgspecv1.MediaTypeImageManifest,
		Config: imgspecv1.Descriptor{
			MediaType: imgspecv1.MediaTypeImageConfig,
			Digest:    digest.FromBytes(config),
			Size:      int64(len(config)),
		},
		Layers:      layers,
		Annotations: maps.Clone(ao.Annotations),
	}
	if len(m.Annotations) == 0 {
		m.Annotations = nil
	}
	return json.Marshal(m)
}
