package image

import (
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"

	"go.podman.io/image/v5/directory"
	"go.podman.io/image/v5/docker"
	dockerarchive "go.podman.io/image/v5/docker/archive"
	ociarchive "go.podman.io/image/v5/oci/archive"
	"go.podman.io/image/v5/oci/layout"
	"go.podman.io/image/v5/types"
)

// Transport names accepted in references.
const (
	transportOCI           = "oci"
	transportOCIArchive    = "oci-archive"
	transportDockerArchive = "docker-archive"
	transportDir           = "dir"
	transportStorage       = "containers-storage"
	transportDocker        = "docker"
)

var supportedTransports = []string{
	transportOCI, transportOCIArchive, transportDockerArchive,
	transportDir, transportStorage, transportDocker,
}

// Transports are the transports mcbake reads and writes, as a
// reference spells them before the colon ("oci", "docker", ...).
func Transports() []string { return slices.Clone(supportedTransports) }

// otherTransports are containers/image transports mcbake does not offer; a
// reference naming one gets a clearer error than "missing transport".
var otherTransports = []string{"docker-daemon", "ostree", "sif", "tarball"}

// ErrMissingTransport is returned by ParseReference for a reference that does
// not start with a supported "transport:" prefix.
var ErrMissingTransport = errors.New("missing transport")

// transportHint lists the accepted prefixes for error messages.
const transportHint = "use one of oci:, oci-archive:, docker-archive:, dir:, containers-storage:, docker://"

// Ref is a parsed image reference: a transport and the transport-specific
// rest. The zero Ref is invalid; get one from ParseReference.
type Ref struct {
	raw       string
	transport string
	within    string // after "transport:"; for docker it starts with "//"
}

// ParseReference checks that ref names a supported transport and that the
// rest is valid for it. It does not contact registries or open stores.
func ParseReference(ref string) (Ref, error) {
	name, within, ok := strings.Cut(ref, ":")
	if !ok || !slices.Contains(supportedTransports, name) {
		if ok && slices.Contains(otherTransports, name) {
			return Ref{}, fmt.Errorf("%q: transport %q is not supported (%s)", ref, name, transportHint)
		}
		return Ref{}, fmt.Errorf("%q: %w (%s)", ref, ErrMissingTransport, transportHint)
	}
	r := Ref{raw: ref, transport: name, within: within}
	if err := r.validate(); err != nil {
		return Ref{}, fmt.Errorf("%q: %w", ref, err)
	}
	return r, nil
}

// String returns the reference as it was given.
func (r Ref) String() string { return r.raw }

// Transport returns the transport name, e.g. "oci" or "docker".
func (r Ref) Transport() string { return r.transport }

func (r Ref) validate() error {
	switch r.transport {
	case transportDocker:
		if !strings.HasPrefix(r.within, "//") {
			return errors.New(`registry references are written "docker://NAME"`)
		}
	case transportStorage:
		return validateStorageName(r.within)
	default:
		if r.path() == "" {
			return errors.New("missing path")
		}
	}
	_, err := r.imageReference()
	return err
}

func validateStorageName(name string) error {
	if name == "" {
		return errors.New("missing image name")
	}
	if strings.HasPrefix(name, "[") {
		return errors.New("store specifiers are not supported; use the storage root, run root and driver options")
	}
	return nil
}

// imageReference parses the reference with its containers/image transport.
// containers-storage references need a store and are made by bindStorage.
func (r Ref) imageReference() (types.ImageReference, error) {
	switch r.transport {
	case transportOCI:
		return layout.ParseReference(r.within)
	case transportOCIArchive:
		return ociarchive.ParseReference(r.within)
	case transportDockerArchive:
		return dockerarchive.ParseReference(r.within)
	case transportDir:
		return directory.Transport.ParseReference(r.within)
	case transportDocker:
		return docker.ParseReference(r.within)
	case transportStorage:
		return nil, nil
	}
	return nil, fmt.Errorf("unknown transport %q", r.transport)
}

// path returns the file system path of a file-based reference, "" for others.
// oci:, oci-archive: and docker-archive: end the path at the first colon (as
// containers/image does on Linux); dir: takes everything.
func (r Ref) path() string {
	switch r.transport {
	case transportOCI, transportOCIArchive, transportDockerArchive:
		p, _, _ := strings.Cut(r.within, ":")
		return p
	case transportDir:
		return r.within
	}
	return ""
}

// suffix returns what follows the path in a file-based reference, including
// the leading colon ("" when absent).
func (r Ref) suffix() string {
	return strings.TrimPrefix(r.within, r.path())
}

// withPath returns the containers/image reference for the same transport and
// suffix, but another path (a staging location).
func (r Ref) withPath(p string) (types.ImageReference, error) {
	moved := Ref{raw: r.transport + ":" + p + r.suffix(), transport: r.transport, within: p + r.suffix()}
	return moved.imageReference()
}

// absPath returns path() made absolute and clean.
func (r Ref) absPath() (string, error) {
	return filepath.Abs(r.path())
}

// Name returns the reference as an image name that means the same on any
// machine: a registry reference without "docker://", a containers-storage
// name, and "" for the local file transports (oci:, oci-archive:,
// docker-archive:, dir:), whose paths are this machine's.
func (r Ref) Name() string {
	switch r.transport {
	case transportDocker:
		return strings.TrimPrefix(r.within, "//")
	case transportStorage:
		return r.within
	}
	return ""
}
