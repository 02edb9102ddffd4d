package baseindex

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
)

// TestPackViewRefusesMovedString: a view whose strings are not where
// writeView puts them is not packed: its records name the bytes at other
// offsets, which the packed form cannot say.
func TestPackViewRefusesMovedString(t *testing.T) {
	var tb bytes.Buffer
	tw := tar.NewWriter(&tb)
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5},
		{Name: "usr/", Typeflag: tar.TypeDir, Mode: 0o755},
	} {
		if err := tw.WriteHeader(h); err != nil {
			t.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("root\n"))
		}
	}
	tw.Close()
	blob := tb.Bytes()
	l := Layer{Digest: digest.FromBytes(blob), Open: func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(blob)), nil }}
	ix, err := Build(context.Background(), []Layer{l}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "view")
	if err := writeView(file, viewKey([]Layer{l}), ix); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := PackView(b); err != nil {
		t.Fatalf("PackView(view) = %v", err)
	}
	lay, err := layoutOf(b, uint64(len(b)))
	if err != nil {
		t.Fatal(err)
	}
	// The root's name (empty) said to lie one byte on.
	bad := bytes.Clone(b)
	binary.LittleEndian.PutUint32(bad[lay.head+8:], binary.LittleEndian.Uint32(bad[lay.head+8:])+1)
	if _, err := PackView(bad); !errors.Is(err, errNotCanonical) {
		t.Errorf("PackView(a string moved) = %v, want %v", err, errNotCanonical)
	}
}
