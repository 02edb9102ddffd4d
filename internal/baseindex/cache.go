package baseindex

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math"
	"os"
	"strings"
	"unsafe"
)

// A cache file holds one layer's entries:
//
//	magic    16 bytes  "mcbake baseindex"
//	version   4 bytes  little endian, cacheVersion
//	length    8 bytes  little endian, payload length
//	checksum  4 bytes  little endian, CRC-32C of the payload
//	payload:
//	  id               string: the layer's digest (and diff_id, cacheFiles)
//	  strings          string: every path and target, each once
//	  marker count     uvarint
//	  markers, each:   type byte (whiteout or opaque), path ref
//	  entry count      uvarint
//	  entries, each:   type byte, flags byte, path ref, mode, uid, gid
//	                   uvarint, size varint, then if flags has
//	                   flagTarget: target ref, flagDigest: digest 32 bytes,
//	                   flagContent: content string; flagDeferred marks
//	                   a regular file whose digest was not computed
//
// where a string is a uvarint length and its bytes, and a ref is the
// uvarint offset and length of a string in the strings. The markers come
// first because a layer applies them before its entries. Hardlinks are
// cached unresolved: their size, digest, LinkedType and LinkedTarget are
// only set by the merge. The checksum
// catches a damaged or truncated file; the cache is trusted like the rest
// of the user's cache directory. Bump cacheVersion whenever the encoding
// or what a scan records changes.
const (
	cacheMagic   = "mcbake baseindex"
	cacheVersion = 4
	headerSize   = len(cacheMagic) + 4 + 8 + 4
)

// Entry flags: which optional fields follow.
const (
	flagTarget = 1 << iota
	flagDigest
	flagContent
	flagDeferred
)

var (
	errCorrupt = errors.New("corrupt index cache")
	crcTable   = crc32.MakeTable(crc32.Castagnoli)
)

// layerData is one layer's entries, decoded from the cache encoding for
// the merge: its entries are already nodes, in slots the index adopts,
// and strings is the only copy of their paths and targets.
type layerData struct {
	strings string
	markers []marker
	// chunks hold the entries, in tar order, chunkSize to a chunk.
	chunks [][]Node
	count  int
	// content holds the kept contents by entry; their nodes have
	// nodeContent set.
	content map[int][]byte
	// deferred is set when some entry's digest is deferred: the layer's
	// data is then only usable with its unpacked files.
	deferred bool
}

func newLayerData(strings string) *layerData {
	return &layerData{strings: strings, content: map[int][]byte{}}
}

// marker is a whiteout or an opaque marker.
type marker struct {
	typ  Type
	path string
}

// readCache returns the layer data cached at file under id (cacheFiles).
// Any problem, missing file included, reports false so that the layer is
// scanned again.
func readCache(file, id string) (*layerData, bool) {
	l, err := readCacheFile(file, id)
	return l, err == nil
}

func readCacheFile(file, id string) (l *layerData, err error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	fi, err := f.Stat()
	if err != nil {
		return nil, err
	}
	return decodeLayer(f, fi.Size(), id)
}

// writeCache stores the strings and records of a layer at file, under id,
// atomically (see writeFileAtomically).
func writeCache(file, id string, strs string, records []byte) error {
	head := appendString(nil, id)
	head = binary.AppendUvarint(head, uint64(len(strs)))
	crc := crc32.Update(0, crcTable, head)
	crc = crc32.Update(updateString(crc, strs), crcTable, records)
	h := make([]byte, headerSize)
	v := h[copy(h, cacheMagic):]
	binary.LittleEndian.PutUint32(v, cacheVersion)
	binary.LittleEndian.PutUint64(v[4:], uint64(len(head)+len(strs)+len(records)))
	binary.LittleEndian.PutUint32(v[12:], crc)
	return writeFileAtomically(file, func(w *bufio.Writer) error {
		for _, b := range [][]byte{h, head} {
			if _, err := w.Write(b); err != nil {
				return err
			}
		}
		if _, err := w.WriteString(strs); err != nil {
			return err
		}
		_, err := w.Write(records)
		return err
	}, nil)
}

// updateString returns the CRC-32C crc updated with s, read in place.
func updateString(crc uint32, s string) uint32 {
	if s == "" {
		return crc
	}
	return crc32.Update(crc, crcTable, unsafe.Slice(unsafe.StringData(s), len(s))) // crc32 only reads it
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// decodeLayer reads and checks the size bytes of an encoded layer cached
// under id. It
// reads the strings straight into the string the nodes share, and only
// the records into a buffer.
func decodeLayer(r io.Reader, size int64, id string) (*layerData, error) {
	br := bufio.NewReaderSize(r, readBuffer)
	var h [headerSize]byte
	if _, err := io.ReadFull(br, h[:]); err != nil || string(h[:len(cacheMagic)]) != cacheMagic {
		return nil, errCorrupt
	}
	v := h[len(cacheMagic):]
	if binary.LittleEndian.Uint32(v) != cacheVersion || binary.LittleEndian.Uint64(v[4:]) != uint64(size)-uint64(headerSize) {
		return nil, errCorrupt
	}
	p := &payloadReader{r: br, left: size - int64(headerSize)}
	if got, err := p.string(); err != nil || got != id {
		return nil, errCorrupt
	}
	strs, err := p.string()
	if err != nil {
		return nil, errCorrupt
	}
	recs := make([]byte, p.left)
	if _, err := io.ReadFull(p, recs); err != nil || p.crc != binary.LittleEndian.Uint32(v[12:]) {
		return nil, errCorrupt
	}
	l := newLayerData(strs)
	if !l.decode(recs) {
		return nil, errCorrupt
	}
	return l, nil
}

// readBuffer is the read-ahead on a cache file.
const readBuffer = 64 << 10

// payloadReader reads at most left bytes of a payload and checksums them.
type payloadReader struct {
	r    *bufio.Reader
	left int64
	crc  uint32
}

func (p *payloadReader) Read(b []byte) (int, error) {
	if p.left == 0 {
		return 0, io.EOF
	}
	n, err := p.r.Read(b[:min(int64(len(b)), p.left)])
	p.crc = crc32.Update(p.crc, crcTable, b[:n])
	p.left -= int64(n)
	return n, err
}

func (p *payloadReader) ReadByte() (byte, error) {
	var b [1]byte
	_, err := io.ReadFull(p, b[:])
	return b[0], err
}

// string reads a string, from the read-ahead straight into the string's
// memory.
func (p *payloadReader) string() (string, error) {
	l, err := binary.ReadUvarint(p)
	if err != nil || l > uint64(p.left) {
		return "", errCorrupt
	}
	var b strings.Builder
	b.Grow(int(l))
	for left := int(l); left > 0; {
		chunk, _ := p.r.Peek(min(left, readBuffer))
		if len(chunk) == 0 {
			return "", errCorrupt
		}
		b.Write(chunk)
		p.crc = crc32.Update(p.crc, crcTable, chunk)
		left -= len(chunk)
		p.left -= int64(len(chunk))
		if _, err := p.r.Discard(len(chunk)); err != nil {
			return "", err
		}
	}
	return b.String(), nil
}

// decode decodes b, the payload's records. It checks every record, so
// that the merge never meets a corrupt one.
func (l *layerData) decode(b []byte) bool {
	r := records{b: b, strings: l.strings}
	r.count()
	for r.next() {
		t, p := r.marker()
		if t != typeWhiteout && t != typeOpaque {
			return false
		}
		l.markers = append(l.markers, marker{typ: t, path: p})
	}
	r.count()
	l.count = r.total
	for k := 0; r.next(); k++ {
		if k&(chunkSize-1) == 0 {
			l.chunks = append(l.chunks, make([]Node, min(chunkSize, l.count-k)))
		}
		n := &l.chunks[k>>chunkBits][k&(chunkSize-1)]
		if content := r.node(n); content != nil {
			n.setContent(true)
			l.content[k] = bytes.Clone(content)
		}
		if n.Deferred() {
			if n.Type != File || n.Digest != (Digest{}) {
				return false
			}
			l.deferred = true
		}
		if n.Type < File || n.Type > FIFO {
			return false
		}
	}
	return !r.err && r.off == len(r.b)
}

// records reads a section of a payload. A read past its end or a string
// reference outside the strings sets err.
type records struct {
	b       []byte
	strings string
	off     int
	// total is the section's record count, left how many next has not
	// reached.
	total, left int
	err         bool
}

// count reads a section's record count.
func (r *records) count() {
	c := r.uvarint()
	if c > uint64(len(r.b)) { // a record takes at least a byte
		r.err = true
	}
	if r.err {
		c = 0
	}
	r.total, r.left = int(c), int(c)
}

// next moves to the next record, reporting false after the last one.
func (r *records) next() bool {
	if r.left == 0 || r.err {
		return false
	}
	r.left--
	return true
}

// marker reads a marker's type and path.
func (r *records) marker() (Type, string) {
	t := Type(r.byte())
	return t, r.ref()
}

// node reads an entry into n, a zero Node, and returns its kept content,
// or nil. The content is part of the payload.
//
// It sets the fields without pointers first: n is usually in memory the
// kernel has not mapped yet, and the first access to a page had better be
// a plain write than the read a pointer write makes while the garbage
// collector runs, which maps a page of zeros to replace at the write. As
// a Node starts with its strings, whichever of its pages a Node is the
// first to reach, it reaches it with a plain write.
func (r *records) node(n *Node) []byte {
	n.Type = Type(r.byte())
	flags := r.byte()
	path := r.ref()
	n.Mode = r.uint32()
	n.UID, n.GID = r.uint32(), r.uint32()
	n.Size = r.varint()
	var target string
	if flags&flagTarget != 0 {
		target = r.ref()
	}
	if flags&flagDigest != 0 && r.off+len(n.Digest) <= len(r.b) {
		r.off += copy(n.Digest[:], r.b[r.off:])
	} else if flags&flagDigest != 0 {
		r.err = true
	}
	n.Path, n.Target = path, target
	if flags&flagDeferred != 0 {
		n.flags |= nodeDeferred
	}
	if flags&flagContent == 0 {
		return nil
	}
	return r.bytes()
}

func (r *records) byte() byte {
	if r.off >= len(r.b) {
		r.err = true
		return 0
	}
	r.off++
	return r.b[r.off-1]
}

func (r *records) uvarint() uint64 {
	v, n := binary.Uvarint(r.b[min(r.off, len(r.b)):])
	if n <= 0 {
		r.err = true
		return 0
	}
	r.off += n
	return v
}

func (r *records) uint32() uint32 {
	v := r.uvarint()
	if v > math.MaxUint32 {
		r.err = true
	}
	return uint32(v)
}

func (r *records) varint() int64 {
	v, n := binary.Varint(r.b[min(r.off, len(r.b)):])
	if n <= 0 {
		r.err = true
		return 0
	}
	r.off += n
	return v
}

// bytes reads a string of the payload.
func (r *records) bytes() []byte {
	l := r.uvarint()
	if r.err || l > uint64(len(r.b)-r.off) {
		r.err = true
		return nil
	}
	r.off += int(l)
	return r.b[r.off-int(l) : r.off : r.off]
}

// ref reads a reference to one of the strings.
func (r *records) ref() string {
	off, l := r.uvarint(), r.uvarint()
	if r.err || off > uint64(len(r.strings)) || l > uint64(len(r.strings))-off {
		r.err = true
		return ""
	}
	return r.strings[off : off+l]
}
