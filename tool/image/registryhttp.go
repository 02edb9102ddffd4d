package image

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/pkg/docker/config"
	"go.podman.io/image/v5/pkg/sysregistriesv2"
	"go.podman.io/image/v5/pkg/tlsclientconfig"
	"go.podman.io/image/v5/types"
)

// registryHTTP is an HTTP client for the registry of named that reaches
// and authenticates to it as containers/image would for named: the
// credentials config.GetCredentialsForRef finds (--creds, auth files and
// their entries for a repository or namespace, credential helpers),
// registryTLS's certificates and verification, and plain HTTP only for a
// registry containers/image would reach that way (--tls-verify=false, or
// insecure in registries.conf). The handshake, a ping and then basic
// credentials or a bearer token for scopes, is go-containerregistry's.
func registryHTTP(ctx context.Context, sys *types.SystemContext, named reference.Named, scopes []string) (*http.Client, name.Registry, error) {
	host := reference.Domain(named)
	tlsc, insecure, err := registryTLS(sys, host)
	if err != nil {
		return nil, name.Registry{}, err
	}
	var nopts []name.Option
	if insecure {
		nopts = append(nopts, name.Insecure)
	}
	reg, err := name.NewRegistry(host, nopts...)
	if err != nil {
		return nil, name.Registry{}, err
	}
	creds, err := config.GetCredentialsForRef(sys, named)
	if err != nil {
		return nil, name.Registry{}, err
	}
	auth := authn.Anonymous
	if creds != (types.DockerAuthConfig{}) {
		auth = authn.FromConfig(authn.AuthConfig{Username: creds.Username, Password: creds.Password, IdentityToken: creds.IdentityToken})
	}
	tr := newRegistryTransport(tlsc)
	tr.MaxIdleConnsPerHost = maxParallelMounts // keep each connection the mounts open
	rt, err := transport.NewWithContext(ctx, reg, auth, httpsOnly{tr, insecure}, scopes)
	if err != nil {
		return nil, name.Registry{}, err
	}
	return &http.Client{Transport: rt, Timeout: time.Minute}, reg, nil
}

// insecureRegistry reports whether containers/image skips TLS
// verification for host, and so may reach it over plain HTTP: registries.conf's
// insecure, overridden by --tls-verify (SystemContext.DockerInsecureSkipTLSVerify).
// A blocked registry is an error, as in containers/image.
func insecureRegistry(sys *types.SystemContext, host string) (bool, error) {
	insecure := false
	reg, err := sysregistriesv2.FindRegistry(sys, host)
	if err != nil {
		return false, err
	}
	if reg != nil {
		if reg.Blocked {
			return false, fmt.Errorf("registry %s is blocked in registries.conf", host)
		}
		insecure = reg.Insecure
	}
	if sys.DockerInsecureSkipTLSVerify != types.OptionalBoolUndefined {
		insecure = sys.DockerInsecureSkipTLSVerify == types.OptionalBoolTrue
	}
	return insecure, nil
}

// httpsOnly refuses plain HTTP unless the registry is insecure:
// go-containerregistry's handshake also tries HTTP for registries on
// loopback and private addresses, which containers/image does not.
type httpsOnly struct {
	http.RoundTripper
	insecure bool
}

func (t httpsOnly) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Scheme != "https" && !t.insecure {
		return nil, fmt.Errorf("refusing plain HTTP to %s: the registry is not insecure (--tls-verify)", req.URL.Host)
	}
	return t.RoundTripper.RoundTrip(req)
}

// registryTLS is containers/image's TLS configuration for host: the
// certificate directories (containers-certs.d(5)), and no verification
// for an insecure registry (insecureRegistry), which it returns too.
func registryTLS(sys *types.SystemContext, host string) (*tls.Config, bool, error) {
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
	insecure, err := insecureRegistry(sys, host)
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
