package baseindex

import (
	"encoding/binary"
	"errors"
	"hash/maphash"
	"math"
	"strings"
)

// scanned is one layer's entries as a scan finds them, in tar order, in
// the compact form the cache stores: paths and targets are references
// into strings, which holds each of them once, so that a scan keeps no
// string and no pointer per entry.
type scanned struct {
	// strings grows into the string the layer's nodes share.
	strings strings.Builder
	// known maps the hash of a string in strings to its offset.
	known map[uint64]uint32
	seed  maphash.Seed
	// markers are the whiteouts and opaque markers, entries the rest.
	markers []entry
	entries []entry
	// content holds the kept contents by index in entries.
	content map[int][]byte
}

// ref is a string in a scanned layer's strings.
type ref struct{ off, len uint32 }

// entry is one scanned tar entry, a Node before the merge.
type entry struct {
	path, target   ref
	size           int64
	digest         Digest
	mode, uid, gid uint32
	typ            Type
	// deferred marks a regular file whose digest is not known yet.
	deferred bool
}

func newScanned() scanned {
	return scanned{known: map[uint64]uint32{}, seed: maphash.MakeSeed(), content: map[int][]byte{}}
}

var errTooManyPaths = errors.New("more than 4 GiB of paths in one layer")

// intern returns a reference to str, adding str to the strings unless it
// is there.
func (s *scanned) intern(str string) (ref, error) {
	h := maphash.String(s.seed, str)
	if off, ok := s.known[h]; ok && int(off)+len(str) <= s.strings.Len() && s.str(ref{off, uint32(len(str))}) == str {
		return ref{off, uint32(len(str))}, nil
	}
	if uint64(s.strings.Len())+uint64(len(str)) > math.MaxUint32 {
		return ref{}, errTooManyPaths
	}
	r := ref{uint32(s.strings.Len()), uint32(len(str))}
	s.strings.WriteString(str)
	s.known[h] = r.off
	return r, nil
}

// str returns the string r refers to.
func (s *scanned) str(r ref) string {
	return s.strings.String()[r.off : r.off+r.len]
}

// records encodes the markers and entries as a cache payload's records.
func (s *scanned) records() []byte {
	b := make([]byte, 0, 16+len(s.markers)*8+len(s.entries)*24)
	b = binary.AppendUvarint(b, uint64(len(s.markers)))
	for _, m := range s.markers {
		b = appendRef(append(b, byte(m.typ)), m.path)
	}
	b = binary.AppendUvarint(b, uint64(len(s.entries)))
	for i := range s.entries {
		content, kept := s.content[i]
		b = appendEntry(b, &s.entries[i], content, kept)
	}
	return b
}

func appendEntry(b []byte, e *entry, content []byte, kept bool) []byte {
	var flags byte
	if e.target.len != 0 {
		flags |= flagTarget
	}
	if e.digest != (Digest{}) {
		flags |= flagDigest
	}
	if kept {
		flags |= flagContent
	}
	if e.deferred {
		flags |= flagDeferred
	}
	b = appendRef(append(b, byte(e.typ), flags), e.path)
	b = binary.AppendUvarint(b, uint64(e.mode))
	b = binary.AppendUvarint(b, uint64(e.uid))
	b = binary.AppendUvarint(b, uint64(e.gid))
	b = binary.AppendVarint(b, e.size)
	if flags&flagTarget != 0 {
		b = appendRef(b, e.target)
	}
	if flags&flagDigest != 0 {
		b = append(b, e.digest[:]...)
	}
	if kept {
		b = binary.AppendUvarint(b, uint64(len(content)))
		b = append(b, content...)
	}
	return b
}

func appendRef(b []byte, r ref) []byte {
	b = binary.AppendUvarint(b, uint64(r.off))
	return binary.AppendUvarint(b, uint64(r.len))
}
