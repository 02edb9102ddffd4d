package image

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"time"

	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/pkg/cli/environment"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
)

// Options carries the settings every image operation shares. The zero value
// uses the system's configuration and the host platform. Big temporary files
// (unpacked archives) go to $TMPDIR when it is set, else /var/tmp.
//
// Registry settings follow skopeo (containers-auth.json(5),
// containers-certs.d(5), containers-registries.conf(5)): Registry applies to
// both sides of a copy, and Source (the base, every image Open reads) and
// Destination (what Append writes) override it field by field.
type Options struct {
	SignaturePolicy string // --signature-policy FILE
	InsecurePolicy  bool   // --insecure-policy: accept anything
	Registry               // --authfile, --creds, --cert-dir, --tls-verify
	// Source and Destination override Registry for one side: --src-* and
	// --dest-* (a field left empty takes Registry's).
	Source, Destination Registry
	Platform            string // "os/arch[/variant]"; "" = host's (runtime.GOOS/GOARCH)
	// containers-storage overrides; "" = defaults from the usual storage.conf.
	StorageRoot, StorageRunRoot, StorageDriver string
	// CacheDir is the blob-info cache directory; "" = $XDG_CACHE_HOME/mcbake/blobinfo.
	CacheDir string
	// RegistriesConf replaces registries.conf (--registries-conf); "" =
	// $CONTAINERS_REGISTRIES_CONF, else the system's. As in skopeo, the
	// drop-in directory stays the system's unless RegistriesConfDir is set.
	RegistriesConf, RegistriesConfDir string
	// RegistriesDir is the registries.d directory (--registries.d): where
	// signatures are looked up and whether sigstore attachments are used
	// (containers-registries.d(5)); "" = the system's.
	RegistriesDir string
	// Retry says how often a registry operation that failed with a
	// transient error (a refused connection, a 5xx) is tried again.
	Retry Retry
	// StallTimeout bounds how long a read of a layer blob from a registry
	// waits for data (the response, or any one read) before it fails with
	// a *StallError; 0 = DefaultStallTimeout, negative = no limit.
	StallTimeout time.Duration
	// Sign signs what Append writes.
	Sign Signing

	// recordsLater: Open does not record a docker:// image's layers in the
	// blob-info cache; OpenBase sets it when it mounts them itself
	// (BaseOptions.MountInto, Image.recordUnmounted).
	recordsLater bool
}

// ErrNoPolicy is returned when no signature policy was given, none is
// installed, and the insecure policy was not requested.
var ErrNoPolicy = errors.New("no signature policy found")

// systemPolicyPath is where signature.DefaultPolicy looks after the user's
// file; a variable only so tests can point it at a temporary directory.
var systemPolicyPath = "/etc/containers/policy.json"

// SystemContext is the containers/image configuration o describes for
// reading images (the Source side), for code that drives containers/image
// through another library (buildah, which reads and writes with one).
func (o Options) SystemContext() (*types.SystemContext, error) {
	return o.systemContext()
}

// insecurePolicyJSON accepts any image.
const insecurePolicyJSON = `{"default": [{"type": "insecureAcceptAnything"}]}` + "\n"

// PolicyFile returns a signature policy file for tools that take only a
// path (buildah): the --signature-policy file, for --insecure-policy a
// temporary accept-anything file (cleanup removes it), else the installed
// policy (ErrNoPolicy when there is none).
func (o Options) PolicyFile() (path string, cleanup func() error, err error) {
	none := func() error { return nil }
	switch {
	case o.InsecurePolicy && o.SignaturePolicy != "":
		return "", none, errors.New("--insecure-policy and --signature-policy are mutually exclusive")
	case o.SignaturePolicy != "":
		return o.SignaturePolicy, none, nil
	case !o.InsecurePolicy:
		p, err := installedPolicyPath()
		return p, none, err
	}
	dir, err := os.MkdirTemp("", "mcbake-policy-")
	if err != nil {
		return "", none, err
	}
	cleanup = func() error { return os.RemoveAll(dir) }
	path = filepath.Join(dir, "policy.json")
	if err := os.WriteFile(path, []byte(insecurePolicyJSON), 0o644); err != nil {
		return "", none, errors.Join(err, cleanup())
	}
	return path, cleanup, nil
}

// systemContext is the containers/image configuration of the source side.
func (o Options) systemContext() (*types.SystemContext, error) {
	return o.sideContext(o.Source)
}

// destinationContext is the configuration of the destination side.
func (o Options) destinationContext() (*types.SystemContext, error) {
	return o.sideContext(o.Destination)
}

// DestinationSystemContext is the containers/image configuration for
// writing images, for code that drives containers/image through another
// library (buildah). SystemContext is the one for reading.
func (o Options) DestinationSystemContext() (*types.SystemContext, error) {
	return o.destinationContext()
}

// sideContext turns opts, with side's registry overrides, into the
// containers/image configuration.
func (o Options) sideContext(side Registry) (*types.SystemContext, error) {
	p, err := o.PlatformSpec()
	if err != nil {
		return nil, err
	}
	cache, err := o.cacheDir()
	if err != nil {
		return nil, err
	}
	sys := &types.SystemContext{
		BlobInfoCacheDir:            cache,
		SystemRegistriesConfPath:    o.RegistriesConf,
		SystemRegistriesConfDirPath: o.RegistriesConfDir,
		RegistriesDirPath:           o.RegistriesDir,
		OSChoice:                    p.OS,
		ArchitectureChoice:          p.Architecture,
		VariantChoice:               p.Variant,
		OCIAcceptUncompressedLayers: true,
		// containers/image ignores $TMPDIR for big files (archives are
		// unpacked there); honour it like podman does.
		BigFilesTemporaryDir: os.Getenv("TMPDIR"),
	}
	if err := environment.UpdateRegistriesConf(sys); err != nil {
		return nil, err
	}
	if err := o.Registry.override(side).apply(sys); err != nil {
		return nil, err
	}
	return sys, nil
}

func (o Options) cacheDir() (string, error) {
	if o.CacheDir != "" {
		return o.CacheDir, nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("choosing a blob-info cache directory: %w", err)
	}
	return filepath.Join(dir, "mcbake", "blobinfo"), nil
}

// PlatformSpec parses o.Platform, defaulting to the host's OS and
// architecture.
func (o Options) PlatformSpec() (imgspecv1.Platform, error) {
	if o.Platform == "" {
		return imgspecv1.Platform{OS: runtime.GOOS, Architecture: runtime.GOARCH}, nil
	}
	parts := strings.Split(o.Platform, "/")
	if (len(parts) != 2 && len(parts) != 3) || slices.Contains(parts, "") {
		return imgspecv1.Platform{}, fmt.Errorf("platform %q: want os/arch[/variant]", o.Platform)
	}
	p := imgspecv1.Platform{OS: parts[0], Architecture: parts[1]}
	if len(parts) == 3 {
		p.Variant = parts[2]
	}
	return p, nil
}

// policy returns the signature policy opts ask for: --insecure-policy, the
// --signature-policy file, or the installed policy, in that order.
func (o Options) policy() (*signature.Policy, error) {
	switch {
	case o.InsecurePolicy && o.SignaturePolicy != "":
		return nil, errors.New("--insecure-policy and --signature-policy are mutually exclusive")
	case o.InsecurePolicy:
		return acceptAnything(), nil
	case o.SignaturePolicy != "":
		return readPolicy(o.SignaturePolicy)
	}
	path, err := installedPolicyPath()
	if err != nil {
		return nil, err
	}
	return readPolicy(path)
}

func readPolicy(path string) (*signature.Policy, error) {
	p, err := signature.NewPolicyFromFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading signature policy: %w", err)
	}
	return p, nil
}

func acceptAnything() *signature.Policy {
	return &signature.Policy{Default: signature.PolicyRequirements{signature.NewPRInsecureAcceptAnything()}}
}

// installedPolicyPath finds the policy the way signature.DefaultPolicy does
// ($HOME/.config/containers/policy.json, then /etc/containers/policy.json),
// but reports a missing policy as ErrNoPolicy with advice.
func installedPolicyPath() (string, error) {
	var candidates []string
	if home, err := os.UserHomeDir(); err == nil { // $HOME now, not cached
		candidates = append(candidates, filepath.Join(home, ".config", "containers", "policy.json"))
	}
	candidates = append(candidates, systemPolicyPath)
	for _, c := range candidates {
		_, err := os.Stat(c)
		if err == nil {
			return c, nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return "", fmt.Errorf("looking for a signature policy: %w", err)
		}
	}
	return "", fmt.Errorf("%w (looked at %s): pass --insecure-policy or --signature-policy FILE",
		ErrNoPolicy, strings.Join(candidates, ", "))
}

// policyContext builds the policy context for opts; the caller must Destroy it.
func (o Options) policyContext() (*signature.PolicyContext, error) {
	p, err := o.policy()
	if err != nil {
		return nil, err
	}
	return signature.NewPolicyContext(p)
}
