package image

// What identifies an mcbake layered image: the labels and annotations a
// build sets, where the ownership manifest lives in the appended layer,
// and how to read it back (streaming only the top layer, and only until
// the manifest is found).

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	digest "github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/manifest"
)

// Labels and annotations set by a build.
const (
	LabelManifestDigest = "io.mcbake.manifest.digest"
	LabelBaseDigest     = "io.mcbake.base.digest"
	LabelMachineConfigs = "io.mcbake.machineconfigs"

	AnnotationBaseDigest = "org.opencontainers.image.base.digest"
	AnnotationBaseName   = "org.opencontainers.image.base.name"
)

// ManifestPath is where the ownership manifest is stored in the layer
// (manifest.ImagePath, which importers that do not link containers/*
// use).
const ManifestPath = manifest.ImagePath

// ErrNotLayered means an image carries no mcbake manifest label.
var ErrNotLayered = errors.New("not an mcbake layered image (no " + LabelManifestDigest + " label)")

// Layered is what ReadManifest needs of an opened image.
type Layered interface {
	Labels() map[string]string
	// TopLayer opens the last layer's compressed blob.
	TopLayer(ctx context.Context) (io.ReadCloser, error)
}

// ReadManifest reads the embedded ownership manifest from the image's top
// layer and checks it against the manifest-digest label. It returns the
// decoded manifest and its raw bytes.
func ReadManifest(ctx context.Context, im Layered) (*manifest.Manifest, []byte, error) {
	want := im.Labels()[LabelManifestDigest]
	if want == "" {
		return nil, nil, ErrNotLayered
	}
	rc, err := im.TopLayer(ctx)
	if err != nil {
		return nil, nil, err
	}
	raw, err := findFile(rc, strings.TrimPrefix(ManifestPath, "/"))
	err = errors.Join(err, rc.Close())
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s from the top layer: %w", ManifestPath, err)
	}
	if got := digest.FromBytes(raw); string(got) != want {
		return nil, nil, fmt.Errorf("embedded manifest %s does not match label %s=%s", got, LabelManifestDigest, want)
	}
	m, err := manifest.Unmarshal(raw)
	if err != nil {
		return nil, nil, err
	}
	return m, raw, nil
}

func findFile(r io.Reader, name string) (_ []byte, err error) {
	dr, err := decompress.Reader(r)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, dr.Close()) }()
	tr := tar.NewReader(dr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return nil, errors.New("not found")
		}
		if err != nil {
			return nil, err
		}
		if strings.TrimPrefix(strings.TrimPrefix(h.Name, "./"), "/") == name && h.Typeflag == tar.TypeReg {
			return io.ReadAll(io.LimitReader(tr, maxManifest))
		}
	}
}

// ID identifies the image: its reference as opened, its manifest digest,
// and its config digest and layers' diff IDs, which copies of the image
// in other formats keep.
func (im *Image) ID() manifest.ImageRef {
	return manifest.ImageRef{Reference: im.ref, Digest: im.digest, Config: im.configDesc, DiffIDs: im.DiffIDs()}
}

// ManifestOf opens the layered image ref, reads its embedded ownership
// manifest (see ReadManifest) and closes the image. It also returns the
// manifest's raw bytes and the image's identity. With a cacheDir, the manifest
// of a top layer is kept there, under manifests/<algorithm>/<the layer's
// digest>, and read from there the next time rather than from the
// layer; what is read is checked against the manifest-digest label
// either way.
func ManifestOf(ctx context.Context, ref string, opts Options, cacheDir string) (_ *manifest.Manifest, raw []byte, _ manifest.ImageRef, err error) {
	im, err := openManifestOnly(ctx, ref, opts)
	if err != nil {
		return nil, nil, manifest.ImageRef{}, err // it names ref
	}
	defer func() { err = errors.Join(err, im.Close()) }()
	m, raw, err := readManifestCached(ctx, im, cacheDir)
	if err != nil {
		return nil, nil, manifest.ImageRef{}, fmt.Errorf("%s: %w", ref, err)
	}
	return m, raw, im.ID(), nil
}

// maxManifest bounds what findFile and the manifest cache read.
const maxManifest = 64 << 20

// readManifestCached is ReadManifest through the manifest cache in
// cacheDir (none when ""). The cache is keyed by the top layer's digest,
// which names the layer's content and so the manifest it holds; a cached
// manifest that does not match the label (another image's label over
// the same layer) is not used, and ReadManifest reports the mismatch.
func readManifestCached(ctx context.Context, im *Image, cacheDir string) (*manifest.Manifest, []byte, error) {
	want, top := im.Labels()[LabelManifestDigest], im.topLayerDigest()
	var file string
	if cacheDir != "" && want != "" && top.Validate() == nil {
		file = filepath.Join(cacheDir, "manifests", top.Algorithm().String(), top.Encoded())
		if raw, ok := readCached(file); ok && digest.FromBytes(raw).String() == want {
			if m, err := manifest.Unmarshal(raw); err == nil {
				return m, raw, nil
			}
		}
	}
	m, raw, err := ReadManifest(ctx, im)
	if err == nil && file != "" {
		werr := atomicdir.WriteCacheFile(file, ".mcbake-cache-", func(f *os.File) error {
			_, err := f.Write(raw)
			return err
		})
		if werr != nil {
			slog.Debug("the manifest cache could not be written", "file", file, "err", werr)
		}
	}
	return m, raw, err
}

// readCached reads a cached manifest of at most maxManifest bytes.
func readCached(file string) ([]byte, bool) {
	f, err := os.Open(file)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxManifest+1))
	return b, err == nil && len(b) <= maxManifest
}
