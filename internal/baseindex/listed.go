package baseindex

import (
	"archive/tar"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"slices"
)

// A listing is a layer's entries read from metadata kept beside its blob,
// a table of contents or a tar-split (docs/design.md, "Indexing a base"),
// so that the blob itself is not read.
type listing interface {
	// next returns the next entry's tar header and, when the metadata
	// records it, the SHA-256 of a regular file's content; io.EOF after
	// the last entry. loc locates the entry for read.
	next() (hdr *tar.Header, sum *Digest, loc int, err error)
	// read returns the contents of the given regular files, in order.
	read(ctx context.Context, files []listedFile) ([][]byte, error)
}

// listedFile is a regular file of a listing whose content is wanted.
type listedFile struct {
	loc  int
	path string
	size int64
}

// errFallback marks why a layer's metadata cannot be used; Build then
// scans the blob. Anything else a listing returns is an error.
var errFallback = errors.New("layer metadata unusable")

func fallback(format string, args ...any) error {
	return fmt.Errorf("%w: %s", errFallback, fmt.Sprintf(format, args...))
}

// scanListing records a listing's entries as a scan of the blob would:
// same entries, same kept contents, same hardlink handling. A regular
// file the listing gives no digest for is deferred, unless its content is
// read anyway (a kept file, or the target of a hardlink at a kept path),
// in which case its digest is computed from it. Contents that do not
// match the listing's digest or size are a fallback.
func scanListing(ctx context.Context, lst listing) (*scanned, error) {
	s := newListScanner()
	if c, ok := lst.(interface{ count() int }); ok {
		s.entries = make([]entry, 0, c.count())
	}
	var kept []int
	locs := map[int]int{} // entry index -> loc, for the regular files
	for {
		hdr, sum, loc, err := lst.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, err
		}
		i, keep, err := s.addListed(hdr, sum)
		if err != nil {
			return nil, fallback("entry %s: %v", quoteName(hdr.Name), err)
		}
		if i >= 0 {
			locs[i] = loc
		}
		if keep {
			kept = append(kept, i)
		}
	}
	if err := s.readListed(ctx, lst, kept, locs); err != nil {
		return nil, err
	}
	return &s.scanned, nil
}

// addListed records one listed entry. For a regular file it returns its
// index in the entries and whether its content is kept, otherwise -1.
func (s *scanner) addListed(hdr *tar.Header, sum *Digest) (file int, keep bool, err error) {
	e, p, ok, err := s.header(hdr)
	if err != nil || !ok {
		return -1, false, err
	}
	file = -1
	switch e.typ {
	case File:
		e.size = hdr.Size
		if sum != nil {
			e.digest = *sum
		} else {
			e.deferred = true
		}
		if keep, err = keepContent(p, hdr.Size); err != nil {
			return -1, false, err
		}
		if keep {
			if err := s.budget.take(p, hdr.Size); err != nil {
				return -1, false, err
			}
		}
		file = len(s.entries)
	case Hardlink:
		if err := s.addHardlink(&e, p, hdr.Linkname); err != nil {
			return -1, false, err
		}
		if keptPath(p) {
			s.needs = append(s.needs, len(s.entries))
		}
	}
	s.entries = append(s.entries, e)
	return file, keep, nil
}

// readListed reads the kept files and the targets of the hardlinks at
// kept paths, checks them, and keeps them.
func (s *scanner) readListed(ctx context.Context, lst listing, kept []int, locs map[int]int) error {
	targets, err := s.pendingTargets()
	if err != nil {
		return err
	}
	want := map[int]bool{}
	for _, i := range kept {
		want[i] = true
	}
	for j := range targets {
		want[j] = true
	}
	order := slices.Sorted(func(yield func(int) bool) {
		for i := range want {
			if !yield(i) {
				return
			}
		}
	})
	files := make([]listedFile, len(order))
	for k, i := range order {
		files[k] = listedFile{loc: locs[i], path: s.str(s.entries[i].path), size: s.entries[i].size}
	}
	contents, err := lst.read(ctx, files)
	if err != nil {
		return err
	}
	got := map[int][]byte{}
	for k, i := range order {
		if err := s.checkListed(i, contents[k]); err != nil {
			return err
		}
		got[i] = contents[k]
	}
	for _, i := range kept {
		s.content[i] = got[i]
	}
	return s.fillLinks(targets, got)
}

// checkListed checks a listed file's content against its size and
// digest, or computes the digest it was listed without.
func (s *scanner) checkListed(i int, content []byte) error {
	e := &s.entries[i]
	if int64(len(content)) != e.size {
		return fallback("%s has %d bytes, its metadata says %d", s.str(e.path), len(content), e.size)
	}
	sum := Digest(sha256.Sum256(content))
	switch {
	case e.deferred:
		e.digest, e.deferred = sum, false
	case sum != e.digest:
		return fallback("content of %s does not match its digest in the table of contents", s.str(e.path))
	}
	return nil
}
