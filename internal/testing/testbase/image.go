package testbase

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Docker schema2 media types (the OCI ones come from image-spec).
const (
	mediaTypeDockerManifest     = "application/vnd.docker.distribution.manifest.v2+json"
	mediaTypeDockerManifestList = "application/vnd.docker.distribution.manifest.list.v2+json"
	mediaTypeDockerConfig       = "application/vnd.docker.container.image.v1+json"
	mediaTypeDockerLayerGzip    = "application/vnd.docker.image.rootfs.diff.tar.gzip"
	mediaTypeDockerLayer        = "application/vnd.docker.image.rootfs.diff.tar"
)

// Title is the org.opencontainers.image.title label of every image Write
// produces.
const Title = "rhcos-like-test-base"

// created is the fixed creation time of every image and history entry.
// Created is every test base's creation time (config and history).
var Created = time.Date(2025, time.January, 1, 0, 0, 0, 0, time.UTC)

var created = Created

// writeImages writes one image per platform and, for several platforms,
// the index listing them; it returns the descriptor index.json points at.
func writeImages(dir string, o resolved) (v1.Descriptor, error) {
	blobDir := filepath.Join(dir, "blobs", "sha256")
	var manifests []v1.Descriptor
	for _, p := range o.platforms {
		desc, err := writeImage(blobDir, o, p)
		if err != nil {
			return v1.Descriptor{}, fmt.Errorf("platform %s: %w", platformString(p), err)
		}
		manifests = append(manifests, desc)
	}
	if len(manifests) == 1 {
		return manifests[0], nil
	}
	mediaType := v1.MediaTypeImageIndex
	if o.docker {
		mediaType = mediaTypeDockerManifestList
	}
	index := v1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: mediaType, Manifests: manifests}
	desc, err := writeJSONBlob(blobDir, mediaType, index)
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("writing image index: %w", err)
	}
	return desc, nil
}

// writeImage plans and writes one platform's layers, config and manifest.
func writeImage(blobDir string, o resolved, p v1.Platform) (v1.Descriptor, error) {
	specs, err := o.layerSpecs(p)
	if err != nil {
		return v1.Descriptor{}, err
	}
	if len(specs) == 0 {
		return v1.Descriptor{}, fmt.Errorf("image has no layers")
	}
	planned, err := plan(specs)
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("planning layers: %w", err)
	}
	if o.ostree {
		planned = ostreeShape(planned)
	}
	layers, err := writeLayers(blobDir, planned, o.docker)
	if err != nil {
		return v1.Descriptor{}, err
	}
	configType, manifestType := v1.MediaTypeImageConfig, v1.MediaTypeImageManifest
	if o.docker {
		configType, manifestType = mediaTypeDockerConfig, mediaTypeDockerManifest
	}
	config, err := writeJSONBlob(blobDir, configType, imageConfig(p, planned, layers))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("writing config: %w", err)
	}
	desc, err := writeJSONBlob(blobDir, manifestType, manifest(manifestType, config, layers))
	if err != nil {
		return v1.Descriptor{}, fmt.Errorf("writing manifest: %w", err)
	}
	desc.Platform = &p
	return desc, nil
}

func manifest(mediaType string, config v1.Descriptor, layers []layerResult) v1.Manifest {
	m := v1.Manifest{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: mediaType, Config: config}
	for _, l := range layers {
		m.Layers = append(m.Layers, l.desc)
	}
	return m
}

// imageConfig is the image configuration: platform, labels of a bootable
// ostree container image, diff IDs and one history entry per layer.
func imageConfig(p v1.Platform, planned []plannedLayer, layers []layerResult) v1.Image {
	img := v1.Image{
		Created:  &created,
		Author:   "mcbake testbase",
		Platform: v1.Platform{OS: p.OS, Architecture: p.Architecture, Variant: p.Variant},
		Config: v1.ImageConfig{
			Env: []string{"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin"},
			Cmd: []string{"/bin/bash"},
			Labels: map[string]string{
				v1.AnnotationTitle: Title,
				"containers.bootc": "1",
				"ostree.bootable":  "true",
				"version":          baseVersion,
			},
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	for i, l := range layers {
		img.RootFS.DiffIDs = append(img.RootFS.DiffIDs, l.diffID)
		createdBy := planned[i].comment
		if createdBy == "" {
			createdBy = fmt.Sprintf("testbase: layer %d", i)
		}
		img.History = append(img.History, v1.History{Created: &created, CreatedBy: createdBy})
	}
	return img
}

// writeIndexJSON writes index.json with top as its single, tagged entry.
func writeIndexJSON(dir string, top v1.Descriptor, tag string) error {
	top.Annotations = map[string]string{v1.AnnotationRefName: tag}
	index := v1.Index{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: v1.MediaTypeImageIndex,
		Manifests: []v1.Descriptor{top},
	}
	b, err := json.Marshal(index)
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "index.json"), b, 0o644)
}

func platformString(p v1.Platform) string {
	s := p.OS + "/" + p.Architecture
	if p.Variant != "" {
		s += "/" + p.Variant
	}
	return s
}

// blobPath is where a blob lives in a layout.
func blobPath(dir string, d digest.Digest) string {
	return filepath.Join(dir, "blobs", d.Algorithm().String(), d.Encoded())
}
