package guard

import (
	"bytes"
	"io"
	"io/fs"
	"strings"

	"github.com/klauspost/compress/flate"
	"github.com/opencontainers/go-digest"
)

// DeflatedSuffix ends the name, beside the node binary's under bin/, of
// its raw deflate encoding (Deflate), which make guard-bin writes.
const DeflatedSuffix = ".deflate"

// DeflateLevel is the compression level of Deflate, the gzip level of the
// new layer's other contents (docs/design.md, "The warm path").
const DeflateLevel = flate.DefaultCompression

// Deflate returns binary's raw deflate encoding as the layer writer
// splices it into a gzip layer: made by an encoder that saw nothing before
// it (no back-reference reaches outside binary) and ended by a sync flush
// (byte-aligned, not the final block), so that it is valid wherever it is
// put in a deflate stream at a byte boundary. The digest of binary and a
// newline come first, so that it is used only for that binary.
func Deflate(binary []byte) ([]byte, error) {
	var b bytes.Buffer
	b.WriteString(digest.FromBytes(binary).String() + "\n")
	w, err := flate.NewWriter(&b, DeflateLevel)
	if err != nil {
		return nil, err
	}
	if _, err := w.Write(binary); err != nil {
		return nil, err
	}
	if err := w.Flush(); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Deflated returns the raw deflate encoding of the node binary whose
// digest is d, made by make guard-bin and embedded beside the binary, or
// nil when this mcbake carries none for it (another binary, from
// --guard-binary say, is compressed as any content is).
func Deflated(d digest.Digest) []byte {
	ents, _ := bin.ReadDir("bin")
	for _, e := range ents {
		if !strings.HasSuffix(e.Name(), DeflatedSuffix) {
			continue
		}
		f, err := bin.Open("bin/" + e.Name())
		if err != nil {
			continue
		}
		b, err := readDeflated(f, d)
		f.Close()
		if err == nil && b != nil {
			return b
		}
	}
	return nil
}

// readDeflated reads a Deflate file's encoding if its head names d (its
// head alone otherwise).
func readDeflated(f fs.File, d digest.Digest) ([]byte, error) {
	head := make([]byte, len(d.String())+1)
	if _, err := io.ReadFull(f, head); err != nil {
		return nil, err
	}
	if string(head) != d.String()+"\n" {
		return nil, nil
	}
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	b := make([]byte, fi.Size()-int64(len(head)))
	_, err = io.ReadFull(f, b)
	return b, err
}
