package image

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"go.podman.io/common/pkg/auth"
	"go.podman.io/common/pkg/retry"
	"go.podman.io/image/v5/types"
)

// Registry is how one side of a copy talks to docker:// registries, with
// skopeo's flags. The zero value uses the defaults.
type Registry struct {
	// AuthFile is the credentials file (--authfile); "" =
	// $REGISTRY_AUTH_FILE, else the usual auth.json and Docker's config.json
	// (containers-auth.json(5)). A file that is named but missing is an
	// error rather than an anonymous request.
	AuthFile string
	// Creds is USERNAME[:PASSWORD] (--creds); it replaces the auth file.
	Creds string
	// CertDir holds ca.crt and client certificate pairs (--cert-dir); "" =
	// /etc/containers/certs.d/HOST:PORT and the like (containers-certs.d(5)).
	CertDir string
	// TLSVerify, when set, says whether to verify TLS certificates and
	// require HTTPS (--tls-verify); nil = registries.conf's choice.
	TLSVerify *bool
}

// override returns r with every field side sets replaced by side's.
func (r Registry) override(side Registry) Registry {
	if side.AuthFile != "" {
		r.AuthFile = side.AuthFile
	}
	if side.Creds != "" {
		r.Creds = side.Creds
	}
	if side.CertDir != "" {
		r.CertDir = side.CertDir
	}
	if side.TLSVerify != nil {
		r.TLSVerify = side.TLSVerify
	}
	return r
}

// apply sets r in sys, the way skopeo does.
func (r Registry) apply(sys *types.SystemContext) error {
	sys.AuthFilePath = r.AuthFile
	if sys.AuthFilePath == "" {
		sys.AuthFilePath = auth.GetDefaultAuthFile()
	}
	if err := auth.CheckAuthFile(sys.AuthFilePath); err != nil {
		return fmt.Errorf("%s: %w", sys.AuthFilePath, err)
	}
	if r.Creds != "" {
		user, pass, err := parseCreds(r.Creds)
		if err != nil {
			return err
		}
		sys.DockerAuthConfig = &types.DockerAuthConfig{Username: user, Password: pass}
	}
	sys.DockerCertPath = r.CertDir
	if r.TLSVerify != nil {
		sys.DockerInsecureSkipTLSVerify = types.NewOptionalBool(!*r.TLSVerify)
		sys.OCIInsecureSkipTLSVerify = !*r.TLSVerify
	}
	return nil
}

// parseCreds splits USERNAME[:PASSWORD] as skopeo does (a missing password
// is empty).
func parseCreds(creds string) (user, pass string, err error) {
	user, pass, _ = strings.Cut(creds, ":")
	if user == "" {
		return "", "", errors.New("credentials: the username is empty (want USERNAME[:PASSWORD])")
	}
	return user, pass, nil
}

// Retry says how transient registry failures are retried: MaxRetry more
// attempts (--retry-times; 0 = none), Delay apart (--retry-delay; 0 =
// exponential backoff from one second), as skopeo and podman do.
type Retry struct {
	MaxRetry int
	Delay    time.Duration
}

// do runs op, again after each transient failure, per containers/common's
// retry package. Authentication, missing images and certificate errors are
// not transient.
func (r Retry) do(ctx context.Context, op func() error) error {
	if r.MaxRetry <= 0 {
		return op()
	}
	return retry.IfNecessary(ctx, op, &retry.Options{MaxRetry: r.MaxRetry, Delay: r.Delay, IsErrorRetryable: retryable})
}

// retryable is retry.IsErrorRetryable looking through errors.Join too,
// which the retry package does not unwrap: an error is transient when one
// of the joined errors is.
func retryable(err error) bool {
	for err != nil {
		if retry.IsErrorRetryable(err) {
			return true
		}
		switch e := err.(type) {
		case interface{ Unwrap() []error }:
			for _, x := range e.Unwrap() {
				if retryable(x) {
					return true
				}
			}
			return false
		case interface{ Unwrap() error }:
			err = e.Unwrap()
		default:
			return false
		}
	}
	return false
}
