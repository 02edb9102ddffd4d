package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"
)

// errNoReferrersAPI is listReferrers' answer for a registry without the
// OCI referrers API (distribution 2.8 among them): the caller reads the
// referrers tag instead.
var errNoReferrersAPI = errors.New("the registry has no referrers API")

// listReferrers asks the registry of named for the referrers of subject
// whose artifactType is IndexArtifactType, through the OCI referrers API
// (GET /v2/<name>/referrers/<digest>), with the credentials and TLS
// settings containers/image would use for named (sys): containers/image
// has no client for that endpoint (registryHTTP). Any answer but an OCI
// index is errNoReferrersAPI. It returns the bytes it read.
func listReferrers(ctx context.Context, sys *types.SystemContext, named reference.Named, subject digest.Digest) (imgspecv1.Index, int64, error) {
	client, reg, err := registryHTTP(ctx, sys, named, []string{"repository:" + reference.Path(named) + ":" + transport.PullScope})
	if err != nil {
		return imgspecv1.Index{}, 0, err
	}
	u := url.URL{Scheme: "https", Host: reg.RegistryStr(), Path: "/v2/" + reference.Path(named) + "/referrers/" + subject.String(),
		RawQuery: url.Values{"artifactType": {IndexArtifactType}}.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return imgspecv1.Index{}, 0, err
	}
	req.Header.Set("Accept", imgspecv1.MediaTypeImageIndex)
	resp, err := client.Do(req)
	if err != nil {
		return imgspecv1.Index{}, 0, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, maxIndexManifest))
	if err != nil {
		return imgspecv1.Index{}, int64(len(b)), err
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if resp.StatusCode != http.StatusOK || mt != imgspecv1.MediaTypeImageIndex {
		return imgspecv1.Index{}, int64(len(b)), fmt.Errorf("%w (%s)", errNoReferrersAPI, resp.Status)
	}
	idx, err := referrersIndex(b, mt)
	return idx, int64(len(b)), err
}
