package tarparse

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Reader reads a tar stream's entries as archive/tar's Reader does,
// with readHeader: a cold scan of a base with a hundred thousand headers
// spent 7% of its CPU in archive/tar's header parsing, most of it checking
// every header byte for non-ASCII to guess a format mcbake does not use
// (docs/design.md, "Indexing a base"). It returns ErrSparse for a sparse
// file, which the caller reads with archive/tar.
//
// Where they differ, it is in what it does not read: a header whose
// modification time, device numbers or unused PAX records archive/tar
// would refuse is read, not refused. Every header archive/tar reads, it
// reads the same (FuzzTarReader).
type Reader struct {
	r   io.Reader
	buf []byte
	hdr tar.Header
	// left is what is left of the current entry's content; pad the
	// padding after it.
	left, pad int64
	// err is Next's error once it has returned one, as archive/tar's.
	err error
}

// NewReader returns a Reader of the tar stream r.
func NewReader(r io.Reader) *Reader {
	return &Reader{r: r, buf: make([]byte, BlockSize)}
}

// Next returns the next entry's header, valid until the next call, or
// io.EOF at the end of the archive.
func (t *Reader) Next() (*tar.Header, error) {
	if t.err != nil {
		return nil, t.err
	}
	hdr, err := t.nextHeader()
	t.err = err
	return hdr, err
}

func (t *Reader) nextHeader() (*tar.Header, error) {
	if err := t.skip(); err != nil {
		return nil, err
	}
	pad, err := readHeader(t.next, &t.hdr)
	if err == ErrEndOfArchive {
		// Two zero blocks end the archive, and so does the stream's end
		// after one; anything else after a zero block is an error.
		blk, err := t.next(BlockSize)
		switch {
		case err == io.EOF:
			return nil, io.EOF
		case err == errShortEOF:
			return nil, io.ErrUnexpectedEOF
		case err != nil:
			return nil, err
		case !AllZero(blk):
			return nil, errors.New("a tar header after a zero block")
		}
		return nil, io.EOF
	}
	if err == io.EOF || err == io.ErrUnexpectedEOF {
		return nil, err
	}
	if err != nil {
		return nil, fmt.Errorf("invalid tar header: %w", err)
	}
	// The names share t.buf, which the next header overwrites; the
	// scanner keeps paths.
	t.hdr.Name, t.hdr.Linkname = strings.Clone(t.hdr.Name), strings.Clone(t.hdr.Linkname)
	t.left = dataSize(&t.hdr)
	t.pad = -t.left&(BlockSize-1) + pad
	return &t.hdr, nil
}

// next reads the next n bytes of the stream into t.buf: io.EOF when it
// ends before the first, errShortEOF when it ends after it, and the
// stream's other errors as they are (an io.ErrUnexpectedEOF of a
// decompressor among them), as archive/tar's tryReadFull.
func (t *Reader) next(n int64) ([]byte, error) {
	if int64(cap(t.buf)) < n {
		t.buf = make([]byte, n)
	}
	b := t.buf[:n]
	var got int
	for got < len(b) {
		m, err := t.r.Read(b[got:])
		got += m
		switch {
		case got == len(b):
			return b, nil
		case err == io.EOF && got == 0:
			return nil, io.EOF
		case err == io.EOF:
			return nil, errShortEOF
		case err != nil:
			return nil, err
		}
	}
	return b, nil
}

// skip discards what the caller did not read of the current entry, then
// its padding. A stream that ends in the padding ends the archive, as in
// archive/tar.
func (t *Reader) skip() error {
	if t.left > 0 {
		n, err := io.CopyN(io.Discard, t.r, t.left)
		t.left -= n
		if err == io.EOF {
			return io.ErrUnexpectedEOF
		}
		if err != nil {
			return err
		}
	}
	pad := t.pad
	t.pad = 0
	if _, err := t.next(pad); err == errShortEOF {
		return io.EOF
	} else if err != nil {
		return err
	}
	return nil
}

// Read reads the current entry's content, as archive/tar's does: io.EOF
// at its end, io.ErrUnexpectedEOF if the stream ends before.
func (t *Reader) Read(p []byte) (int, error) {
	if t.left <= 0 {
		return 0, io.EOF
	}
	if int64(len(p)) > t.left {
		p = p[:t.left]
	}
	n, err := t.r.Read(p)
	t.left -= int64(n)
	switch {
	case err == io.EOF && t.left > 0:
		return n, io.ErrUnexpectedEOF
	case err == nil && t.left == 0:
		return n, io.EOF
	}
	return n, err
}
