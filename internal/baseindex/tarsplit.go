package baseindex

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"

	"github.com/klauspost/compress/gzip"

	"github.com/mcbake/mcbake/internal/baseindex/jsonscan"
	"github.com/mcbake/mcbake/internal/baseindex/tarparse"
)

// Unpacked is a layer as containers-storage keeps it: its files unpacked
// on disk, and its tar-split, the layer's tar stream with every file's
// content replaced by a reference (docs/design.md, "Indexing a base").
type Unpacked struct {
	// TarSplit opens the layer's tar-split as containers-storage stores
	// it: gzip-compressed JSON lines of github.com/vbatts/tar-split's
	// storage package. An error means the layer has none.
	TarSplit func(ctx context.Context) (io.ReadCloser, error)
	// Open opens a regular file of the unpacked layer by its path
	// relative to the image root ("etc/passwd"); an error matching
	// fs.ErrNotExist means the layer has no file there.
	Open func(path string) (io.ReadCloser, error)
}

// tar-split's entry types (github.com/vbatts/tar-split/tar/storage).
const (
	splitFile    = 1
	splitSegment = 2
)

// crcISO is the CRC-64 table tar-split checksums file contents with.
var crcISO = crc64.MakeTable(crc64.ISO)

// tarSplitListing lists a layer from its tar-split: each segment holds
// the padding after the previous file's content and the next entry's
// header blocks, which tarparse.ParseHeader reads, and the file entry after it
// gives the size and CRC-64 of the content the tar-split left out. The
// contents it reads come from the unpacked files and are checked against
// that CRC-64.
type tarSplitListing struct {
	br   *bufio.Reader
	open func(string) (io.ReadCloser, error)
	// pos is the position in the tar stream, to tell a segment's padding.
	pos  int64
	done bool
	line []byte
	raw  []byte
	// crcs are the files' checksums by loc, the ordinal of their header.
	crcs    []uint64
	hasCRC  []bool
	ordinal int
	hdr     tar.Header
}

func newTarSplitListing(r io.Reader, open func(string) (io.ReadCloser, error)) (*tarSplitListing, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fallback("tar-split: %v", err)
	}
	return &tarSplitListing{br: bufio.NewReaderSize(zr, 256<<10), open: open}, nil
}

func (l *tarSplitListing) next() (*tar.Header, *Digest, int, error) {
	for {
		e, err := l.entry()
		if err == io.EOF && l.done {
			return nil, nil, 0, io.EOF
		}
		if err != nil {
			return nil, nil, 0, err
		}
		if e.typ != splitSegment {
			return nil, nil, 0, fallback("tar-split: file entry %q without a header", e.name)
		}
		blocks, err := l.segment(e.payload)
		if err != nil {
			return nil, nil, 0, err
		}
		if l.done || len(blocks) == 0 {
			if !tarparse.AllZero(blocks) {
				return nil, nil, 0, fallback("tar-split: data after the end of the archive")
			}
			continue
		}
		err = tarparse.ParseHeader(blocks, &l.hdr) // the scanner keeps no header
		if err == tarparse.ErrEndOfArchive {
			l.done = true
			continue
		}
		if err != nil {
			return nil, nil, 0, fallback("tar-split: %v", err)
		}
		return l.header(&l.hdr)
	}
}

// segment returns the header blocks of a segment, its base64 payload,
// decoding only what follows the padding at its start.
func (l *tarSplitListing) segment(b64 []byte) ([]byte, error) {
	n := base64.StdEncoding.DecodedLen(len(b64))
	for k := len(b64) - 1; k >= 0 && k >= len(b64)-2 && b64[k] == '='; k-- {
		n--
	}
	pad := int((tarparse.BlockSize - l.pos%tarparse.BlockSize) % tarparse.BlockSize)
	if l.done {
		pad = 0
	}
	l.pos += int64(n)
	if pad > n {
		return nil, fallback("tar-split: a segment shorter than the padding before it")
	}
	skip := pad / 3
	l.raw = l.raw[:0]
	l.raw = append(l.raw, make([]byte, base64.StdEncoding.DecodedLen(len(b64)-skip*4))...)
	m, err := base64.StdEncoding.Decode(l.raw, b64[skip*4:])
	if err != nil {
		return nil, fallback("tar-split: segment: %v", err)
	}
	return l.raw[pad%3 : m], nil
}

// header reads the file entry that follows a header and checks it.
func (l *tarSplitListing) header(hdr *tar.Header) (*tar.Header, *Digest, int, error) {
	e, err := l.entry()
	if err == io.EOF {
		return nil, nil, 0, fallback("tar-split ends after a header")
	}
	if err != nil {
		return nil, nil, 0, err
	}
	if e.typ != splitFile || e.name != hdr.Name || e.size != hdr.Size || e.size < 0 {
		return nil, nil, 0, fallback("tar-split: header %q size %d, file entry %q size %d", hdr.Name, hdr.Size, e.name, e.size)
	}
	l.pos += e.size
	crc, hasCRC := uint64(0), len(e.payload) == 8
	if hasCRC {
		crc = binary.BigEndian.Uint64(e.payload)
	}
	loc := l.ordinal
	l.ordinal++
	l.crcs = append(l.crcs, crc)
	l.hasCRC = append(l.hasCRC, hasCRC)
	return hdr, nil, loc, nil
}

func (l *tarSplitListing) read(ctx context.Context, files []listedFile) ([][]byte, error) {
	out := make([][]byte, len(files))
	for i, f := range files {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		b, err := readUnpacked(l.open, f.path, f.size)
		if err != nil {
			return nil, err
		}
		if l.hasCRC[f.loc] && crc64.Checksum(b, crcISO) != l.crcs[f.loc] {
			return nil, fallback("%s on disk does not match the layer's tar-split", f.path)
		}
		out[i] = b
	}
	return out, nil
}

// readUnpacked reads a file of an unpacked layer that should have size
// bytes; another size is a fallback.
func readUnpacked(open func(string) (io.ReadCloser, error), p string, size int64) (b []byte, err error) {
	rc, err := open(p)
	if err != nil {
		return nil, fallback("opening %s in the unpacked layer: %v", p, err)
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	b, err = io.ReadAll(io.LimitReader(rc, size+1))
	if err != nil {
		return nil, fmt.Errorf("reading %s in the unpacked layer: %w", p, err)
	}
	if int64(len(b)) != size {
		return nil, fallback("%s in the unpacked layer has another size than its tar header says", p)
	}
	return b, nil
}

// splitEntry is one tar-split line; payload is still base64 for a
// segment, and decoded (a CRC-64) for a file.
type splitEntry struct {
	typ     int64
	name    string
	size    int64
	payload []byte
}

// entry reads and parses the next line; io.EOF after the last.
func (l *tarSplitListing) entry() (splitEntry, error) {
	line, err := l.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull { // a segment longer than the buffer
		l.line = append(l.line[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = l.br.ReadSlice('\n')
			l.line = append(l.line, line...)
		}
		line = l.line
	}
	switch {
	case err == io.EOF && len(bytes.TrimSpace(line)) == 0:
		return splitEntry{}, io.EOF
	case err != nil && err != io.EOF:
		return splitEntry{}, fallback("reading tar-split: %v", err)
	}
	e, err := parseSplitEntry(line)
	if err != nil {
		return e, fallback("tar-split: %v", err)
	}
	return e, nil
}

// parseSplitEntry parses one JSON line: {"type":2,"payload":"<base64>",
// "position":N} or {"type":1,"name":"...","size":N,"payload":"<base64
// CRC-64>","position":N}, with "name_raw" (base64) for a name that is not
// UTF-8. A segment's payload stays base64, a slice of line.
func parseSplitEntry(line []byte) (splitEntry, error) {
	var e splitEntry
	s := jsonscan.New(line)
	var payload []byte
	s.Object(func(key []byte) {
		switch string(key) {
		case "type":
			e.typ = s.Int()
		case "name":
			e.name = s.Str()
		case "name_raw":
			raw, err := base64.StdEncoding.DecodeString(s.Str())
			if err != nil {
				s.Fail(jsonscan.ErrMalformed)
			}
			e.name = string(raw)
		case "size":
			e.size = s.Int()
		case "payload":
			if !s.Null() {
				payload = s.Bytes()
			}
		default:
			s.Skip()
		}
	})
	if err := s.End(); err != nil {
		return e, err
	}
	e.payload = payload
	if e.typ == splitFile && payload != nil {
		e.payload = make([]byte, base64.StdEncoding.DecodedLen(len(payload)))
		n, err := base64.StdEncoding.Decode(e.payload, payload)
		if err != nil {
			return e, fmt.Errorf("payload: %w", err)
		}
		e.payload = e.payload[:n]
	}
	return e, nil
}
