package image

import (
	"errors"
	"fmt"
	"io"

	digest "github.com/opencontainers/go-digest"
)

// verifier passes a blob through and, at its end, turns io.EOF into an error
// if the content does not have the expected digest (and size, when known).
type verifier struct {
	r        io.Reader
	want     digest.Digest
	size     int64 // -1 = unknown
	n        int64
	digester digest.Digester
}

func newVerifier(r io.Reader, want digest.Digest, size int64) *verifier {
	return &verifier{r: r, want: want, size: size, digester: want.Algorithm().Digester()}
}

func (v *verifier) Read(p []byte) (int, error) {
	n, err := v.r.Read(p)
	v.n += int64(n)
	v.digester.Hash().Write(p[:n]) // hash.Hash.Write never fails
	if errors.Is(err, io.EOF) {
		if verr := v.check(); verr != nil {
			return n, verr
		}
	}
	return n, err
}

func (v *verifier) check() error {
	if v.size >= 0 && v.n != v.size {
		return fmt.Errorf("blob %s: read %d bytes, want %d", v.want, v.n, v.size)
	}
	if got := v.digester.Digest(); got != v.want {
		return fmt.Errorf("blob %s: content has digest %s", v.want, got)
	}
	return nil
}

// verifyingReadCloser reads through a verifier and closes the source.
type verifyingReadCloser struct {
	*verifier
	c io.Closer
}

func (v verifyingReadCloser) Close() error { return v.c.Close() }
