package lint

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"path"
	"strings"

	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/internal/images"
	"github.com/mcbake/mcbake/internal/layered"
	"github.com/mcbake/mcbake/internal/manifest"
)

// maxManifest bounds the embedded manifest read from the layer.
const maxManifest = 64 << 20

// imageInput is what verify reads of a layered image.
type imageInput struct {
	ref, digest string
	// isBase is set when the image is the base (same digest): nothing else
	// is read then.
	isBase bool
	labels map[string]string
	layer  *layerScan
	// manifest is the embedded manifest when it was found and decoded.
	manifest *manifest.Manifest
}

// layerScan is the top layer's content as a map from clean relative path.
type layerScan struct {
	entries  map[string]layerEntry
	manifest []byte // the raw embedded manifest, nil when absent
}

// layerEntry is one tar entry of the top layer.
type layerEntry struct {
	name     string
	typ      manifest.Type // or whiteout
	mode     uint32
	uid, gid int
	digest   string
	target   string
}

// whiteout is the layerEntry type of a ".wh." entry, recorded at the path
// it removes.
const whiteout manifest.Type = "whiteout"

// readImage opens a layered image and reads its labels and top layer. An
// image with the base's digest is only marked as such; an image without
// mcbake's manifest label is an input error.
func readImage(ctx context.Context, ref string, opts images.Options, baseDigest string) (_ *imageInput, err error) {
	im, err := images.Open(ctx, ref, opts)
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", ref, err)
	}
	defer func() { err = errors.Join(err, im.Close()) }()
	in := &imageInput{ref: ref, digest: im.Digest().String(), labels: im.Labels()}
	if in.digest == baseDigest {
		in.isBase = true
		return in, nil
	}
	if in.labels[layered.LabelManifestDigest] == "" {
		return nil, fmt.Errorf("%s: %w", ref, layered.ErrNotLayered)
	}
	layers := im.Layers()
	if len(layers) == 0 {
		return nil, fmt.Errorf("%s: image has no layers", ref)
	}
	rc, err := im.OpenLayer(ctx, layers[len(layers)-1].Digest)
	if err != nil {
		return nil, fmt.Errorf("%s: opening the top layer: %w", ref, err)
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	if in.layer, err = scanLayer(rc); err != nil {
		return nil, fmt.Errorf("%s: reading the top layer: %w", ref, err)
	}
	return in, nil
}

// scanLayer reads a (compressed) layer: every entry's metadata and content
// digest, and the embedded manifest's bytes.
func scanLayer(r io.Reader) (_ *layerScan, err error) {
	dr, err := decompress.Reader(r)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, dr.Close()) }()
	s := &layerScan{entries: map[string]layerEntry{}}
	tr := tar.NewReader(dr)
	want := strings.TrimPrefix(layered.ManifestPath, "/")
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return s, nil
		}
		if err != nil {
			return nil, err
		}
		e, err := s.entry(h, tr, want)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", h.Name, err)
		}
		s.entries[e.name] = e
	}
}

// entry converts one tar header (reading a regular file's content).
func (s *layerScan) entry(h *tar.Header, r io.Reader, manifestName string) (layerEntry, error) {
	name := path.Clean(strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/"))
	e := layerEntry{name: name, mode: uint32(h.Mode) & 0o7777, uid: h.Uid, gid: h.Gid, target: h.Linkname}
	if base := path.Base(name); strings.HasPrefix(base, ".wh.") {
		e.typ, e.name = whiteout, path.Join(path.Dir(name), strings.TrimPrefix(base, ".wh."))
		return e, nil
	}
	switch h.Typeflag {
	case tar.TypeReg:
		e.typ = manifest.File
		if name == manifestName {
			b, err := io.ReadAll(io.LimitReader(r, maxManifest))
			s.manifest = b
			e.digest = layered.Digest(b)
			return e, err
		}
		hash := sha256.New()
		if _, err := io.Copy(hash, r); err != nil {
			return e, err
		}
		e.digest = "sha256:" + hex.EncodeToString(hash.Sum(nil))
	case tar.TypeDir:
		e.typ = manifest.Directory
	case tar.TypeSymlink:
		e.typ = manifest.Symlink
	case tar.TypeLink:
		e.typ = manifest.Hardlink
		e.target = path.Clean(strings.TrimPrefix(e.target, "/"))
	default:
		e.typ = manifest.Type(fmt.Sprintf("tar type %q", h.Typeflag))
	}
	return e, nil
}
