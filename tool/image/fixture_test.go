package image

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
)

// fixtureTime is the mtime of every fixture tar entry and the created time of
// every fixture config.
var fixtureTime = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// testEnv gives a test its own TMPDIR, HOME, empty registries.conf and cache,
// and returns options that use them with the insecure policy.
func testEnv(t *testing.T) Options {
	t.Helper()
	root := t.TempDir()
	for _, d := range []string{"tmp", "home", "cache"} {
		if err := os.Mkdir(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", filepath.Join(root, "tmp"))
	t.Setenv("HOME", filepath.Join(root, "home"))
	reg := filepath.Join(root, "registries.conf")
	if err := os.WriteFile(reg, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	return Options{InsecurePolicy: true, CacheDir: filepath.Join(root, "cache"), RegistriesConf: reg, RegistriesConfDir: reg + ".d"}
}

// checkNoTemp fails the test if anything was left in TMPDIR.
func checkNoTemp(t *testing.T) {
	t.Helper()
	entries, err := os.ReadDir(os.Getenv("TMPDIR"))
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("TMPDIR holds %v after the operation, want it empty", names(entries))
	}
}

// checkDirEntries fails unless dir holds exactly want (names, sorted).
func checkDirEntries(t *testing.T, dir string, want ...string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(want)
	if got := names(entries); !slices.Equal(got, want) {
		t.Errorf("%s holds %v, want %v", dir, got, want)
	}
}

func names(entries []os.DirEntry) []string {
	var out []string
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

// testLayer is a layer blob with its digests.
type testLayer struct {
	blob   []byte
	digest digest.Digest
	diffID digest.Digest
}

// gzipLayer builds a deterministic gzip tar layer holding files (path → content).
func gzipLayer(t *testing.T, files map[string]string) testLayer {
	t.Helper()
	raw := tarOf(t, files)
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.BestCompression) // header: no name, zero mtime
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(raw); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	return testLayer{blob: buf.Bytes(), digest: digest.FromBytes(buf.Bytes()), diffID: digest.FromBytes(raw)}
}

func tarOf(t *testing.T, files map[string]string) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		hdr := &tar.Header{
			Typeflag: tar.TypeReg, Name: p, Mode: 0o644, Size: int64(len(files[p])),
			ModTime: fixtureTime, Format: tar.FormatUSTAR,
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(files[p])); err != nil {
			t.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// testImage is a single-platform image: its blobs and manifest.
type testImage struct {
	layers   []testLayer
	config   []byte
	manifest []byte
	mimeType string
}

func (ti testImage) digest() digest.Digest { return digest.FromBytes(ti.manifest) }

func (ti testImage) digests() []digest.Digest {
	var out []digest.Digest
	for _, l := range ti.layers {
		out = append(out, l.digest)
	}
	return out
}

func (ti testImage) diffIDs() []digest.Digest {
	var out []digest.Digest
	for _, l := range ti.layers {
		out = append(out, l.diffID)
	}
	return out
}

// blobs returns the config and layer blobs.
func (ti testImage) blobs() [][]byte {
	out := [][]byte{ti.config}
	for _, l := range ti.layers {
		out = append(out, l.blob)
	}
	return out
}

// descriptor describes the manifest for an index, with platform p.
func (ti testImage) descriptor(p *imgspecv1.Platform) imgspecv1.Descriptor {
	return imgspecv1.Descriptor{MediaType: ti.mimeType, Digest: ti.digest(), Size: int64(len(ti.manifest)), Platform: p}
}

// baseLayers are the two layers of the default base image.
func baseLayers(t *testing.T) []testLayer {
	return []testLayer{
		gzipLayer(t, map[string]string{"etc/os-release": "ID=test\n", "usr/bin/tool": "#!/bin/sh\n"}),
		gzipLayer(t, map[string]string{"etc/motd": "hello\n"}),
	}
}

var baseLabels = map[string]string{"io.example.base": "1", "io.example.override": "base"}

// newImage builds an image for arch; docker selects Docker schema2 media types.
func newImage(t *testing.T, arch, variant string, docker bool, layers []testLayer) testImage {
	t.Helper()
	cfg := imgspecv1.Image{
		Created:  &fixtureTime,
		Platform: imgspecv1.Platform{OS: "linux", Architecture: arch, Variant: variant},
		Config:   imgspecv1.ImageConfig{Labels: baseLabels, Cmd: []string{"/bin/sh"}},
		RootFS:   imgspecv1.RootFS{Type: "layers"},
	}
	for i, l := range layers {
		cfg.RootFS.DiffIDs = append(cfg.RootFS.DiffIDs, l.diffID)
		cfg.History = append(cfg.History, imgspecv1.History{Created: &fixtureTime, CreatedBy: "layer " + string(rune('0'+i))})
	}
	config := mustJSON(t, cfg)
	mt, cfgType, layerType := imgspecv1.MediaTypeImageManifest, imgspecv1.MediaTypeImageConfig, imgspecv1.MediaTypeImageLayerGzip
	if docker {
		mt, cfgType, layerType = manifest.DockerV2Schema2MediaType, manifest.DockerV2Schema2ConfigMediaType, manifest.DockerV2Schema2LayerMediaType
	}
	m := imgspecv1.Manifest{
		Versioned: specs.Versioned{SchemaVersion: 2},
		MediaType: mt,
		Config:    imgspecv1.Descriptor{MediaType: cfgType, Digest: digest.FromBytes(config), Size: int64(len(config))},
	}
	for _, l := range layers {
		m.Layers = append(m.Layers, imgspecv1.Descriptor{MediaType: layerType, Digest: l.digest, Size: int64(len(l.blob))})
	}
	return testImage{layers: layers, config: config, manifest: mustJSON(t, m), mimeType: mt}
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// writeBlob stores b in an OCI layout's blobs/sha256.
func writeBlob(t *testing.T, layout string, b []byte) {
	t.Helper()
	p := blobPath(layout, digest.FromBytes(b))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeLayout writes an OCI layout whose index.json tags each descriptor.
func writeLayout(t *testing.T, dir string, tags map[string]imgspecv1.Descriptor, blobs ...[]byte) {
	t.Helper()
	for _, b := range blobs {
		writeBlob(t, dir, b)
	}
	idx := imgspecv1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imgspecv1.MediaTypeImageIndex}
	tagNames := make([]string, 0, len(tags))
	for tag := range tags {
		tagNames = append(tagNames, tag)
	}
	slices.Sort(tagNames)
	for _, tag := range tagNames {
		d := tags[tag]
		d.Annotations = map[string]string{imgspecv1.AnnotationRefName: tag}
		idx.Manifests = append(idx.Manifests, d)
	}
	writeFile(t, filepath.Join(dir, imgspecv1.ImageIndexFile), mustJSON(t, idx))
	writeFile(t, filepath.Join(dir, imgspecv1.ImageLayoutFile), []byte(`{"imageLayoutVersion":"1.0.0"}`))
}

func writeFile(t *testing.T, p string, b []byte) {
	t.Helper()
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// writeImageLayout writes ti into a new OCI layout at dir, tagged tag.
func writeImageLayout(t *testing.T, dir, tag string, ti testImage) {
	t.Helper()
	writeLayout(t, dir, map[string]imgspecv1.Descriptor{tag: ti.descriptor(nil)}, append(ti.blobs(), ti.manifest)...)
}

// writeDirImage writes a dir: transport image by hand: top is manifest.json,
// instances are stored as HEX.manifest.json, blobs as HEX.
func writeDirImage(t *testing.T, dir string, top []byte, instances [][]byte, blobs ...[]byte) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "version"), []byte("Directory Transport Version: 1.1\n"))
	writeFile(t, filepath.Join(dir, "manifest.json"), top)
	for _, m := range instances {
		writeFile(t, filepath.Join(dir, digest.FromBytes(m).Encoded()+".manifest.json"), m)
	}
	for _, b := range blobs {
		writeFile(t, filepath.Join(dir, digest.FromBytes(b).Encoded()), b)
	}
}

// baseFixture writes the default two-layer amd64 OCI base to dir/base
// (tag "base") and returns its reference and image.
func baseFixture(t *testing.T, dir string) (string, testImage) {
	t.Helper()
	ti := newImage(t, "amd64", "", false, baseLayers(t))
	layout := filepath.Join(dir, "base")
	writeImageLayout(t, layout, "base", ti)
	return "oci:" + layout + ":base", ti
}

// newLayerFixture writes the default new layer to dir/layer.tar.gz.
func newLayerFixture(t *testing.T, dir string) (NewLayer, testLayer) {
	t.Helper()
	l := gzipLayer(t, map[string]string{"etc/mcbake/owned.conf": "owned=yes\n"})
	p := filepath.Join(dir, "layer.tar.gz")
	writeFile(t, p, l.blob)
	return NewLayer{
		Path: p, Digest: l.digest, DiffID: l.diffID, Size: int64(len(l.blob)),
		MediaType: imgspecv1.MediaTypeImageLayerGzip, History: "mcbake bake test",
	}, l
}

// defaultAppend is the AppendOptions most tests use.
func defaultAppend(l NewLayer) AppendOptions {
	return AppendOptions{
		Layers: []NewLayer{l},
		Labels: map[string]string{"io.example.override": "appended", "io.mcbake.owned": "true"},
		Annotations: map[string]string{
			imgspecv1.AnnotationBaseImageName:   "example.com/base:1",
			imgspecv1.AnnotationBaseImageDigest: "sha256:" + string(bytes.Repeat([]byte("a"), 64)),
		},
		Created: time.Date(2025, 6, 7, 8, 9, 10, 0, time.UTC),
	}
}

// copyForTest copies src to dst with containers/image, as a user would with
// skopeo, to produce fixtures in other transports.
func copyForTest(t *testing.T, src, dst string, opts Options) {
	t.Helper()
	sr, dr := mustRef(t, src), mustRef(t, dst)
	sys, err := opts.systemContext()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := signature.NewPolicyContext(acceptAnything())
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := pc.Destroy(); err != nil {
			t.Error(err)
		}
	}()
	if _, err := copy.Image(context.Background(), pc, dr, sr, &copy.Options{SourceCtx: sys, DestinationCtx: sys}); err != nil {
		t.Fatalf("copying %s to %s: %v", src, dst, err)
	}
}

func mustRef(t *testing.T, s string) types.ImageReference {
	t.Helper()
	r, err := ParseReference(s)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := r.imageReference()
	if err != nil {
		t.Fatal(err)
	}
	return ref
}

// mustOpen opens ref and closes it at the end of the test.
func mustOpen(t *testing.T, ref string, opts Options) *Image {
	t.Helper()
	im, err := Open(context.Background(), ref, opts)
	if err != nil {
		t.Fatalf("Open(%s): %v", ref, err)
	}
	t.Cleanup(func() {
		if err := im.Close(); err != nil {
			t.Errorf("Close(%s): %v", ref, err)
		}
	})
	return im
}

// flipByte corrupts file p in place (same size).
func flipByte(t *testing.T, p string, at int) {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	b[at] ^= 0xff
	// Write a new file rather than modifying p: it may be hard-linked elsewhere.
	if err := os.Remove(p); err != nil {
		t.Fatal(err)
	}
	writeFile(t, p, b)
}
