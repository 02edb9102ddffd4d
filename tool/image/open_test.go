package image

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"
)

// wantLayers lists ti's layers as Open should report them. uncompressed is
// for transports that store layers as plain tar (docker-archive:).
func wantLayers(ti testImage, uncompressed bool) []LayerInfo {
	var out []LayerInfo
	for _, l := range ti.layers {
		li := LayerInfo{Digest: l.digest, Size: int64(len(l.blob)), MediaType: imgspecv1.MediaTypeImageLayerGzip, DiffID: l.diffID}
		if uncompressed {
			li.Digest, li.MediaType = l.diffID, imgspecv1.MediaTypeImageLayer
			li.Size = -1 // checked separately: tar size
		}
		out = append(out, li)
	}
	return out
}

// readLayer reads a whole layer through OpenLayer.
func readLayer(t *testing.T, im *Image, d digest.Digest) ([]byte, error) {
	t.Helper()
	rc, err := im.OpenLayer(context.Background(), d)
	if err != nil {
		return nil, err
	}
	b, err := io.ReadAll(rc)
	if cerr := rc.Close(); cerr != nil {
		t.Errorf("closing layer %s: %v", d, cerr)
	}
	return b, err
}

func TestOpenTransports(t *testing.T) {
	opts := testEnv(t)
	dir := t.TempDir()
	base, ti := baseFixture(t, dir)
	refs := map[string]bool{ // reference → layers stored uncompressed
		base: false,
		"oci-archive:" + filepath.Join(dir, "a.tar") + ":img": false,
		"docker-archive:" + filepath.Join(dir, "d.tar"):       true,
		"dir:" + filepath.Join(dir, "dir"):                    false,
	}
	for ref := range refs {
		if ref != base {
			copyForTest(t, base, ref, opts)
		}
	}
	for ref, uncompressed := range refs {
		t.Run(strings.SplitN(ref, ":", 2)[0], func(t *testing.T) {
			im := mustOpen(t, ref, opts)
			got := im.Layers()
			want := wantLayers(ti, uncompressed)
			for i := range want {
				if uncompressed && i < len(got) {
					want[i].Size = got[i].Size
				}
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Layers() mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(baseLabels, im.Labels()); diff != "" {
				t.Errorf("Labels() mismatch (-want +got):\n%s", diff)
			}
			if c := im.Config(); c.Architecture != "amd64" || c.OS != "linux" || len(c.History) != 2 {
				t.Errorf("Config() = %s/%s with %d history entries, want linux/amd64 with 2", c.OS, c.Architecture, len(c.History))
			}
			if im.Reference() != ref {
				t.Errorf("Reference() = %q, want %q", im.Reference(), ref)
			}
			if !uncompressed && im.Digest() != ti.digest() {
				t.Errorf("Digest() = %s, want %s", im.Digest(), ti.digest())
			}
			for i, l := range got {
				b, err := readLayer(t, im, l.Digest)
				if err != nil {
					t.Fatalf("reading layer %d: %v", i, err)
				}
				if int64(len(b)) != l.Size || digest.FromBytes(b) != l.Digest {
					t.Errorf("layer %d: read %d bytes with digest %s, want %d bytes with %s", i, len(b), digest.FromBytes(b), l.Size, l.Digest)
				}
			}
		})
	}
	checkNoTemp(t)
}

func TestOpenDockerSchema2(t *testing.T) {
	opts := testEnv(t)
	ti := newImage(t, "amd64", "", true, baseLayers(t))
	d := filepath.Join(t.TempDir(), "docker")
	writeDirImage(t, d, ti.manifest, nil, ti.blobs()...)

	im := mustOpen(t, "dir:"+d, opts)
	if diff := cmp.Diff(wantLayers(ti, false), im.Layers()); diff != "" {
		t.Errorf("Layers() mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(baseLabels, im.Labels()); diff != "" {
		t.Errorf("Labels() mismatch (-want +got):\n%s", diff)
	}
	if im.Digest() != ti.digest() {
		t.Errorf("Digest() = %s, want %s", im.Digest(), ti.digest())
	}
	if a := im.Annotations(); a != nil {
		t.Errorf("Annotations() = %v, want nil for a Docker manifest", a)
	}
}

// multiFixture writes an OCI index (tag "multi") and a Docker manifest list
// (a dir: image), each with linux/amd64 and linux/arm64/v8 images.
func multiFixture(t *testing.T, dir string, docker bool) (string, map[string]testImage) {
	t.Helper()
	imgs := map[string]testImage{
		"amd64": newImage(t, "amd64", "", docker, baseLayers(t)),
		"arm64": newImage(t, "arm64", "v8", docker, []testLayer{gzipLayer(t, map[string]string{"etc/arch": "arm64\n"})}),
	}
	idx := imgspecv1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imgspecv1.MediaTypeImageIndex}
	if docker {
		idx.MediaType = manifest.DockerV2ListMediaType
	}
	idx.Manifests = []imgspecv1.Descriptor{
		imgs["amd64"].descriptor(&imgspecv1.Platform{OS: "linux", Architecture: "amd64"}),
		imgs["arm64"].descriptor(&imgspecv1.Platform{OS: "linux", Architecture: "arm64", Variant: "v8"}),
	}
	top := mustJSON(t, idx)
	var blobs [][]byte
	for _, ti := range imgs {
		blobs = append(blobs, ti.blobs()...)
	}
	if docker {
		p := filepath.Join(dir, "list")
		writeDirImage(t, p, top, [][]byte{imgs["amd64"].manifest, imgs["arm64"].manifest}, blobs...)
		return "dir:" + p, imgs
	}
	p := filepath.Join(dir, "index")
	blobs = append(blobs, imgs["amd64"].manifest, imgs["arm64"].manifest, top)
	writeLayout(t, p, map[string]imgspecv1.Descriptor{"multi": {MediaType: idx.MediaType, Digest: digest.FromBytes(top), Size: int64(len(top))}}, blobs...)
	return "oci:" + p + ":multi", imgs
}

func TestOpenPlatform(t *testing.T) {
	opts := testEnv(t)
	for _, docker := range []bool{false, true} {
		ref, imgs := multiFixture(t, t.TempDir(), docker)
		tests := []struct {
			platform string
			want     string // key in imgs; "" = ErrPlatformNotFound
		}{
			{"linux/amd64", "amd64"},
			{"linux/arm64", "arm64"},
			{"linux/arm64/v8", "arm64"},
			{"linux/s390x", ""},
			{"windows/amd64", ""},
		}
		if runtime.GOOS == "linux" && (runtime.GOARCH == "amd64" || runtime.GOARCH == "arm64") {
			tests = append(tests, struct{ platform, want string }{"", runtime.GOARCH})
		}
		for _, tt := range tests {
			o := opts
			o.Platform = tt.platform
			im, err := Open(context.Background(), ref, o)
			if tt.want == "" {
				if !errors.Is(err, ErrPlatformNotFound) || !strings.Contains(err.Error(), "available: linux/amd64, linux/arm64/v8") {
					t.Errorf("Open(%s, platform %q) error = %v, want ErrPlatformNotFound listing linux/amd64, linux/arm64/v8", ref, tt.platform, err)
				}
				if im != nil {
					t.Errorf("Open(%s, platform %q) returned an image with its error", ref, tt.platform)
				}
				continue
			}
			if err != nil {
				t.Errorf("Open(%s, platform %q) = %v", ref, tt.platform, err)
				continue
			}
			want := imgs[tt.want]
			if im.Digest() != want.digest() || im.Config().Architecture != tt.want {
				t.Errorf("Open(%s, platform %q) = %s (%s), want %s (%s)", ref, tt.platform, im.Digest(), im.Config().Architecture, want.digest(), tt.want)
			}
			if diff := cmp.Diff(wantLayers(want, false), im.Layers()); diff != "" {
				t.Errorf("Open(%s, platform %q) layers mismatch (-want +got):\n%s", ref, tt.platform, diff)
			}
			if err := im.Close(); err != nil {
				t.Error(err)
			}
		}
	}
}

func TestOpenSingleImagePlatform(t *testing.T) {
	opts := testEnv(t)
	base, _ := baseFixture(t, t.TempDir())
	tests := []struct {
		platform string
		ok       bool
	}{
		{"linux/amd64", true},
		{"linux/amd64/v2", true}, // the config names no variant
		{"linux/arm64", false},
		{"linux", false},
		{"linux/amd64/v2/extra", false},
		{"/amd64", false},
	}
	for _, tt := range tests {
		o := opts
		o.Platform = tt.platform
		im, err := Open(context.Background(), base, o)
		if (err == nil) != tt.ok {
			t.Errorf("Open(platform %q) error = %v, want ok=%v", tt.platform, err, tt.ok)
		}
		if err == nil {
			if cerr := im.Close(); cerr != nil {
				t.Error(cerr)
			}
		}
	}
}

func TestOpenErrors(t *testing.T) {
	opts := testEnv(t)
	dir := t.TempDir()
	base, ti := baseFixture(t, dir)
	layout := strings.TrimSuffix(strings.TrimPrefix(base, "oci:"), ":base")

	if _, err := Open(context.Background(), "quay.io/x:1", opts); !errors.Is(err, ErrMissingTransport) {
		t.Errorf("Open(bare reference) error = %v, want ErrMissingTransport", err)
	}
	if _, err := Open(context.Background(), "oci:"+layout+":nosuchtag", opts); err == nil {
		t.Error("Open(missing tag) succeeded, want an error")
	}
	if _, err := Open(context.Background(), "oci:"+filepath.Join(dir, "absent")+":x", opts); err == nil {
		t.Error("Open(missing layout) succeeded, want an error")
	}

	flipByte(t, blobPath(layout, digest.FromBytes(ti.config)), 3)
	if _, err := Open(context.Background(), base, opts); err == nil || !strings.Contains(err.Error(), "config") {
		t.Errorf("Open(corrupt config) error = %v, want a config digest error", err)
	}
}

func TestOpenLayerVerifies(t *testing.T) {
	opts := testEnv(t)
	base, ti := baseFixture(t, t.TempDir())
	layout := strings.TrimSuffix(strings.TrimPrefix(base, "oci:"), ":base")
	im := mustOpen(t, base, opts)

	b, err := readLayer(t, im, ti.layers[1].digest)
	if err != nil || !bytes.Equal(b, ti.layers[1].blob) {
		t.Errorf("reading intact layer: %d bytes, %v; want the fixture blob", len(b), err)
	}
	if _, err := im.OpenLayer(context.Background(), digest.FromString("not a layer")); err == nil {
		t.Error("OpenLayer(unknown digest) succeeded, want an error")
	}
	flipByte(t, blobPath(layout, ti.layers[0].digest), 20)
	if _, err := readLayer(t, im, ti.layers[0].digest); err == nil || !strings.Contains(err.Error(), "content has digest") {
		t.Errorf("reading corrupt layer: error = %v, want a digest mismatch", err)
	}
}

func TestImageAccessorsReturnCopies(t *testing.T) {
	opts := testEnv(t)
	base, _ := baseFixture(t, t.TempDir())
	im := mustOpen(t, base, opts)
	im.Labels()["io.example.base"] = "changed"
	im.Config().Config.Labels["io.example.base"] = "changed"
	im.Layers()[0].Digest = "changed"
	if im.Labels()["io.example.base"] != "1" || im.Layers()[0].Digest == "changed" {
		t.Error("changing returned values changed the Image")
	}
}

func TestCloseTwice(t *testing.T) {
	opts := testEnv(t)
	dir := t.TempDir()
	base, _ := baseFixture(t, dir)
	archive := "oci-archive:" + filepath.Join(dir, "a.tar")
	copyForTest(t, base, archive, opts)
	im, err := Open(context.Background(), archive, opts)
	if err != nil {
		t.Fatal(err)
	}
	if err := im.Close(); err != nil {
		t.Fatalf("first Close: %v", err)
	}
	if err := im.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	checkNoTemp(t) // the archive was unpacked in TMPDIR and removed by Close
	if _, err := os.Stat(filepath.Join(dir, "a.tar")); err != nil {
		t.Errorf("the archive itself is gone: %v", err)
	}
}
