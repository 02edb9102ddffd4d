package image

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/tlsclientconfig"
	"go.podman.io/image/v5/types"
)

// errNoReferrersAPI is listReferrers' answer for a registry without the
// OCI referrers API (distribution 2.8 among them): the caller reads the
// referrers tag instead.
var errNoReferrersAPI = errors.New("the registry has no referrers API")

// listReferrers asks the registry of named for the referrers of subject
// whose artifactType is IndexArtifactType, through the OCI referrers API
// (GET /v2/<name>/referrers/<digest>), with the credentials and TLS
// settings containers/image would use for named (sys). containers/image
// has no client for that endpoint; this one speaks HTTPS with basic or
// bearer-token authentication. Any answer but an OCI index is
// errNoReferrersAPI. It returns the bytes it read.
func listReferrers(ctx context.Context, sys *types.SystemContext, named reference.Named, subject digest.Digest) (imgspecv1.Index, int64, error) {
	host := reference.Domain(named)
	client, err := registryClient(sys, host)
	if err != nil {
		return imgspecv1.Index{}, 0, err
	}
	apiHost := host
	if host == "docker.io" {
		apiHost = "registry-1.docker.io" // as containers/image reaches it
	}
	u := url.URL{Scheme: "https", Host: apiHost, Path: "/v2/" + reference.Path(named) + "/referrers/" + subject.String(),
		RawQuery: url.Values{"artifactType": {IndexArtifactType}}.Encode()}
	creds, err := config.GetCredentials(sys, host)
	if err != nil {
		return imgspecv1.Index{}, 0, err
	}
	resp, err := getAuthorized(ctx, client, u.String(), creds)
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

// registryClient is an HTTPS client for host with containers/image's
// certificate directories (containers-certs.d(5)) and --tls-verify.
func registryClient(sys *types.SystemContext, host string) (*http.Client, error) {
	tlsc := &tls.Config{MinVersion: tls.VersionTLS12}
	dirs := []string{sys.DockerCertPath}
	if sys.DockerCertPath == "" {
		dirs = []string{filepath.Join("/etc/containers/certs.d", host), filepath.Join("/etc/docker/certs.d", host)}
	}
	for _, d := range dirs {
		if err := tlsclientconfig.SetupCertificates(d, tlsc); err != nil {
			return nil, err
		}
	}
	tlsc.InsecureSkipVerify = sys.DockerInsecureSkipTLSVerify == types.OptionalBoolTrue
	tr := tlsclientconfig.NewTransport()
	tr.TLSClientConfig = tlsc
	return &http.Client{Transport: tr, Timeout: time.Minute}, nil
}

// getAuthorized GETs u, and on a 401 again with what its challenge asks
// for: basic credentials, or a bearer token from the realm.
func getAuthorized(ctx context.Context, client *http.Client, u string, creds types.DockerAuthConfig) (*http.Response, error) {
	get := func(auth string) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
		if err != nil {
			return nil, err
		}
		req.Header.Set("Accept", imgspecv1.MediaTypeImageIndex)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		return client.Do(req)
	}
	resp, err := get("")
	if err != nil || resp.StatusCode != http.StatusUnauthorized {
		return resp, err
	}
	challenge := resp.Header.Get("WWW-Authenticate")
	resp.Body.Close()
	scheme, params := parseChallenge(challenge)
	switch {
	case scheme == "basic" && creds.Username != "":
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.SetBasicAuth(creds.Username, creds.Password)
		return get(req.Header.Get("Authorization"))
	case scheme == "bearer":
		token, err := bearerToken(ctx, client, params, creds)
		if err != nil {
			return nil, err
		}
		return get("Bearer " + token)
	}
	return get("")
}

// parseChallenge splits a WWW-Authenticate header into its scheme (lower
// case) and parameters.
func parseChallenge(h string) (string, map[string]string) {
	scheme, rest, _ := strings.Cut(strings.TrimSpace(h), " ")
	params := map[string]string{}
	for rest = strings.TrimSpace(rest); rest != ""; {
		k, v, ok := strings.Cut(rest, "=")
		if !ok {
			break
		}
		k, v = strings.TrimSpace(k), strings.TrimSpace(v)
		if strings.HasPrefix(v, `"`) {
			end := strings.Index(v[1:], `"`)
			if end < 0 {
				break
			}
			params[k], rest = v[1:end+1], strings.TrimPrefix(strings.TrimSpace(v[end+2:]), ",")
		} else {
			val, after, _ := strings.Cut(v, ",")
			params[k], rest = val, after
		}
		rest = strings.TrimSpace(rest)
	}
	return strings.ToLower(scheme), params
}

// bearerToken gets a token from the challenge's realm (the distribution
// token protocol).
func bearerToken(ctx context.Context, client *http.Client, params map[string]string, creds types.DockerAuthConfig) (string, error) {
	realm, err := url.Parse(params["realm"])
	if err != nil || realm.Scheme != "https" {
		return "", fmt.Errorf("bearer realm %q: want an https URL", params["realm"])
	}
	q := realm.Query()
	for _, k := range []string{"service", "scope"} {
		if params[k] != "" {
			q.Set(k, params[k])
		}
	}
	realm.RawQuery = q.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, realm.String(), nil)
	if err != nil {
		return "", err
	}
	if creds.Username != "" {
		req.SetBasicAuth(creds.Username, creds.Password)
	}
	resp, err := client.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("token from %s: %s", realm.Host, resp.Status)
	}
	var t struct {
		Token       string `json:"token"`
		AccessToken string `json:"access_token"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 1<<20)).Decode(&t); err != nil {
		return "", fmt.Errorf("token from %s: %w", realm.Host, err)
	}
	if t.Token == "" {
		t.Token = t.AccessToken
	}
	return t.Token, nil
}
