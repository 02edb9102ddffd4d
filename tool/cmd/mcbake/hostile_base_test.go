package main

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/mcbake/mcbake/internal/ocilayout"
	digest "github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// hostileLayer is a layer a test writes entry by entry, so that layers
// of gigabytes cost the test no memory.
type hostileLayer struct {
	// zstdWindowLog, when set, compresses with zstd and makes the frame
	// header ask for a window of 2^zstdWindowLog bytes; gzip otherwise.
	zstdWindowLog byte
	fill          func(tw *tar.Writer) error
	// damage, when set, flips a byte in the middle of the blob after its
	// digest is taken: the blob no longer matches its descriptor.
	damage bool
}

// appendLayers adds layers to the image of the OCI layout dir (one
// manifest in index.json), then lets edit change the manifest and the
// config before they are written.
func appendLayers(t *testing.T, dir string, layers []hostileLayer, edit func(*v1.Manifest, *v1.Image)) {
	t.Helper()
	var index v1.Index
	readJSONFile(t, filepath.Join(dir, "index.json"), &index)
	var m v1.Manifest
	readJSONFile(t, blobFile(dir, index.Manifests[0].Digest), &m)
	var c v1.Image
	readJSONFile(t, blobFile(dir, m.Config.Digest), &c)
	for _, l := range layers {
		desc, diffID := writeHostileLayer(t, dir, l)
		m.Layers = append(m.Layers, desc)
		c.RootFS.DiffIDs = append(c.RootFS.DiffIDs, diffID)
	}
	if edit != nil {
		edit(&m, &c)
	}
	m.Config = writeJSONBlob(t, dir, m.Config.MediaType, &c)
	md := writeJSONBlob(t, dir, index.Manifests[0].MediaType, &m)
	md.Annotations = index.Manifests[0].Annotations
	index.Manifests[0] = md
	b, err := json.Marshal(&index)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "index.json"), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func blobFile(dir string, d digest.Digest) string { return ocilayout.BlobPath(dir, d.String()) }

func readJSONFile(t *testing.T, file string, v any) {
	t.Helper()
	if err := ocilayout.ReadJSON(file, v); err != nil {
		t.Fatal(err)
	}
}

func writeJSONBlob(t *testing.T, dir, mediaType string, v any) v1.Descriptor {
	t.Helper()
	d, err := ocilayout.WriteJSONBlob(filepath.Join(dir, "blobs", "sha256"), mediaType, v)
	if err != nil {
		t.Fatal(err)
	}
	return v1.Descriptor{MediaType: d.MediaType, Digest: digest.Digest(d.Digest), Size: d.Size}
}

// writeHostileLayer writes l's blob into the layout and returns its
// descriptor and diff_id.
func writeHostileLayer(t *testing.T, dir string, l hostileLayer) (v1.Descriptor, digest.Digest) {
	t.Helper()
	var blob bytes.Buffer // compressed, hostile layers are small
	var zc io.WriteCloser
	var err error
	mediaType := v1.MediaTypeImageLayerGzip
	if l.zstdWindowLog != 0 {
		mediaType = v1.MediaTypeImageLayerZstd
		zc, err = zstd.NewWriter(&blob, zstd.WithWindowSize(1<<20), zstd.WithSingleSegment(false))
	} else {
		zc, err = gzip.NewWriterLevel(&blob, gzip.BestSpeed)
	}
	if err != nil {
		t.Fatal(err)
	}
	diff := sha256.New()
	tw := tar.NewWriter(io.MultiWriter(zc, diff))
	if err := l.fill(tw); err != nil {
		t.Fatal(err)
	}
	if err := tw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := zc.Close(); err != nil {
		t.Fatal(err)
	}
	b := blob.Bytes()
	if l.zstdWindowLog != 0 {
		// The Window_Descriptor follows the Frame_Header_Descriptor of a
		// frame that is not single-segment: exponent windowLog-10.
		if b[4]&0x20 != 0 {
			t.Fatalf("zstd frame is single-segment: %x", b[:8])
		}
		b[5] = (l.zstdWindowLog - 10) << 3
	}
	d := digest.FromBytes(b)
	if l.damage {
		b = bytes.Clone(b)
		b[len(b)/2] ^= 0x20
	}
	if err := os.WriteFile(blobFile(dir, d), b, 0o644); err != nil {
		t.Fatal(err)
	}
	return v1.Descriptor{MediaType: mediaType, Digest: d, Size: int64(len(b))}, digest.NewDigest(digest.SHA256, diff)
}

// regular writes n regular files named by name, each of content.
func regular(n int, name func(int) string, content []byte) func(*tar.Writer) error {
	return func(tw *tar.Writer) error {
		for i := range n {
			if err := tw.WriteHeader(&tar.Header{Name: name(i), Typeflag: tar.TypeReg, Mode: 0o644, Size: int64(len(content)), Format: tar.FormatPAX}); err != nil {
				return err
			}
			if _, err := tw.Write(content); err != nil {
				return err
			}
		}
		return nil
	}
}

// TestHostileBases: a base image built to blow up memory or time, or
// that lies about itself, fails the build within seconds with one clear
// line, exit 2, peak memory under 300 MB, and no output written (see
// docs/limits.md).
func TestHostileBases(t *testing.T) {
	long := func(c byte, n int) func(int) string {
		return func(i int) string { return fmt.Sprintf("%s/%d", strings.Repeat(string(c), n), i) }
	}
	unitContent := append([]byte("[Unit]\n"), bytes.Repeat([]byte("#"), 64<<10-7)...)
	tests := []struct {
		name   string
		layers []hostileLayer
		edit   func(*v1.Manifest, *v1.Image)
		want   string
	}{
		{
			name: "presets of 16 MiB",
			layers: []hostileLayer{{fill: regular(20, func(i int) string {
				return fmt.Sprintf("usr/lib/systemd/system-preset/%02d.preset", i)
			}, make([]byte, 16<<20))}},
			want: `tar entry "usr/lib/systemd/system-preset/00.preset": "usr/lib/systemd/system-preset/00.preset" is 16777216 bytes, more than the 4 MiB mcbake reads of it`,
		},
		{
			name: "10k units of 64 KiB",
			layers: []hostileLayer{{fill: regular(10000, func(i int) string {
				return fmt.Sprintf("usr/lib/systemd/system/u%05d.service", i)
			}, unitContent)}},
			want: `the unit files, presets, passwd and group files of this layer pass 16 MiB at "usr/lib/systemd/system/u00256.service"`,
		},
		{
			name:   "names of 512 KiB",
			layers: []hostileLayer{{fill: regular(200, long('n', 512<<10), nil)}},
			want:   `longer than PATH_MAX (4095): no node can extract it`,
		},
		{
			name: "symlink targets of 512 KiB",
			layers: []hostileLayer{{fill: func(tw *tar.Writer) error {
				for i := range 200 {
					if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("etc/l%d", i), Typeflag: tar.TypeSymlink, Linkname: long('t', 512<<10)(i), Format: tar.FormatPAX}); err != nil {
						return err
					}
				}
				return nil
			}}},
			want: `symlink target "tttt`,
		},
		{
			name: "8 layers asking for 512 MiB zstd windows",
			layers: func() []hostileLayer {
				var ls []hostileLayer
				for i := range 8 {
					ls = append(ls, hostileLayer{zstdWindowLog: 29, fill: regular(1, func(int) string { return fmt.Sprintf("etc/z%d", i) }, []byte("z"))})
				}
				return ls
			}(),
			want: "a zstd frame needs a window larger than 32 MiB, the limit",
		},
		{
			name:   "a diff_id that lies",
			layers: []hostileLayer{{fill: regular(1, func(int) string { return "etc/lie" }, []byte("lie"))}},
			edit: func(_ *v1.Manifest, c *v1.Image) {
				c.RootFS.DiffIDs[len(c.RootFS.DiffIDs)-1] = digest.FromString("not this layer")
			},
			want: "diff_id mismatch: the uncompressed layer is sha256:",
		},
		{
			// The blob is read for the index alone: the index checks it.
			name:   "a blob that does not match its digest",
			layers: []hostileLayer{{fill: regular(100, func(i int) string { return fmt.Sprintf("etc/d%d", i) }, []byte("d")), damage: true}},
			want:   "digest mismatch (got sha256:",
		},
		{
			name:   "a descriptor smaller than its blob",
			layers: []hostileLayer{{fill: regular(100, func(i int) string { return fmt.Sprintf("etc/s%d", i) }, []byte("s"))}},
			edit: func(m *v1.Manifest, _ *v1.Image) {
				m.Layers[len(m.Layers)-1].Size -= 100
			},
			want: "size mismatch",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			appendLayers(t, filepath.Join(e.dir, "base"), tt.layers, tt.edit)
			out := filepath.Join(e.dir, "out")
			args := append([]string{"build", "--quiet", "--base", e.base, "-o", "oci:" + out + ":latest"}, e.imageArgs()...)
			r := runChild(t, 2*time.Minute, append(args, "-f", workerMC)...)
			t.Logf("exit %d in %v, peak RSS %d MB: %s", r.code, r.wall.Round(time.Millisecond), r.maxRSS>>20, r.stderr)
			if r.code != exitInput {
				t.Errorf("exit %d, want %d; stderr:\n%s", r.code, exitInput, r.stderr)
			}
			if !strings.Contains(r.stderr, tt.want) {
				t.Errorf("stderr %q, want it to contain %q", r.stderr, tt.want)
			}
			if lines := strings.Count(strings.TrimSpace(r.stderr), "\n") + 1; lines > 1 || len(r.stderr) > 1000 {
				t.Errorf("stderr has %d lines, %d bytes, want one short line", lines, len(r.stderr))
			}
			if r.maxRSS > 300<<20 {
				t.Errorf("peak RSS %d MB, want under 300 MB", r.maxRSS>>20)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("the output %s exists after a failed build (err %v)", out, err)
			}
		})
	}
}

// TestManyHardlinks: 80k hardlinks at kept paths whose targets the scan
// has not kept (a second pass reads them) do not make a build slow (their
// contents are checked by internal/baseindex's tests).
func TestManyHardlinks(t *testing.T) {
	const n = 80_000
	e := newEnv(t)
	appendLayers(t, filepath.Join(e.dir, "base"), []hostileLayer{{fill: func(tw *tar.Writer) error {
		if err := regular(n, func(i int) string { return fmt.Sprintf("obj/%d", i) }, []byte("[Unit]\n"))(tw); err != nil {
			return err
		}
		for i := range n {
			if err := tw.WriteHeader(&tar.Header{Name: fmt.Sprintf("usr/lib/systemd/system/h%d.service", i), Typeflag: tar.TypeLink, Linkname: fmt.Sprintf("obj/%d", i)}); err != nil {
				return err
			}
		}
		return nil
	}}}, nil)
	out := filepath.Join(e.dir, "out")
	args := append([]string{"build", "--quiet", "--base", e.base, "-o", "oci:" + out + ":latest"}, e.imageArgs()...)
	// A hang guard, not a speed target (make bench has those): a
	// quadratic lookup took 82 s for these.
	r := runChild(t, 60*time.Second, append(args, "-f", workerMC)...)
	t.Logf("exit %d in %v, peak RSS %d MB", r.code, r.wall.Round(time.Millisecond), r.maxRSS>>20)
	if r.code != 0 {
		t.Fatalf("exit %d; stderr:\n%s", r.code, r.stderr)
	}
	if r.maxRSS > 300<<20 {
		t.Errorf("peak RSS %d MB, want under 300 MB", r.maxRSS>>20)
	}
}
