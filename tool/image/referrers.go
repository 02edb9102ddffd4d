package image

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"

	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker/reference"
)

// errNoReferrersAPI is listReferrers' answer for a registry without the
// OCI referrers API (distribution 2.8 among them): the caller reads the
// referrers tag instead.
var errNoReferrersAPI = errors.New("the registry has no referrers API")

// listReferrers asks client's registry for the referrers of subject in
// named whose artifactType is IndexArtifactType, through the OCI
// referrers API (GET /v2/<name>/referrers/<digest>), which
// containers/image has no client for (registryHTTP). Any answer but an
// OCI index is errNoReferrersAPI. It returns the bytes it read.
func listReferrers(ctx context.Context, client registryClient, named reference.Named, subject digest.Digest) (imgspecv1.Index, int64, error) {
	u := client.url("/v2/"+reference.Path(named)+"/referrers/"+subject.String(), url.Values{"artifactType": {IndexArtifactType}})
	status, b, mt, err := client.fetch(ctx, u, "", maxIndexManifest, imgspecv1.MediaTypeImageIndex)
	if err != nil {
		return imgspecv1.Index{}, int64(len(b)), err
	}
	if status != http.StatusOK || mt != imgspecv1.MediaTypeImageIndex {
		return imgspecv1.Index{}, int64(len(b)), fmt.Errorf("%w (%d %s)", errNoReferrersAPI, status, http.StatusText(status))
	}
	idx, err := referrersIndex(b, mt)
	return idx, int64(len(b)), err
}

// readReferrersTagHTTP is readReferrersTag through client: the OCI index
// the referrers tag of subject in named holds; ErrNoPublishedIndex when
// the tag is not there. It returns the bytes it read.
func readReferrersTagHTTP(ctx context.Context, client registryClient, named reference.Named, subject digest.Digest) (imgspecv1.Index, int64, error) {
	b, mt, err := client.get(ctx, "/v2/"+reference.Path(named)+"/manifests/"+subjectTag(subject), "", maxIndexManifest,
		imgspecv1.MediaTypeImageIndex, imgspecv1.MediaTypeImageManifest)
	if errors.Is(err, errRegistryNotFound) {
		return imgspecv1.Index{}, int64(len(b)), ErrNoPublishedIndex
	}
	if err != nil {
		return imgspecv1.Index{}, int64(len(b)), err
	}
	idx, err := referrersIndex(b, mt)
	return idx, int64(len(b)), err
}
