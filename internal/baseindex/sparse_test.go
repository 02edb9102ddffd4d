package baseindex

import (
	"bytes"
	"context"
	"io"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/testing/tarseeds"
)

// TestSparseLayer: a layer with a sparse file, as GNU tar writes one in
// its GNU and PAX formats, is indexed with the file's whole content, which
// archive/tar expands (tarparse.Reader stops at the file, and the scan reads the
// layer again with archive/tar).
func TestSparseLayer(t *testing.T) {
	seeds := tarseeds.GNUSparse(t)
	if len(seeds) == 0 {
		t.Skip("no GNU tar to write a sparse file")
	}
	content := make([]byte, 1<<20+4)
	copy(content, "head")
	copy(content[1<<20:], "tail")
	want := digest.FromBytes(content)
	for i, raw := range seeds {
		var gz bytes.Buffer
		zw := gzip.NewWriter(&gz)
		zw.Write(raw)
		zw.Close()
		blob := gz.Bytes()
		l := Layer{Digest: digest.FromBytes(blob), MediaType: "application/vnd.oci.image.layer.v1.tar+gzip", Size: int64(len(blob)),
			DiffID: digest.FromBytes(raw),
			Open:   func(context.Context) (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(blob)), nil }}
		ix, err := Build(context.Background(), []Layer{l}, Options{})
		if err != nil {
			t.Fatalf("seed %d: Build() error = %v", i, err)
		}
		n, ok := ix.Lookup("sparse")
		if !ok || n.Type != File || n.Size != int64(len(content)) {
			t.Fatalf("seed %d: Lookup(sparse) = %+v, %v, want a file of %d bytes", i, n, ok, len(content))
		}
		got, err := ix.Digest(n)
		if err != nil || got.Digest() != want {
			t.Errorf("seed %d: Digest(sparse) = %s, %v, want %s", i, got, err, want)
		}
	}
}
