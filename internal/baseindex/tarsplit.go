package baseindex

import (
	"archive/tar"
	"bufio"
	"context"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"io"

	"github.com/klauspost/compress/gzip"
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

// tarSplitListing lists a layer from its tar-split: the tar headers are
// the segments, fed to archive/tar with every file's content a hole it
// seeks over; the contents it reads come from the unpacked files and are
// checked against the CRC-64 the tar-split records.
type tarSplitListing struct {
	split *splitReader
	tr    *tar.Reader
	open  func(string) (io.ReadCloser, error)
	// crcs are the files' checksums by loc, the ordinal of their header.
	crcs    []uint64
	hasCRC  []bool
	ordinal int
}

func newTarSplitListing(r io.Reader, open func(string) (io.ReadCloser, error)) (*tarSplitListing, error) {
	zr, err := gzip.NewReader(r)
	if err != nil {
		return nil, fallback("tar-split: %v", err)
	}
	sr := &splitReader{br: bufio.NewReaderSize(zr, 256<<10)}
	return &tarSplitListing{split: sr, tr: tar.NewReader(sr), open: open}, nil
}

func (l *tarSplitListing) next() (*tar.Header, *Digest, int, error) {
	hdr, err := l.tr.Next()
	if err == io.EOF {
		return nil, nil, 0, err
	}
	if err != nil {
		return nil, nil, 0, fallback("tar-split: %v", err)
	}
	f, err := l.split.file()
	if err != nil {
		return nil, nil, 0, err
	}
	if f.name != hdr.Name || f.size != hdr.Size {
		return nil, nil, 0, fallback("tar-split: header %q size %d, file entry %q size %d", hdr.Name, hdr.Size, f.name, f.size)
	}
	loc := l.ordinal
	l.ordinal++
	l.crcs = append(l.crcs, f.crc)
	l.hasCRC = append(l.hasCRC, f.hasCRC)
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

// splitReader serves a tar-split's tar stream: the segments' bytes, and
// a hole of zeros in place of each file's content, which archive/tar
// seeks over. After each header, file reads the file entry that follows
// it and opens the hole.
type splitReader struct {
	br   *bufio.Reader
	seg  []byte // the current segment's bytes
	off  int    // read offset in seg
	hole int64  // bytes of content left to serve
	pos  int64  // bytes served so far
	line []byte
	err  error
}

// splitEntry is one tar-split line.
type splitEntry struct {
	typ     int64
	name    string
	size    int64
	payload []byte
}

// fileEntry is a tar-split file entry.
type fileEntry struct {
	name   string
	size   int64
	crc    uint64
	hasCRC bool
}

func (r *splitReader) Read(p []byte) (int, error) {
	for r.hole == 0 && r.off == len(r.seg) {
		e, err := r.entry()
		if err != nil {
			return 0, err
		}
		if e.typ != splitSegment {
			return 0, fallback("tar-split: file entry %q where the tar stream goes on", e.name)
		}
		r.seg, r.off = e.payload, 0
	}
	var n int
	if r.hole > 0 {
		n = int(min(int64(len(p)), r.hole))
		clear(p[:n])
		r.hole -= int64(n)
	} else {
		n = copy(p, r.seg[r.off:])
		r.off += n
	}
	r.pos += int64(n)
	return n, nil
}

// Seek only moves forward over a hole, which is how archive/tar skips a
// file's content; Seek(0, io.SeekCurrent) tells the position.
func (r *splitReader) Seek(offset int64, whence int) (int64, error) {
	if whence != io.SeekCurrent || offset < 0 || offset > r.hole {
		return r.pos, errors.New("tar-split: unsupported seek")
	}
	r.hole -= offset
	r.pos += offset
	return r.pos, nil
}

// file reads the file entry that follows a header's segment, and opens
// the hole of its content.
func (r *splitReader) file() (fileEntry, error) {
	if r.off != len(r.seg) || r.hole != 0 {
		return fileEntry{}, fallback("tar-split: a segment goes on past a header")
	}
	e, err := r.entry()
	if err != nil {
		return fileEntry{}, err
	}
	if e.typ != splitFile {
		return fileEntry{}, fallback("tar-split: a segment where a file entry should be")
	}
	f := fileEntry{name: e.name, size: e.size}
	if len(e.payload) == 8 {
		f.crc, f.hasCRC = binary.BigEndian.Uint64(e.payload), true
	}
	if f.size < 0 {
		return fileEntry{}, fallback("tar-split: negative size of %q", f.name)
	}
	r.hole = f.size
	return f, nil
}

// entry reads and parses the next line.
func (r *splitReader) entry() (splitEntry, error) {
	if r.err != nil {
		return splitEntry{}, r.err
	}
	line, err := r.br.ReadSlice('\n')
	if err == bufio.ErrBufferFull { // a segment longer than the buffer
		r.line = append(r.line[:0], line...)
		for err == bufio.ErrBufferFull {
			line, err = r.br.ReadSlice('\n')
			r.line = append(r.line, line...)
		}
		line = r.line
	}
	switch {
	case err == io.EOF && len(line) == 0:
		r.err = fallback("tar-split ends before the tar stream")
		return splitEntry{}, r.err
	case err != nil && err != io.EOF:
		r.err = fallback("reading tar-split: %v", err)
		return splitEntry{}, r.err
	}
	e, err := parseSplitEntry(line)
	if err != nil {
		r.err = fallback("tar-split: %v", err)
	}
	return e, err
}

// parseSplitEntry parses one JSON line: {"type":2,"payload":"<base64>",
// "position":N} or {"type":1,"name":"...","size":N,"payload":"<base64
// CRC-64>","position":N}, with "name_raw" (base64) for a name that is not
// UTF-8.
func parseSplitEntry(line []byte) (splitEntry, error) {
	var e splitEntry
	s := jsonScanner{b: line}
	var payload []byte
	s.object(func(key []byte) {
		switch string(key) {
		case "type":
			e.typ = s.int()
		case "name":
			e.name = s.str()
		case "name_raw":
			raw, err := base64.StdEncoding.DecodeString(s.str())
			if err != nil {
				s.fail()
			}
			e.name = string(raw)
		case "size":
			e.size = s.int()
		case "payload":
			if !s.null() {
				payload = s.bytes()
			}
		default:
			s.skip()
		}
	})
	if err := s.end(); err != nil {
		return e, err
	}
	if payload != nil {
		e.payload = make([]byte, base64.StdEncoding.DecodedLen(len(payload)))
		n, err := base64.StdEncoding.Decode(e.payload, payload)
		if err != nil {
			return e, fmt.Errorf("payload: %w", err)
		}
		e.payload = e.payload[:n]
	}
	return e, nil
}
