package baseindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"

	"github.com/google/renameio/v2"
	digest "github.com/opencontainers/go-digest"
)

// A cache file holds one layer's entries:
//
//	magic    16 bytes  "mcbake baseindex"
//	version   4 bytes  little endian, cacheVersion
//	length    8 bytes  little endian, payload length
//	checksum 32 bytes  sha256 of the payload
//	payload:
//	  layer digest     string
//	  entry count      uvarint
//	  entries, each:   type byte, path string, mode uvarint,
//	                   uid, gid, size varint, target, digest string,
//	                   content flag byte (1: content string follows)
//
// where a string is a uvarint length and its bytes. Bump cacheVersion
// whenever the encoding or what a scan records changes.
const (
	cacheMagic   = "mcbake baseindex"
	cacheVersion = 1
	headerSize   = len(cacheMagic) + 4 + 8 + sha256.Size
)

var errCorrupt = errors.New("corrupt index cache")

// readCache returns the entries cached at file for layer d. Any problem,
// missing file included, reports false so that the layer is scanned again.
func readCache(file string, d digest.Digest) ([]Node, bool) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, false
	}
	entries, err := decodeCache(b, d)
	return entries, err == nil
}

// writeCache stores the entries of layer d at file atomically.
func writeCache(file string, d digest.Digest, entries []Node) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	return renameio.WriteFile(file, encodeCache(d, entries), 0o644, renameio.WithTempDir(dir))
}

// encodeCache encodes the entries of layer d.
func encodeCache(d digest.Digest, entries []Node) []byte {
	b := make([]byte, headerSize, headerSize+len(d)+len(entries)*128)
	b = appendString(b, d.String())
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for i := range entries {
		b = appendNode(b, &entries[i])
	}
	payload := b[headerSize:]
	sum := sha256.Sum256(payload)
	h := b[copy(b, cacheMagic):]
	binary.LittleEndian.PutUint32(h, cacheVersion)
	binary.LittleEndian.PutUint64(h[4:], uint64(len(payload)))
	copy(h[12:], sum[:])
	return b
}

func appendNode(b []byte, n *Node) []byte {
	b = append(b, byte(n.Type))
	b = appendString(b, n.Path)
	b = binary.AppendUvarint(b, uint64(n.Mode))
	b = binary.AppendVarint(b, int64(n.UID))
	b = binary.AppendVarint(b, int64(n.GID))
	b = binary.AppendVarint(b, n.Size)
	b = appendString(b, n.Target)
	b = appendString(b, n.Digest)
	if n.content == nil {
		return append(b, 0)
	}
	b = append(b, 1)
	b = binary.AppendUvarint(b, uint64(len(n.content)))
	return append(b, n.content...)
}

func appendString(b []byte, s string) []byte {
	b = binary.AppendUvarint(b, uint64(len(s)))
	return append(b, s...)
}

// Hardlinks are cached unresolved: LinkedType and LinkedTarget are only set
// by the merge.

// decodeCache checks and decodes a cache file's bytes for layer d.
func decodeCache(b []byte, d digest.Digest) ([]Node, error) {
	if len(b) < headerSize || string(b[:len(cacheMagic)]) != cacheMagic {
		return nil, errCorrupt
	}
	h := b[len(cacheMagic):]
	payload := b[headerSize:]
	if binary.LittleEndian.Uint32(h) != cacheVersion ||
		binary.LittleEndian.Uint64(h[4:]) != uint64(len(payload)) {
		return nil, errCorrupt
	}
	if sum := sha256.Sum256(payload); !bytes.Equal(sum[:], h[12:12+sha256.Size]) {
		return nil, errCorrupt
	}
	dec := decoder{b: payload, s: string(payload)}
	if dec.string() != d.String() {
		return nil, errCorrupt
	}
	return dec.entries()
}

// decoder reads a payload. Strings are slices of s, one copy of the
// payload, so that decoding allocates nothing per entry but the nodes.
type decoder struct {
	b   []byte
	s   string
	off int
	err bool
}

func (d *decoder) entries() ([]Node, error) {
	count := d.uvarint()
	if d.err || count > uint64(len(d.b)) {
		return nil, errCorrupt
	}
	entries := make([]Node, count)
	for i := range entries {
		d.node(&entries[i])
	}
	if d.err || d.off != len(d.b) {
		return nil, errCorrupt
	}
	return entries, nil
}

func (d *decoder) node(n *Node) {
	n.Type = Type(d.byte())
	n.Path = d.string()
	n.Mode = uint32(d.uvarint())
	n.UID, n.GID = int(d.varint()), int(d.varint())
	n.Size = d.varint()
	n.Target = d.string()
	n.Digest = d.string()
	if d.byte() == 1 {
		n.content = d.bytes()
	}
	if n.Type < File || n.Type > typeOpaque {
		d.err = true
	}
}

func (d *decoder) byte() byte {
	if d.off >= len(d.b) {
		d.err = true
		return 0
	}
	d.off++
	return d.b[d.off-1]
}

func (d *decoder) uvarint() uint64 {
	v, n := binary.Uvarint(d.b[min(d.off, len(d.b)):])
	if n <= 0 {
		d.err = true
		return 0
	}
	d.off += n
	return v
}

func (d *decoder) varint() int64 {
	v, n := binary.Varint(d.b[min(d.off, len(d.b)):])
	if n <= 0 {
		d.err = true
		return 0
	}
	d.off += n
	return v
}

// span returns the bounds of the next length-prefixed field.
func (d *decoder) span() (int, int) {
	l := d.uvarint()
	if d.err || l > uint64(len(d.b)-d.off) {
		d.err = true
		return 0, 0
	}
	start := d.off
	d.off += int(l)
	return start, d.off
}

func (d *decoder) string() string {
	start, end := d.span()
	return d.s[start:end]
}

func (d *decoder) bytes() []byte {
	start, end := d.span()
	return d.b[start:end:end]
}
