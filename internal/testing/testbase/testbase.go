// Package testbase writes deterministic RHCOS-like base images for tests.
//
// The images are OCI image layouts, for tests, demos and benchmarks. The
// same Options always give byte-identical blobs and therefore the same
// digests: tar entries are sorted with numeric owners and mtime 0, gzip
// headers carry no name or time, and bulk content comes from a fixed-seed
// PRNG. The default content mimics what matters about an RHCOS image to
// mcbake: the top-level symlinks into /var, passwd and group split between
// /etc and /usr/lib, systemd units with presets and enablement symlinks,
// /etc files that OpenShift MachineConfigs also write, and later layers that
// use whiteouts, an opaque directory, a replaced file, a re-declared
// directory and a hard link.
package testbase

import (
	"archive/tar"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// File is one path in a layer, or in an unpacked image (see Unpack).
type File struct {
	// Path is relative to the image root, clean, without a leading slash
	// (a leading slash is accepted and dropped on input).
	Path string
	// Type is tar.TypeReg (0 is taken as TypeReg), tar.TypeDir,
	// tar.TypeSymlink or tar.TypeLink.
	Type byte
	// Mode is the permission bits, including setuid, setgid and sticky
	// (at most 07777). It is used as given: zero means mode 0000. It is
	// ignored for hard links, which share their target's mode.
	Mode int64
	// UID and GID are numeric owners.
	UID, GID int
	// Content is a regular file's bytes.
	Content []byte
	// Target is a symlink's target (as written, relative or absolute) or a
	// hard link's target path (relative to the image root, like Path).
	Target string
}

// Layer is one image layer. Within a layer, Write adds the parent
// directories a path needs that the layer does not declare, with the
// metadata they have in the layers below (0755 root:root if new), so
// lower-layer directory modes are never changed by accident.
type Layer struct {
	Files []File
	// Whiteouts are paths removed from the layers below; each is written as
	// DIR/.wh.NAME.
	Whiteouts []string
	// Opaque are directories whose lower-layer contents are hidden; each is
	// written as DIR/.wh..wh..opq. Files of this layer under DIR stay.
	Opaque []string
	// Compression is "gzip" (the default), "zstd" or "none".
	Compression string
	// Comment is the layer's history created_by text.
	Comment string
}

// Options selects what Write produces. The zero value is the default base.
type Options struct {
	// Layers replaces the default content when not nil.
	Layers []Layer
	// ExtraLayers are appended after the default (or given) layers and the
	// bulk layers.
	ExtraLayers []Layer
	// Format is "oci" (the default) or "docker": Docker schema2 manifest,
	// manifest list and config media types inside the OCI layout. Docker
	// schema2 has no zstd layers: the default content's zstd layer becomes
	// gzip, and a zstd layer in Layers or ExtraLayers is an error.
	Format string
	// Platforms are "os/arch[/variant]" strings; the default is
	// {"linux/amd64"}. More than one writes an image index (manifest list)
	// as the single entry of index.json. With the default content, the fake
	// binaries in the first layer name their architecture, so that layer
	// differs between platforms.
	Platforms []string
	// Tag is the org.opencontainers.image.ref.name annotation of the
	// index.json entry; the default is "latest".
	Tag string
	// Size, when set, adds bulk layers after the base content.
	Size *SizeOptions
	// Ostree writes every layer the way rpm-ostree publishes an ostree
	// commit: each regular file an object under
	// sysroot/ostree/repo/objects/ and a hard link to it at its path (see
	// ostreeShape). The merged tree is the same but for the objects and
	// the files' being hard links.
	Ostree bool
}

// Write writes the image layout described by opts into dir, which must not
// exist or be empty, and returns the digest of the manifest (or image index)
// that index.json points at. index.json is written last: a layout without
// it is incomplete. On error, dir may hold a partial layout.
func Write(dir string, opts Options) (digest.Digest, error) {
	o, err := resolve(opts)
	if err != nil {
		return "", err
	}
	if err := initLayout(dir); err != nil {
		return "", err
	}
	top, err := writeImages(dir, o)
	if err != nil {
		return "", err
	}
	if err := writeIndexJSON(dir, top, o.tag); err != nil {
		return "", err
	}
	return top.Digest, nil
}

// resolved is Options with defaults applied and strings parsed.
type resolved struct {
	layers    func(arch string) []Layer
	extra     []Layer
	docker    bool
	platforms []v1.Platform
	tag       string
	size      *SizeOptions
	ostree    bool
}

func resolve(opts Options) (resolved, error) {
	o := resolved{extra: opts.ExtraLayers, tag: opts.Tag, size: opts.Size, ostree: opts.Ostree}
	switch opts.Format {
	case "", "oci":
	case "docker":
		o.docker = true
	default:
		return o, fmt.Errorf("unknown format %q (want oci or docker)", opts.Format)
	}
	if o.tag == "" {
		o.tag = "latest"
	}
	var err error
	if o.platforms, err = parsePlatforms(opts.Platforms); err != nil {
		return o, err
	}
	if o.size != nil {
		if err := o.size.validate(); err != nil {
			return o, err
		}
	}
	o.layers = func(arch string) []Layer { return defaultLayers(arch, o.docker) }
	if opts.Layers != nil {
		o.layers = func(string) []Layer { return opts.Layers }
	}
	return o, nil
}

func parsePlatforms(ss []string) ([]v1.Platform, error) {
	if len(ss) == 0 {
		ss = []string{"linux/amd64"}
	}
	seen := map[string]bool{}
	var ps []v1.Platform
	for _, s := range ss {
		parts := strings.Split(s, "/")
		if len(parts) < 2 || len(parts) > 3 || parts[0] == "" || parts[1] == "" {
			return nil, fmt.Errorf("platform %q: want os/arch[/variant]", s)
		}
		if seen[s] {
			return nil, fmt.Errorf("platform %q listed twice", s)
		}
		seen[s] = true
		p := v1.Platform{OS: parts[0], Architecture: parts[1]}
		if len(parts) == 3 {
			p.Variant = parts[2]
		}
		ps = append(ps, p)
	}
	return ps, nil
}

// initLayout creates dir (or checks it is empty), blobs/sha256 and the
// oci-layout file.
func initLayout(dir string) error {
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	if len(entries) > 0 {
		return fmt.Errorf("layout directory %s is not empty", dir)
	}
	if err := os.MkdirAll(filepath.Join(dir, "blobs", "sha256"), 0o755); err != nil {
		return err
	}
	layout := []byte(`{"imageLayoutVersion":"` + v1.ImageLayoutVersion + `"}`)
	return os.WriteFile(filepath.Join(dir, v1.ImageLayoutFile), layout, 0o644)
}

// layerSpecs lists the layers of one platform's image, before planning:
// the base content, then the bulk layers, then the extra layers.
func (o resolved) layerSpecs(p v1.Platform) ([]layerSpec, error) {
	specs, err := o.appendSpecs(nil, o.layers(p.Architecture))
	if err != nil {
		return nil, err
	}
	if o.size != nil {
		specs = append(specs, o.size.specs()...)
	}
	return o.appendSpecs(specs, o.extra)
}

func (o resolved) appendSpecs(specs []layerSpec, ls []Layer) ([]layerSpec, error) {
	for _, l := range ls {
		s, err := specFromLayer(l, o.docker)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", len(specs), err)
		}
		specs = append(specs, s)
	}
	return specs, nil
}

// typeOf maps the zero Type to tar.TypeReg.
func typeOf(t byte) byte {
	if t == 0 {
		return tar.TypeReg
	}
	return t
}
