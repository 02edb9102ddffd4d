package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/docker/distribution/registry/api/errcode"
	v2 "github.com/docker/distribution/registry/api/v2"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/pkg/blobinfocache/none"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// A base's index is published as an OCI artifact (docs/ci.md, "The
// published base index"): an image manifest of artifactType
// IndexArtifactType whose config is the empty descriptor, whose one layer
// is the index's view (baseindex.PublishableView), packed
// (baseindex.PackView) and compressed with zstd, and whose subject is the base's manifest. Its annotations name the
// view's format version and the chain of layers it indexes. It is found
// from the base's manifest digest through the OCI referrers API where
// the registry has it, else through the referrers tag schema: the tag
// sha256-<hex> of the index repository holds an OCI index of the
// referrers.
const (
	// v1 held the view itself; a runner looks for its own version only.
	IndexArtifactType = "application/vnd.mcbake.baseindex.v2"
	IndexLayerType    = "application/vnd.mcbake.baseindex.v2.packed+zstd"
	// AnnotationIndexFormat is the view's format version
	// (baseindex.ViewVersion).
	AnnotationIndexFormat = "io.mcbake.baseindex.format"
	// AnnotationIndexLayers and AnnotationIndexDiffIDs are the base's
	// layer blob digests and diff_ids, bottom first, comma-separated.
	AnnotationIndexLayers  = "io.mcbake.baseindex.layers"
	AnnotationIndexDiffIDs = "io.mcbake.baseindex.diff-ids"
)

// Limits on what a pull reads: a view is a few megabytes per 100,000
// paths; these leave room for the largest bases while bounding what a
// hostile registry can make a runner hold.
const (
	maxIndexManifest = 4 << 20
	maxIndexBlob     = 512 << 20
	maxIndexView     = 2 << 30
)

// ErrNoPublishedIndex is returned by PullIndex when the repository holds
// no index for the base.
var ErrNoPublishedIndex = errors.New("no published index for the base")

// ErrIndexRefused is returned by PullIndex when an index is listed for
// the base but none of those listed can be read or verified.
var ErrIndexRefused = errors.New("the published index is refused")

// IndexTransfer is what PushIndex or PullIndex did.
type IndexTransfer struct {
	// Repository is the index repository; Manifest the artifact's
	// manifest digest.
	Repository string
	Manifest   digest.Digest
	// Pushed is false for a push that found the index already there.
	Pushed bool
	// Signed is true when the push signed the index (Options.Sign).
	Signed bool
	// Bytes are the bytes that went up or came down: manifests and blob.
	Bytes int64
}

// IndexRepository returns the repository (HOST/PATH) a docker:// or
// plain HOST/PATH[:TAG][@DIGEST] reference names, and "" for a
// reference of another transport.
func IndexRepository(ref string) (string, error) {
	if t, rest, ok := strings.Cut(ref, ":"); ok && t != "docker" && !strings.Contains(t, "/") && !strings.Contains(t, ".") && !strings.HasPrefix(rest, "//") {
		if _, err := ParseReference(ref); err == nil {
			return "", nil // oci:, containers-storage: and the like
		}
	}
	named, err := reference.ParseNormalizedNamed(strings.TrimPrefix(strings.TrimPrefix(ref, "docker:"), "//"))
	if err != nil {
		return "", fmt.Errorf("index repository %q: %w", ref, err)
	}
	return reference.TrimNamed(named).String(), nil
}

// subjectTag is the referrers tag schema's tag for a manifest digest.
func subjectTag(d digest.Digest) string {
	return d.Algorithm().String() + "-" + d.Encoded()
}

// indexArtifact is a built artifact: its manifest and layer.
type indexArtifact struct {
	manifest []byte
	digest   digest.Digest
	layer    []byte
	desc     imgspecv1.Descriptor
}

// newIndexArtifact packs and compresses view and builds the artifact's
// manifest for base. The same view and base give the same bytes, on any
// runner.
func newIndexArtifact(base *Image, format int, view []byte) (*indexArtifact, error) {
	packed, err := baseindex.PackView(view)
	if err != nil {
		return nil, err
	}
	enc, err := zstd.NewWriter(nil, zstd.WithEncoderConcurrency(1), zstd.WithEncoderLevel(zstd.SpeedBetterCompression))
	if err != nil {
		return nil, err
	}
	a := &indexArtifact{layer: enc.EncodeAll(packed, nil)}
	if err := enc.Close(); err != nil {
		return nil, err
	}
	m := imgspecv1.Manifest{
		Versioned:    specs.Versioned{SchemaVersion: 2},
		MediaType:    imgspecv1.MediaTypeImageManifest,
		ArtifactType: IndexArtifactType,
		Config:       imgspecv1.DescriptorEmptyJSON,
		Layers: []imgspecv1.Descriptor{{
			MediaType: IndexLayerType, Digest: digest.FromBytes(a.layer), Size: int64(len(a.layer)),
		}},
		Subject:     &imgspecv1.Descriptor{MediaType: base.manifestMIME, Digest: base.digest, Size: base.manifestSize},
		Annotations: chainAnnotations(base, format),
	}
	if a.manifest, err = json.Marshal(m); err != nil {
		return nil, err
	}
	a.digest = digest.FromBytes(a.manifest)
	a.desc = imgspecv1.Descriptor{MediaType: imgspecv1.MediaTypeImageManifest, ArtifactType: IndexArtifactType,
		Digest: a.digest, Size: int64(len(a.manifest)), Annotations: map[string]string{AnnotationIndexFormat: fmt.Sprint(format)}}
	return a, nil
}

// chainAnnotations are the annotations naming base's layer chain and the
// format version.
func chainAnnotations(base *Image, format int) map[string]string {
	var blobs, diffIDs []string
	for _, l := range base.layers {
		blobs = append(blobs, l.Digest.String())
		diffIDs = append(diffIDs, l.DiffID.String())
	}
	return map[string]string{
		AnnotationIndexFormat:  fmt.Sprint(format),
		AnnotationIndexLayers:  strings.Join(blobs, ","),
		AnnotationIndexDiffIDs: strings.Join(diffIDs, ","),
	}
}

// PushIndex publishes view, the index of base in the format version
// format, to the repository repo, with the destination side's
// credentials and TLS settings, and signs it when opts.Sign says so
// (signIndex). It pushes nothing when the referrers tag already lists the
// same artifact. Two runners may push the same index at once: both push
// the same blobs, manifest and tag content.
func PushIndex(ctx context.Context, repo string, base *Image, format int, view []byte, opts Options) (IndexTransfer, error) {
	out := IndexTransfer{Repository: repo}
	a, err := newIndexArtifact(base, format, view)
	if err != nil {
		return out, err
	}
	out.Manifest = a.digest
	sys, err := opts.destinationContext()
	if err != nil {
		return out, err
	}
	tagRef, _, err := tagReference(repo, base.digest)
	if err != nil {
		return out, err
	}
	err = opts.Retry.do(ctx, func() error {
		var err error
		out.Pushed, out.Bytes, err = pushRacing(ctx, sys, tagRef, a)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("publishing the base index to %s: %w", repo, err)
	}
	if opts.Sign != (Signing{}) {
		named, err := reference.ParseNormalizedNamed(repo)
		if err != nil {
			return out, err
		}
		if out.Signed, err = signIndex(ctx, sys, reference.TrimNamed(named), a.digest, out.Pushed, opts); err != nil {
			return out, fmt.Errorf("signing the base index %s@%s: %w", repo, a.digest, err)
		}
	}
	return out, nil
}

// signIndex signs the artifact d of named with opts.Sign, as Append signs
// an image: the signature goes where the destination keeps them (sigstore
// attachments when registries.d enables them, else the lookaside). An
// artifact another runner had pushed already is signed only when opts'
// signature policy does not accept it as it is, so that publishing again
// adds no signature to one that already satisfies the policy, and an
// unsigned one becomes usable under a policy that requires one.
func signIndex(ctx context.Context, sys *types.SystemContext, named reference.Named, d digest.Digest, pushed bool, opts Options) (bool, error) {
	ref, err := digestReference(named, d)
	if err != nil {
		return false, err
	}
	if !pushed {
		pc, err := opts.policyContext()
		if err != nil {
			return false, err
		}
		err = checkIndexPolicy(ctx, sys, pc, ref)
		if derr := pc.Destroy(); err == nil && derr != nil {
			return false, derr
		}
		if err == nil {
			return false, nil
		}
	}
	co := &copy.Options{SourceCtx: sys, DestinationCtx: sys, ReportWriter: io.Discard, PreserveDigests: true}
	if err := opts.Sign.apply(co); err != nil {
		return false, err
	}
	// The copy onto itself reads the manifest and finds every blob there:
	// what it writes is the manifest again (the same bytes) and the
	// signatures, those the artifact had and the new one.
	err = opts.Retry.do(ctx, func() error {
		pc, err := signature.NewPolicyContext(acceptAnything())
		if err != nil {
			return err
		}
		_, err = copyImageWAL(ctx, pc, ref, ref, co)
		return errors.Join(err, pc.Destroy())
	})
	return err == nil, err
}

// digestReference is the docker reference of named@d.
func digestReference(named reference.Named, d digest.Digest) (types.ImageReference, error) {
	digested, err := reference.WithDigest(named, d)
	if err != nil {
		return nil, err
	}
	return docker.NewReference(digested)
}

// checkIndexPolicy evaluates the signature policy on the artifact ref: a
// policy that requires a signature for the index repository (a
// sigstoreSigned or signedBy requirement in policy.json) refuses an
// unsigned or wrongly signed index. A policy that decides without reading
// anything of the image (insecureAcceptAnything, reject) is evaluated
// without opening it in the registry (policyProbe).
func checkIndexPolicy(ctx context.Context, sys *types.SystemContext, pc *signature.PolicyContext, ref types.ImageReference) (err error) {
	probe := &policyProbe{ref: ref}
	if err := checkPolicy(ctx, pc, probe); !probe.read {
		return err
	}
	src, err := ref.NewImageSource(ctx, sys)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, src.Close()) }()
	return checkPolicy(ctx, pc, src)
}

// racingPushes is how many times a push is tried while another runner
// pushes the same index: the registry may refuse a manifest whose blobs
// another upload of the same digest is still linking into the
// repository (distribution answers "digest invalid").
const racingPushes = 4

// pushRacing pushes a, again when a push fails, unless the referrers tag
// lists a by then (another runner pushed it: nothing left to push).
func pushRacing(ctx context.Context, sys *types.SystemContext, tagRef types.ImageReference, a *indexArtifact) (pushed bool, n int64, err error) {
	for range racingPushes {
		pushed, n, err = pushIndex(ctx, sys, tagRef, a)
		if err == nil {
			return pushed, n, nil
		}
		if idx, terr := readReferrersTag(ctx, sys, tagRef); terr == nil && listsArtifact(idx, a.digest) {
			return false, n, nil
		}
		select {
		case <-ctx.Done():
			return false, n, err
		case <-time.After(100 * time.Millisecond):
		}
	}
	return false, n, err
}

func listsArtifact(idx imgspecv1.Index, d digest.Digest) bool {
	return slices.ContainsFunc(idx.Manifests, func(m imgspecv1.Descriptor) bool { return m.Digest == d })
}

// pushIndex pushes a's blobs and manifest, and the referrers tag listing
// it with what the tag listed before; nothing when the tag lists it.
func pushIndex(ctx context.Context, sys *types.SystemContext, tagRef types.ImageReference, a *indexArtifact) (pushed bool, n int64, err error) {
	referrers, err := readReferrersTag(ctx, sys, tagRef)
	if err != nil && !errors.Is(err, ErrNoPublishedIndex) {
		return false, 0, err
	}
	if listsArtifact(referrers, a.digest) {
		return false, 0, nil
	}
	referrers.Manifests = append(referrers.Manifests, a.desc)
	tagIndex, err := json.Marshal(referrers)
	if err != nil {
		return false, 0, err
	}
	dest, err := tagRef.NewImageDestination(ctx, sys)
	if err != nil {
		return false, 0, err
	}
	defer func() { err = errors.Join(err, dest.Close()) }()
	cache := blobInfoCache(sys)
	for _, b := range []struct {
		data     []byte
		desc     imgspecv1.Descriptor
		isConfig bool
	}{{imgspecv1.DescriptorEmptyJSON.Data, imgspecv1.DescriptorEmptyJSON, true}, {a.layer, imgspecv1.Descriptor{Digest: digest.FromBytes(a.layer), Size: int64(len(a.layer))}, false}} {
		if _, err := dest.PutBlob(ctx, bytes.NewReader(b.data), types.BlobInfo{Digest: b.desc.Digest, Size: b.desc.Size}, cache, b.isConfig); err != nil {
			return false, 0, fmt.Errorf("uploading %s: %w", b.desc.Digest, err)
		}
		n += int64(len(b.data))
	}
	if err := dest.PutManifest(ctx, a.manifest, &a.digest); err != nil {
		return false, 0, fmt.Errorf("writing the index's manifest: %w", err)
	}
	if err := dest.PutManifest(ctx, tagIndex, nil); err != nil {
		return false, 0, fmt.Errorf("writing the referrers tag: %w", err)
	}
	n += int64(len(a.manifest) + len(tagIndex))
	return true, n, dest.Commit(ctx, nil)
}

// tagReference is the docker reference of the referrers tag of subject in
// repo.
func tagReference(repo string, subject digest.Digest) (types.ImageReference, reference.Named, error) {
	named, err := reference.ParseNormalizedNamed(repo)
	if err != nil {
		return nil, nil, fmt.Errorf("index repository %q: %w", repo, err)
	}
	named = reference.TrimNamed(named)
	tagged, err := reference.WithTag(named, subjectTag(subject))
	if err != nil {
		return nil, nil, err
	}
	ref, err := docker.NewReference(tagged)
	return ref, named, err
}

// readReferrersTag returns the OCI index the referrers tag holds; an
// empty index and ErrNoPublishedIndex when the tag is not there. A tag
// that holds one of our artifacts' manifests itself reads as an index
// listing it.
func readReferrersTag(ctx context.Context, sys *types.SystemContext, tagRef types.ImageReference) (imgspecv1.Index, error) {
	idx := imgspecv1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imgspecv1.MediaTypeImageIndex, Manifests: []imgspecv1.Descriptor{}}
	src, err := tagRef.NewImageSource(ctx, sys)
	if isNotFound(err) {
		return idx, ErrNoPublishedIndex
	}
	if err != nil {
		return idx, err
	}
	defer src.Close()
	b, mime, err := src.GetManifest(ctx, nil)
	if isNotFound(err) {
		return idx, ErrNoPublishedIndex
	}
	if err != nil {
		return idx, err
	}
	return referrersIndex(b, mime)
}

// referrersIndex parses what a referrers tag or the referrers API
// returned.
func referrersIndex(b []byte, mime string) (imgspecv1.Index, error) {
	idx := imgspecv1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imgspecv1.MediaTypeImageIndex, Manifests: []imgspecv1.Descriptor{}}
	switch mime {
	case imgspecv1.MediaTypeImageIndex:
		if err := json.Unmarshal(b, &idx); err != nil {
			return idx, fmt.Errorf("parsing the referrers index: %w", err)
		}
		if idx.Manifests == nil {
			idx.Manifests = []imgspecv1.Descriptor{}
		}
	case imgspecv1.MediaTypeImageManifest:
		var m imgspecv1.Manifest
		if err := json.Unmarshal(b, &m); err != nil {
			return idx, fmt.Errorf("parsing the referrers tag's manifest: %w", err)
		}
		if m.ArtifactType == IndexArtifactType {
			idx.Manifests = append(idx.Manifests, imgspecv1.Descriptor{MediaType: mime, ArtifactType: m.ArtifactType,
				Digest: digest.FromBytes(b), Size: int64(len(b)), Annotations: m.Annotations})
		}
	}
	return idx, nil
}

// isNotFound reports whether err is a registry's "manifest unknown" or
// "repository unknown".
func isNotFound(err error) bool {
	if err == nil {
		return false
	}
	if errors.Is(err, errRegistryNotFound) {
		return true
	}
	var ec errcode.ErrorCoder
	if errors.As(err, &ec) && (ec.ErrorCode() == v2.ErrorCodeManifestUnknown || ec.ErrorCode() == v2.ErrorCodeNameUnknown) {
		return true
	}
	s := err.Error()
	return strings.Contains(s, "manifest unknown") || strings.Contains(s, "repository name not known") || strings.Contains(s, "not found")
}

// PullIndex finds the published index of base in the repository repo,
// with the destination side's credentials and TLS settings (the
// repository a build writes to, or the one the user names), and hands
// its view to accept, which verifies and keeps it (baseindex.ImportView).
// It reads the OCI referrers API first, then the referrers tag; of the
// artifacts listed, the newest first, it tries each whose annotations
// claim base's layer chain and format version, and that opts' signature
// policy accepts (a policy.json that requires a signature for the index
// repository refuses an unsigned one). ErrNoPublishedIndex when none is
// listed; when every one is refused, an error naming why.
func PullIndex(ctx context.Context, repo string, base *Image, format int, opts Options, accept func(view []byte) error) (out IndexTransfer, err error) {
	out = IndexTransfer{Repository: repo}
	sys, err := opts.destinationContext()
	if err != nil {
		return out, err
	}
	tagRef, named, err := tagReference(repo, base.digest)
	if err != nil {
		return out, err
	}
	// One client for the listing and the artifacts (containers/image
	// sets up one a reference, each with its own ping); when it cannot
	// be set up, containers/image reads the tag and the artifacts.
	var client *registryClient
	if c, err := registryHTTP(ctx, sys, named, []string{repoScope(named, transport.PullScope)}); err == nil {
		c.stall = opts.stallTimeout()
		client = &c
	} else {
		slog.Debug("reading the published index through containers/image", "repository", repo, "err", err)
	}
	var idx imgspecv1.Index
	err = opts.Retry.do(ctx, func() error {
		if client != nil {
			var n int64
			idx, n, err = listReferrers(ctx, *client, named, base.digest)
			out.Bytes += n
			if err == nil {
				return nil
			}
			idx, n, err = readReferrersTagHTTP(ctx, *client, named, base.digest)
			out.Bytes += n
			if err == nil || errors.Is(err, ErrNoPublishedIndex) {
				return err
			}
			slog.Debug("reading the referrers tag through containers/image", "repository", repo, "err", err)
		}
		idx, err = readReferrersTag(ctx, sys, tagRef)
		return err
	})
	if err != nil {
		return out, fmt.Errorf("%s: %w", repo, err)
	}
	want := chainAnnotations(base, format)
	pc, err := opts.policyContext()
	if err != nil {
		return out, err
	}
	defer func() {
		if derr := pc.Destroy(); derr != nil {
			err = errors.Join(err, derr)
		}
	}()
	var refused []error
	for _, d := range slices.Backward(idx.Manifests) {
		if d.ArtifactType != IndexArtifactType || (d.Annotations[AnnotationIndexFormat] != "" && d.Annotations[AnnotationIndexFormat] != want[AnnotationIndexFormat]) {
			continue
		}
		n, err := pullArtifact(ctx, client, sys, pc, named, d, base, want, accept)
		if errors.Is(err, errClientRead) {
			// What the client could not read (a redirect to plain HTTP,
			// say), containers/image may.
			slog.Debug("reading the published index through containers/image", "artifact", d.Digest, "err", err)
			out.Bytes += n
			n, err = pullArtifact(ctx, nil, sys, pc, named, d, base, want, accept)
		}
		out.Bytes += n
		if err == nil {
			out.Manifest = d.Digest
			return out, nil
		}
		refused = append(refused, fmt.Errorf("%s@%s: %w", repo, d.Digest, err))
	}
	if len(refused) == 0 {
		return out, fmt.Errorf("%s: %w", repo, ErrNoPublishedIndex)
	}
	return out, fmt.Errorf("%w: %w", ErrIndexRefused, errors.Join(refused...))
}

// pullArtifact reads the artifact d of named, checks it claims base's
// chain (want) and that the signature policy pc accepts it, and hands its
// view to accept. It reads through client when there is one, else
// through containers/image. It returns the bytes it read.
func pullArtifact(ctx context.Context, client *registryClient, sys *types.SystemContext, pc *signature.PolicyContext, named reference.Named, d imgspecv1.Descriptor, base *Image, want map[string]string, accept func([]byte) error) (n int64, err error) {
	if d.Size > maxIndexManifest {
		return 0, fmt.Errorf("a manifest of %d bytes", d.Size)
	}
	ref, err := digestReference(named, d.Digest)
	if err != nil {
		return 0, err
	}
	var (
		b    []byte
		blob func(imgspecv1.Descriptor) ([]byte, error)
	)
	if client != nil {
		path := "/v2/" + reference.Path(named)
		b, _, err = client.get(ctx, path+"/manifests/"+d.Digest.String(), d.Digest, maxIndexManifest, imgspecv1.MediaTypeImageManifest)
		err = clientReadError(err)
		blob = func(l imgspecv1.Descriptor) ([]byte, error) {
			b, _, err := client.get(ctx, path+"/blobs/"+l.Digest.String(), l.Digest, l.Size)
			if err != nil {
				return b, fmt.Errorf("reading the index blob: %w", clientReadError(err))
			}
			return checkIndexBlob(b, l, nil)
		}
	} else {
		var src types.ImageSource
		if src, err = ref.NewImageSource(ctx, sys); err != nil {
			return 0, err
		}
		defer func() { err = errors.Join(err, src.Close()) }()
		b, _, err = src.GetManifest(ctx, nil)
		blob = func(l imgspecv1.Descriptor) ([]byte, error) { return readIndexBlob(ctx, src, l) }
	}
	if err != nil {
		return 0, err
	}
	n = int64(len(b))
	if ok, err := manifest.MatchesDigest(b, d.Digest); err != nil || !ok {
		return n, errors.New("the manifest does not match its digest")
	}
	layer, err := checkArtifact(b, base, want)
	if err != nil {
		return n, err
	}
	if err := checkIndexPolicy(ctx, sys, pc, ref); err != nil {
		return n, err
	}
	view, err := blob(layer)
	n += int64(len(view))
	if err != nil {
		return n, err
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderMaxMemory(maxIndexView), zstd.WithDecoderConcurrency(1))
	if err != nil {
		return n, err
	}
	defer dec.Close()
	packed, err := dec.DecodeAll(view, nil)
	if err != nil {
		return n, fmt.Errorf("decompressing the index: %w", err)
	}
	unpacked, err := baseindex.UnpackView(packed, maxIndexView)
	if err != nil {
		return n, err
	}
	return n, accept(unpacked)
}

// checkArtifact checks an artifact's manifest is an index of base's
// layer chain, and returns its layer.
func checkArtifact(b []byte, base *Image, want map[string]string) (imgspecv1.Descriptor, error) {
	var m imgspecv1.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		return imgspecv1.Descriptor{}, fmt.Errorf("parsing the manifest: %w", err)
	}
	switch {
	case m.MediaType != imgspecv1.MediaTypeImageManifest || m.ArtifactType != IndexArtifactType:
		return imgspecv1.Descriptor{}, fmt.Errorf("not a base index (artifactType %q)", m.ArtifactType)
	case m.Subject == nil || m.Subject.Digest != base.digest:
		return imgspecv1.Descriptor{}, errors.New("the index is not for this base (subject)")
	case len(m.Layers) != 1 || m.Layers[0].MediaType != IndexLayerType:
		return imgspecv1.Descriptor{}, fmt.Errorf("want one layer of type %s", IndexLayerType)
	case m.Layers[0].Size <= 0 || m.Layers[0].Size > maxIndexBlob:
		return imgspecv1.Descriptor{}, fmt.Errorf("a layer of %d bytes", m.Layers[0].Size)
	}
	for k, v := range want {
		if m.Annotations[k] != v {
			return imgspecv1.Descriptor{}, fmt.Errorf("annotation %s = %q, want %q (this base's)", k, m.Annotations[k], v)
		}
	}
	return m.Layers[0], nil
}

// readIndexBlob reads the artifact's layer, checking its size and digest.
func readIndexBlob(ctx context.Context, src types.ImageSource, d imgspecv1.Descriptor) (_ []byte, err error) {
	rc, _, err := src.GetBlob(ctx, types.BlobInfo{Digest: d.Digest, Size: d.Size}, none.NoCache)
	if err != nil {
		return nil, fmt.Errorf("reading the index blob: %w", err)
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	b, err := io.ReadAll(io.LimitReader(rc, d.Size+1))
	return checkIndexBlob(b, d, err)
}

// errClientRead: pullArtifact's client could not read the artifact (not:
// it read something wrong), which containers/image may then read.
var errClientRead = errors.New("the registry client")

// clientReadError marks err, a failed read of pullArtifact's client, as
// errClientRead, unless the registry stalled (containers/image, whose
// reads of the index have no stall limit, would wait on it again).
func clientReadError(err error) error {
	var stall *StallError
	if err == nil || errors.As(err, &stall) {
		return err
	}
	return fmt.Errorf("%w: %w", errClientRead, err)
}

// checkIndexBlob checks that the artifact's layer b, read with err, has
// d's size and digest.
func checkIndexBlob(b []byte, d imgspecv1.Descriptor, err error) ([]byte, error) {
	if err != nil {
		return b, fmt.Errorf("reading the index blob: %w", err)
	}
	if int64(len(b)) != d.Size || digest.FromBytes(b) != d.Digest {
		return b, fmt.Errorf("the index blob does not match its size and digest %s", d.Digest)
	}
	return b, nil
}

// policyProbe is an image source that has a reference and nothing else:
// a signature policy that decides without reading the image
// (insecureAcceptAnything, reject) decides on it as on the image itself.
// read records that the policy asked for more; the caller then evaluates
// it on the image (checkIndexPolicy).
type policyProbe struct {
	ref  types.ImageReference
	read bool
}

var errPolicyProbe = errors.New("the signature policy reads the image")

func (p *policyProbe) Reference() types.ImageReference { return p.ref }
func (p *policyProbe) Close() error                    { return nil }
func (p *policyProbe) HasThreadSafeGetBlob() bool      { return false }

func (p *policyProbe) GetManifest(context.Context, *digest.Digest) ([]byte, string, error) {
	p.read = true
	return nil, "", errPolicyProbe
}

func (p *policyProbe) GetBlob(context.Context, types.BlobInfo, types.BlobInfoCache) (io.ReadCloser, int64, error) {
	p.read = true
	return nil, 0, errPolicyProbe
}

func (p *policyProbe) GetSignatures(context.Context, *digest.Digest) ([][]byte, error) {
	p.read = true
	return nil, errPolicyProbe
}

func (p *policyProbe) LayerInfosForCopy(context.Context, *digest.Digest) ([]types.BlobInfo, error) {
	p.read = true
	return nil, errPolicyProbe
}
