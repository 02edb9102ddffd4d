// Package layered holds what identifies an mcbake layered image: the
// labels and annotations a build sets, where the ownership manifest lives
// in the appended layer, and how to read it back (streaming only the top
// layer, and only until the manifest is found).
package layered

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/internal/manifest"
)

// Labels and annotations set by a build.
const (
	LabelManifestDigest = "io.mcbake.manifest.digest"
	LabelBaseDigest     = "io.mcbake.base.digest"
	LabelMachineConfigs = "io.mcbake.machineconfigs"

	AnnotationBaseDigest = "org.opencontainers.image.base.digest"
	AnnotationBaseName   = "org.opencontainers.image.base.name"
)

// ManifestPath is where the ownership manifest is stored in the layer.
const ManifestPath = "/usr/share/mcbake/manifest.json"

// ErrNotLayered means an image carries no mcbake manifest label.
var ErrNotLayered = errors.New("not an mcbake layered image (no " + LabelManifestDigest + " label)")

// Image is what ReadManifest needs of an opened image.
type Image interface {
	Labels() map[string]string
	// TopLayer opens the last layer's compressed blob.
	TopLayer(ctx context.Context) (io.ReadCloser, error)
}

// ReadManifest reads the embedded ownership manifest from the image's top
// layer and checks it against the manifest-digest label. It returns the
// decoded manifest and its raw bytes.
func ReadManifest(ctx context.Context, im Image) (*manifest.Manifest, []byte, error) {
	want := im.Labels()[LabelManifestDigest]
	if want == "" {
		return nil, nil, ErrNotLayered
	}
	rc, err := im.TopLayer(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer rc.Close()
	raw, err := findFile(rc, strings.TrimPrefix(ManifestPath, "/"))
	if err != nil {
		return nil, nil, fmt.Errorf("reading %s from the top layer: %w", ManifestPath, err)
	}
	if got := Digest(raw); got != want {
		return nil, nil, fmt.Errorf("embedded manifest %s does not match label %s=%s", got, LabelManifestDigest, want)
	}
	m, err := manifest.Unmarshal(raw)
	if err != nil {
		return nil, nil, err
	}
	return m, raw, nil
}

// Digest returns "sha256:<hex>" of b.
func Digest(b []byte) string {
	s := sha256.Sum256(b)
	return "sha256:" + hex.EncodeToString(s[:])
}

func findFile(r io.Reader, name string) ([]byte, error) {
	dr, err := decompress.Reader(r)
	if err != nil {
		return nil, err
	}
	defer dr.Close()
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
			return io.ReadAll(io.LimitReader(tr, 64<<20))
		}
	}
}
