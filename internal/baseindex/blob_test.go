package baseindex_test

import (
	"bytes"
	"context"
	"errors"
	"io"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/klauspost/compress/gzip"
	digest "github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex"
)

var sampleEntries = []ent{dir("etc/"), file("etc/passwd", "root:x:0:0::/root:/bin/bash\n"), file("etc/hostname", "node\n")}

var sampleListing = []string{
	"etc dir 0755 0:0",
	`etc/hostname file 0644 0:0 "node\n"`,
	`etc/passwd file 0644 0:0 "root:x:0:0::/root:/bin/bash\n"`,
}

func TestCompressions(t *testing.T) {
	tarball := tarBytes(t, sampleEntries...)
	twoMembers := append(compress(t, gzipped, tarball[:1000]), compress(t, gzipped, tarball[1000:])...)
	tests := []struct {
		name      string
		blob      []byte
		mediaType string
	}{
		{name: "gzip", blob: compress(t, gzipped, tarball), mediaType: mediaTypes[gzipped]},
		{name: "zstd", blob: compress(t, zstded, tarball), mediaType: mediaTypes[zstded]},
		{name: "uncompressed", blob: tarball, mediaType: mediaTypes[plain]},
		{name: "docker gzip", blob: compress(t, gzipped, tarball), mediaType: "application/vnd.docker.image.rootfs.diff.tar.gzip"},
		{name: "no media type", blob: compress(t, zstded, tarball), mediaType: ""},
		{name: "magic wins over the media type", blob: compress(t, zstded, tarball), mediaType: mediaTypes[gzipped]},
		{name: "uncompressed labelled gzip", blob: tarball, mediaType: mediaTypes[gzipped]},
		{name: "multi-member gzip", blob: twoMembers, mediaType: mediaTypes[gzipped]},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newLayer(tt.blob, tt.mediaType)
			ix, err := baseindex.Build(context.Background(), []baseindex.Layer{l.Layer}, baseindex.Options{})
			if err != nil {
				t.Fatalf("Build() error = %v", err)
			}
			got := listing(t, ix, bodies([][]ent{sampleEntries}))
			if diff := cmp.Diff(sampleListing, got); diff != "" {
				t.Errorf("Build() index mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBlobErrors(t *testing.T) {
	tarball := tarBytes(t, sampleEntries...)
	gz := compress(t, gzipped, tarball)
	good := newLayer(gz, mediaTypes[gzipped])
	tests := []struct {
		name  string
		layer func() baseindex.Layer
		want  string // regexp; LAYER stands for the layer's digest
		is    error
	}{
		{
			name: "digest mismatch",
			layer: func() baseindex.Layer {
				l := newLayer(gz, mediaTypes[gzipped]).Layer
				l.Digest = digest.FromString("something else")
				return l
			},
			want: `^layer LAYER: digest mismatch \(got ` + regexp.QuoteMeta(good.Digest.String()) + `\)$`,
			is:   baseindex.ErrDigestMismatch,
		},
		{
			name: "truncated download",
			layer: func() baseindex.Layer {
				l := newLayer(gz, mediaTypes[gzipped])
				l.blob = gz[:len(gz)/2]
				return l.Layer
			},
			want: `^layer LAYER: size mismatch: read \d+ bytes, descriptor says \d+$`,
		},
		{
			name:  "truncated gzip",
			layer: func() baseindex.Layer { return newLayer(gz[:len(gz)/2], mediaTypes[gzipped]).Layer },
			want:  `^layer LAYER: reading tar stream: unexpected EOF$`,
			is:    io.ErrUnexpectedEOF,
		},
		{
			name:  "gzip trailer missing",
			layer: func() baseindex.Layer { return newLayer(gz[:len(gz)-4], mediaTypes[gzipped]).Layer },
			want:  `^layer LAYER: reading past the end of the tar stream: unexpected EOF$`,
			is:    io.ErrUnexpectedEOF,
		},
		{
			name: "corrupt gzip",
			layer: func() baseindex.Layer {
				b := bytes.Clone(gz)
				for i := 20; i < 60; i++ {
					b[i] ^= 0x55
				}
				return newLayer(b, mediaTypes[gzipped]).Layer
			},
			want: `^layer LAYER: reading tar stream: `,
		},
		{
			name:  "truncated zstd",
			layer: func() baseindex.Layer { z := compress(t, zstded, tarball); return newLayer(z[:len(z)-10], "").Layer },
			want:  `^layer LAYER: reading `,
		},
		{
			name: "corrupt tar",
			layer: func() baseindex.Layer {
				b := bytes.Clone(tarball)
				copy(b[148:156], "garbage!") // the header checksum
				return newLayer(b, mediaTypes[plain]).Layer
			},
			want: `^layer LAYER: reading tar stream: invalid tar header: checksum: invalid octal "garbage!"$`,
		},
		{
			name: "size mismatch",
			layer: func() baseindex.Layer {
				l := newLayer(gz, mediaTypes[gzipped]).Layer
				l.Size++
				return l
			},
			want: `^layer LAYER: size mismatch: read \d+ bytes, descriptor says \d+$`,
		},
		{
			name: "blob longer than its descriptor",
			layer: func() baseindex.Layer {
				l := newLayer(gz, mediaTypes[gzipped]).Layer
				l.Size--
				return l
			},
			want: `^layer LAYER: size mismatch: the blob is longer than the \d+ bytes its descriptor says$`,
		},
		{
			// Not a digest mismatch: the blob is only read one byte past
			// the size, so its digest cannot be right.
			name: "blob much longer than its descriptor",
			layer: func() baseindex.Layer {
				l := newLayer(gz, mediaTypes[gzipped]).Layer
				l.Size -= 40
				return l
			},
			want: `^layer LAYER: size mismatch: the blob is longer than the \d+ bytes its descriptor says$`,
		},
		{
			name: "open fails",
			layer: func() baseindex.Layer {
				l := newLayer(gz, mediaTypes[gzipped]).Layer
				l.Open = func(context.Context) (io.ReadCloser, error) { return nil, errBoom }
				return l
			},
			want: `^layer LAYER: opening blob: boom$`,
			is:   errBoom,
		},
		{
			name: "invalid digest",
			layer: func() baseindex.Layer {
				l := newLayer(gz, mediaTypes[gzipped]).Layer
				l.Digest = "sha256:abc"
				return l
			},
			want: `^layer LAYER: invalid checksum digest length$`,
		},
		{
			name: "unsupported media type",
			layer: func() baseindex.Layer {
				return newLayer(gz, "application/vnd.oci.image.layer.v1.tar+gzip+encrypted").Layer
			},
			want: `^layer LAYER: unsupported layer media type "application/vnd.oci.image.layer.v1.tar\+gzip\+encrypted"$`,
		},
		{
			name:  "xz",
			layer: func() baseindex.Layer { return newLayer(append([]byte{0xfd, '7', 'z', 'X', 'Z', 0}, 1, 2), "").Layer },
			want:  `^layer LAYER: unsupported layer compression \(xz or bzip2\)$`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := tt.layer()
			_, err := baseindex.Build(context.Background(), []baseindex.Layer{l}, baseindex.Options{})
			if err == nil {
				t.Fatalf("Build() succeeded, want an error matching %s", tt.want)
			}
			want := strings.ReplaceAll(tt.want, "LAYER", regexp.QuoteMeta(l.Digest.String()))
			if !regexp.MustCompile(want).MatchString(err.Error()) {
				t.Errorf("Build() error = %q, want it to match %s", err, want)
			}
			if tt.is != nil && !errors.Is(err, tt.is) {
				t.Errorf("Build() error = %v, want errors.Is(err, %v)", err, tt.is)
			}
		})
	}
}

var errBoom = errors.New("boom")

func TestBlobClosed(t *testing.T) {
	gz := compress(t, gzipped, tarBytes(t, sampleEntries...))
	l := newLayer(gz, mediaTypes[gzipped]).Layer
	var closed int
	l.Open = func(context.Context) (io.ReadCloser, error) {
		return closer{Reader: bytes.NewReader(gz), close: func() error { closed++; return errBoom }}, nil
	}
	_, err := baseindex.Build(context.Background(), []baseindex.Layer{l}, baseindex.Options{})
	if closed != 1 || !errors.Is(err, errBoom) {
		t.Errorf("Build() = %v with %d closes, want the close error and 1 close", err, closed)
	}
}

type closer struct {
	io.Reader
	close func() error
}

func (c closer) Close() error { return c.close() }

func TestCanceled(t *testing.T) {
	layers := gzLayers(t, sampleEntries)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := baseindex.Build(ctx, descriptors(layers), baseindex.Options{})
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Build() error = %v, want context.Canceled", err)
	}
}

func TestProgress(t *testing.T) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.NoCompression) // a blob large enough for several reads
	if err != nil {
		t.Fatal(err)
	}
	if _, err := zw.Write(tarBytes(t, file("big", strings.Repeat("x", 3<<20)))); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	l := newLayer(buf.Bytes(), mediaTypes[gzipped])
	var seen []int64
	progress := func(d digest.Digest, n int64) {
		if d != l.Digest {
			t.Errorf("Progress called for %s, want %s", d, l.Digest)
		}
		seen = append(seen, n)
	}
	if _, err := baseindex.Build(context.Background(), []baseindex.Layer{l.Layer}, baseindex.Options{Progress: progress}); err != nil {
		t.Fatal(err)
	}
	if len(seen) < 2 || seen[len(seen)-1] != l.Size {
		t.Fatalf("Progress calls = %v, want several ending with %d", seen, l.Size)
	}
	for i := 1; i < len(seen); i++ {
		if seen[i] <= seen[i-1] {
			t.Errorf("Progress calls = %v, want them increasing", seen)
			break
		}
	}
}
