// Package decompress opens layer blobs: it detects gzip, zstd or a plain
// tar stream by magic bytes (which win over any media type) and refuses
// xz and bzip2, which OCI layers do not use.
package decompress

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
)

var (
	gzipMagic = []byte{0x1f, 0x8b}
	zstdMagic = []byte{0x28, 0xb5, 0x2f, 0xfd}
	xzMagic   = []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}
	bzipMagic = []byte{'B', 'Z', 'h'}
)

// Reader returns the uncompressed stream of r. Closing it does not close r.
func Reader(r io.Reader) (io.ReadCloser, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	magic, _ := br.Peek(len(xzMagic)) // a short blob is a short tar stream
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		z, err := gzip.NewReader(br)
		if err != nil {
			return nil, fmt.Errorf("reading gzip header: %w", err)
		}
		return z, nil
	case bytes.HasPrefix(magic, zstdMagic):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, fmt.Errorf("starting zstd decoder: %w", err)
		}
		return z.IOReadCloser(), nil
	case bytes.HasPrefix(magic, xzMagic), bytes.HasPrefix(magic, bzipMagic):
		return nil, errors.New("unsupported layer compression (xz or bzip2)")
	}
	return io.NopCloser(br), nil
}
