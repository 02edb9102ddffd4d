package image

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/pkg/tlsclientconfig"
	"go.podman.io/image/v5/types"
)

// registryClient is an HTTP client for a registry (registryHTTP), and
// the scheme to reach it with.
type registryClient struct {
	*http.Client
	reg    name.Registry
	scheme string
	// stall, when positive, bounds each wait for data of get (the
	// response, or any one read): a *StallError, as for base blobs.
	stall time.Duration
}

// url is the URL of path on the registry, with query.
func (c registryClient) url(path string, query url.Values) string {
	u := url.URL{Scheme: c.scheme, Host: c.reg.RegistryStr(), Path: path, RawQuery: query.Encode()}
	return u.String()
}

// repoScope is the token scope for action (transport.PullScope,
// PushScope) on named's repository.
func repoScope(named reference.Named, action string) string {
	return "repository:" + reference.Path(named) + ":" + action
}

// registryHTTP is an HTTP client for the registry of named that reaches
// and authenticates to it as containers/image would for named:
//
//   - TLS with registryTLS's certificates and verification; plain HTTP
//     only for an insecure registry (--tls-verify=false, or insecure in
//     registries.conf for named) and only once HTTPS failed (httpsFirst);
//   - credentials only when the registry asks for them (a 401 to the
//     ping with a Basic or Bearer challenge, the two containers/image
//     answers), those config.GetCredentialsForRef finds for named (--creds,
//     auth files and their entries for a repository or namespace,
//     credential helpers): basic, or exchanged for a bearer token for
//     scopes at the realm the registry names.
//
// The ping, the token exchange and the token's use and refresh are
// go-containerregistry's (pkg/v1/remote/transport).
func registryHTTP(ctx context.Context, sys *types.SystemContext, named reference.Named, scopes []string) (registryClient, error) {
	tlsc, insecure, err := registryTLS(sys, named)
	if err != nil {
		return registryClient{}, err
	}
	var nopts []name.Option
	if insecure {
		nopts = append(nopts, name.Insecure) // the ping tries HTTP too
	}
	reg, err := name.NewRegistry(reference.Domain(named), nopts...)
	if err != nil {
		return registryClient{}, err
	}
	tr := newRegistryTransport(tlsc)
	tr.MaxIdleConnsPerHost = maxParallelMounts // keep each connection the mounts open
	tr.ResponseHeaderTimeout = time.Minute     // not the whole body: a blob may be large
	t := &httpsFirst{RoundTripper: tr, insecure: insecure}
	pr, err := transport.Ping(ctx, reg, t)
	if err != nil {
		return registryClient{}, err
	}
	auth := authn.Anonymous
	if strings.EqualFold(pr.Scheme, "basic") || strings.EqualFold(pr.Scheme, "bearer") { // a 401 asking for credentials containers/image would give
		creds, err := config.GetCredentialsForRef(sys, named)
		if err != nil {
			return registryClient{}, err
		}
		if creds != (types.DockerAuthConfig{}) {
			auth = authn.FromConfig(authn.AuthConfig{Username: creds.Username, Password: creds.Password, IdentityToken: creds.IdentityToken})
		}
	}
	token := &transport.Token{}
	if strings.EqualFold(pr.Scheme, "bearer") {
		if token, err = transport.Exchange(ctx, reg, auth, t, scopes, pr); err != nil {
			return registryClient{}, err
		}
		if token.Token == "" {
			token.Token = token.AccessToken // some token servers answer with this one only
		}
	}
	// A bearer transport, or for any other answer a basic one (which sends
	// nothing for anonymous).
	rt, err := transport.FromToken(reg, auth, t, pr, token)
	if err != nil {
		return registryClient{}, err
	}
	scheme := "https"
	if pr.Insecure {
		scheme = "http"
	}
	return registryClient{Client: &http.Client{Transport: rt}, reg: reg, scheme: scheme}, nil
}

// insecureRegistry reports whether containers/image skips TLS
// verification for named's registry, and so may reach it over plain
// HTTP: insecure in named's entry in registries.conf (which may be for
// its namespace), overridden by --tls-verify
// (SystemContext.DockerInsecureSkipTLSVerify). A blocked registry or
// namespace is an error, as in containers/image.
func insecureRegistry(sys *types.SystemContext, named reference.Named) (bool, error) {
	insecure := false
	reg, err := sysregistriesv2.FindRegistry(sys, named.Name())
	if err != nil {
		return false, err
	}
	if reg != nil {
		if reg.Blocked {
			return false, fmt.Errorf("registry %s is blocked in registries.conf", named.Name())
		}
		insecure = reg.Insecure
	}
	if sys.DockerInsecureSkipTLSVerify != types.OptionalBoolUndefined {
		insecure = sys.DockerInsecureSkipTLSVerify == types.OptionalBoolTrue
	}
	return insecure, nil
}

// httpsFirst lets a request go over plain HTTP only to an insecure
// registry, and only to a host that an HTTPS request failed to reach, as
// containers/image falls back: go-containerregistry's ping also tries
// HTTP for registries on loopback and private addresses, and for an
// insecure one starts HTTP beside a slow HTTPS attempt.
type httpsFirst struct {
	http.RoundTripper
	insecure bool
	mu       sync.Mutex
	failed   map[string]bool // hosts that HTTPS did not reach
}

func (t *httpsFirst) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme == "https" {
		resp, err := t.RoundTripper.RoundTrip(req)
		if err != nil && t.insecure && req.Context().Err() == nil {
			t.mu.Lock()
			if t.failed == nil {
				t.failed = map[string]bool{}
			}
			t.failed[req.URL.Host] = true
			t.mu.Unlock()
		}
		return resp, err
	}
	t.mu.Lock()
	failed := t.failed[req.URL.Host]
	t.mu.Unlock()
	if !t.insecure || !failed {
		return nil, fmt.Errorf("refusing plain HTTP to %s: the registry is not insecure (--tls-verify), or HTTPS reached it", req.URL.Host)
	}
	return t.RoundTripper.RoundTrip(req)
}

// registryTLS is containers/image's TLS configuration for named's registry: the
// certificate directories (containers-certs.d(5)), and no verification
// for an insecure registry (insecureRegistry), which it returns too.
func registryTLS(sys *types.SystemContext, named reference.Named) (*tls.Config, bool, error) {
	host := reference.Domain(named)
	tlsc := &tls.Config{MinVersion: tls.VersionTLS12}
	dirs := []string{sys.DockerCertPath}
	if sys.DockerCertPath == "" {
		dirs = []string{filepath.Join("/etc/containers/certs.d", host), filepath.Join("/etc/docker/certs.d", host)}
	}
	for _, d := range dirs {
		if err := tlsclientconfig.SetupCertificates(d, tlsc); err != nil {
			return nil, false, err
		}
	}
	insecure, err := insecureRegistry(sys, named)
	if err != nil {
		return nil, false, err
	}
	tlsc.InsecureSkipVerify = insecure
	return tlsc, insecure, nil
}

// newRegistryTransport is containers/image's HTTP transport (proxies
// from the environment, its timeouts) with tlsc.
func newRegistryTransport(tlsc *tls.Config) *http.Transport {
	tr := tlsclientconfig.NewTransport()
	tr.TLSClientConfig = tlsc
	return tr
}

// errRegistryNotFound is a registry's 404 to a registryClient request
// (isNotFound).
var errRegistryNotFound = errors.New("not found")

// get GETs path (of the blob or manifest d, when it names one) with
// accept, and returns its body, at most limit bytes (more is an error),
// and media type. A 404 is errRegistryNotFound, any other answer but 200
// an error naming it.
func (c registryClient) get(ctx context.Context, path string, d digest.Digest, limit int64, accept ...string) ([]byte, string, error) {
	status, b, mt, err := c.fetch(ctx, c.url(path, nil), d, limit, accept...)
	switch {
	case err != nil:
		return b, "", err
	case status == http.StatusNotFound:
		return nil, "", fmt.Errorf("%s: %w", path, errRegistryNotFound)
	case status != http.StatusOK:
		return nil, "", fmt.Errorf("%s: %s", path, http.StatusText(status))
	}
	return b, mt, nil
}

// fetch GETs u with accept, and returns the answer's status, body (at
// most limit bytes; more is an error) and media type. With c.stall, a
// wait for data (the response, or any one read) longer than it is a
// *StallError for d.
func (c registryClient) fetch(ctx context.Context, u string, d digest.Digest, limit int64, accept ...string) (int, []byte, string, error) {
	var stall *StallError
	if c.stall > 0 {
		stall = &StallError{Blob: d, Registry: c.reg.RegistryStr(), After: c.stall}
	}
	var (
		req  *http.Request
		resp *http.Response
	)
	body, err := openGuarded(ctx, stall, func(ctx context.Context) (_ io.ReadCloser, err error) {
		if req, err = http.NewRequestWithContext(ctx, http.MethodGet, u, nil); err != nil {
			return nil, err
		}
		for _, a := range accept {
			req.Header.Add("Accept", a)
		}
		if resp, err = c.Do(req); err != nil {
			return nil, err
		}
		return resp.Body, nil
	})
	if err != nil {
		return 0, nil, "", err
	}
	defer body.Close()
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 && n <= limit {
		buf.Grow(int(n) + bytes.MinRead) // read into once, not grown by copies: the index blob is megabytes
	}
	_, err = buf.ReadFrom(io.LimitReader(body, limit+1))
	b := buf.Bytes()
	if err != nil {
		return resp.StatusCode, b, "", err
	}
	if int64(len(b)) > limit {
		return resp.StatusCode, b, "", fmt.Errorf("%s: more than %d bytes", req.URL.Path, limit)
	}
	mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	return resp.StatusCode, b, mt, nil
}
