// Package decompress opens layer blobs whatever their compression.
//
// It detects gzip, zstd or a plain tar stream by magic bytes (which win
// over any media type) and refuses xz and bzip2, which OCI layers do not
// use.
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

// MaxZstdWindow is the largest zstd window (the history a frame's
// decoder keeps in memory) Reader decodes: 32 MiB, four times what zstd
// and containers/storage use at their highest levels without --long; a
// layer needs no more, and a hostile one cannot make each decoder take
// up to 512 MiB (the zstd package's default).
const MaxZstdWindow = 32 << 20

// windowErrors words the zstd decoder's errors for a frame whose window
// is larger than MaxZstdWindow.
type windowErrors struct{ io.ReadCloser }

func (w windowErrors) Read(p []byte) (int, error) {
	n, err := w.ReadCloser.Read(p)
	if errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded) {
		err = fmt.Errorf("a zstd frame needs a window larger than %d MiB, the limit (a layer compressed with zstd --long?): %w", MaxZstdWindow>>20, err)
	}
	return n, err
}

// newGzip opens a gzip stream: klauspost/compress's decoder, or ISA-L's
// in a binary built with the isal tag on a machine that has it (isal.go).
var newGzip = func(br *bufio.Reader) (io.ReadCloser, error) { return gzip.NewReader(br) }

// gzipDecoder names the gzip decoder newGzip uses.
var gzipDecoder = func() string { return "klauspost/compress" }

// GzipDecoder names the gzip decoder this binary uses on this machine:
// "isa-l" or "klauspost/compress".
func GzipDecoder() string { return gzipDecoder() }

// Reader returns the uncompressed stream of r. The caller must close it
// (ISA-L's decoder holds C memory until then); that does not close r.
func Reader(r io.Reader) (io.ReadCloser, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, 1<<16)
	}
	magic, _ := br.Peek(len(xzMagic)) // a short blob is a short tar stream
	switch {
	case bytes.HasPrefix(magic, gzipMagic):
		z, err := newGzip(br)
		if err != nil {
			return nil, fmt.Errorf("reading gzip header: %w", err)
		}
		return z, nil
	case bytes.HasPrefix(magic, zstdMagic):
		z, err := zstd.NewReader(br, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(MaxZstdWindow))
		if err != nil {
			return nil, fmt.Errorf("starting zstd decoder: %w", err)
		}
		return windowErrors{z.IOReadCloser()}, nil
	case bytes.HasPrefix(magic, xzMagic), bytes.HasPrefix(magic, bzipMagic):
		return nil, errors.New("unsupported layer compression (xz or bzip2)")
	}
	return io.NopCloser(br), nil
}
