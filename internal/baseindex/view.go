package baseindex

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"hash/crc32"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sort"
	"strings"
	"sync"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"
)

// A view file holds the merged index of one chain of layers (docs/
// design.md, "Indexing a base"), laid out to be looked up where it lies
// rather than decoded, so that a warm build reads one file and touches
// only the paths it asks for:
//
//	magic    16 bytes  "mcbake baseview\n"
//	version   4 bytes  little endian, viewVersion
//	length    8 bytes  little endian, payload length
//	checksum  4 bytes  little endian, CRC-32C of the payload
//	payload:
//	  key      32 bytes  the chain's key (viewKey)
//	  nodes     4 bytes  the record count
//	  listed    4 bytes  Index.Len
//	  flags     4 bytes  viewDeferred if some digest is deferred
//	  records  nodes × recordSize bytes, every node of the index
//	           (implied directories and the root included), sorted by
//	           parent path, then name
//	  strings  the rest: parent paths, names, targets and kept contents,
//	           which records refer to by offset and length
//
// A record, little endian: parent, name, target, linked target and
// content refs (offset and length, 4 bytes each), size (8), mode, uid,
// gid (4 each), type, linked type, flags (recordImplied, recordContent,
// recordDeferred) and a pad byte, digest (32). The root has an empty
// parent and name. The checksum catches a damaged or truncated file; the
// cache is trusted like the rest of the user's cache directory, but every
// reference is bounds-checked when the file is read. Bump viewVersion
// whenever the encoding or what an Index holds changes.
const (
	viewMagic   = "mcbake baseview\n"
	viewVersion = 1
	viewHeader  = len(viewMagic) + 4 + 8 + 4
	viewFixed   = sha256.Size + 4 + 4 + 4
	recordSize  = 96

	viewDeferred = 1

	recordImplied  = 1
	recordContent  = 2
	recordDeferred = 4
)

// viewKey names the chain of layers: their blob digests in order, and the
// digest of each one's TOC when it names one (a layer read from its TOC
// is vouched for by it).
func viewKey(layers []Layer) [sha256.Size]byte {
	h := sha256.New()
	io.WriteString(h, viewMagic)
	for _, l := range layers {
		_, toc, _ := layerTOC(l)
		io.WriteString(h, l.Digest.String()+" "+toc.String()+"\n")
	}
	var key [sha256.Size]byte
	h.Sum(key[:0])
	return key
}

// viewFile is where the view of a chain is cached.
func viewFile(dir string, key [sha256.Size]byte) string {
	return filepath.Join(dir, "views", "sha256", hex.EncodeToString(key[:]))
}

// view is an Index read from a view file.
type view struct {
	recs, strs []byte
	count      int
	// nodes are the records made Nodes so far, so that a path's node is
	// always the same pointer.
	mu    sync.Mutex
	nodes map[int]*Node
}

// readView returns the index cached at file for the chain key, or false
// if there is none usable: any problem makes the caller build it. The
// file is mapped, not read: the checksum reads it whole, but nothing is
// copied or decoded except the nodes looked up.
func readView(file string, key [sha256.Size]byte, layers []Layer) (*Index, bool) {
	b, unmap, ok := mapFile(file)
	if !ok {
		return nil, false
	}
	v, listed, ok := openView(b, key, layers)
	if !ok {
		unmap()
		return nil, false
	}
	// Nothing outside the view points into the mapping: nodes and
	// contents are copies.
	runtime.AddCleanup(v, func(unmap func()) { unmap() }, unmap)
	return &Index{view: v, listed: listed, files: unpackedFiles(layers)}, true
}

// mapFile maps a file read-only.
func mapFile(file string) (b []byte, unmap func(), ok bool) {
	f, err := os.Open(file)
	if err != nil {
		return nil, nil, false
	}
	defer f.Close() // the mapping outlives the descriptor
	fi, err := f.Stat()
	if err != nil || fi.Size() < int64(viewHeader+viewFixed) || fi.Size() > math.MaxInt32*recordSize {
		return nil, nil, false
	}
	b, err = unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		return nil, nil, false
	}
	return b, func() { _ = unix.Munmap(b) }, true
}

// openView checks a mapped view file and returns its view and Len.
func openView(b []byte, key [sha256.Size]byte, layers []Layer) (*view, int, bool) {
	if string(b[:len(viewMagic)]) != viewMagic {
		return nil, 0, false
	}
	h, p := b[len(viewMagic):viewHeader], b[viewHeader:]
	if binary.LittleEndian.Uint32(h) != viewVersion || binary.LittleEndian.Uint64(h[4:]) != uint64(len(p)) ||
		binary.LittleEndian.Uint32(h[12:]) != crc32.Checksum(p, crcTable) || !bytes.Equal(p[:sha256.Size], key[:]) {
		return nil, 0, false
	}
	fixed := p[sha256.Size:viewFixed]
	count, listed, flags := binary.LittleEndian.Uint32(fixed), binary.LittleEndian.Uint32(fixed[4:]), binary.LittleEndian.Uint32(fixed[8:])
	body := p[viewFixed:]
	if uint64(count)*recordSize > uint64(len(body)) {
		return nil, 0, false
	}
	if flags&viewDeferred != 0 && slices.ContainsFunc(layers, func(l Layer) bool { return l.Unpacked == nil }) {
		return nil, 0, false
	}
	v := &view{recs: body[:int(count)*recordSize], strs: body[int(count)*recordSize:], count: int(count), nodes: map[int]*Node{}}
	return v, int(listed), true
}

func (v *view) rec(i int) []byte { return v.recs[i*recordSize : (i+1)*recordSize] }

// ref returns the string a record refers to at k; a reference outside
// the strings (which the checksum rules out) reads as "".
func (v *view) ref(r []byte, k int) []byte {
	off, n := uint64(binary.LittleEndian.Uint32(r[k:])), uint64(binary.LittleEndian.Uint32(r[k+4:]))
	if off+n > uint64(len(v.strs)) {
		return nil
	}
	return v.strs[off : off+n]
}

// compare orders record i against the key (parent, name).
func (v *view) compare(i int, parent, name []byte) int {
	r := v.rec(i)
	if c := bytes.Compare(v.ref(r, 0), parent); c != 0 {
		return c
	}
	return bytes.Compare(v.ref(r, 8), name)
}

// search returns the first record not before (parent, name), and whether
// it is that one.
func (v *view) search(parent, name string) (int, bool) {
	pb, nb := []byte(parent), []byte(name)
	i := sort.Search(v.count, func(i int) bool { return v.compare(i, pb, nb) >= 0 })
	return i, i < v.count && v.compare(i, pb, nb) == 0
}

// find returns the record of the clean relative path p.
func (v *view) find(p string) (int, bool) {
	return v.search(parentDir(p), baseName(p))
}

// lookup returns the node at the clean relative path p.
func (v *view) lookup(p string) (*Node, bool) {
	defer runtime.KeepAlive(v)
	i, ok := v.find(p)
	if !ok {
		return nil, false
	}
	return v.node(i), true
}

// node returns record i as a Node, the same pointer every time. A
// record's type that is none (which the checksum rules out) reads as a
// FIFO, which nothing follows or reads.
func (v *view) node(i int) *Node {
	v.mu.Lock()
	defer v.mu.Unlock()
	if n, ok := v.nodes[i]; ok {
		return n
	}
	r := v.rec(i)
	n := &Node{
		Target:       string(v.ref(r, 16)),
		LinkedTarget: string(v.ref(r, 24)),
		Size:         int64(binary.LittleEndian.Uint64(r[40:])),
		Mode:         binary.LittleEndian.Uint32(r[48:]),
		UID:          binary.LittleEndian.Uint32(r[52:]),
		GID:          binary.LittleEndian.Uint32(r[56:]),
		Type:         Type(r[60]),
		LinkedType:   Type(r[61]),
		Implied:      r[62]&recordImplied != 0,
		first:        noSlot,
		next:         noSlot,
	}
	if n.Type < File || n.Type > FIFO {
		n.Type = FIFO
	}
	copy(n.Digest[:], r[64:])
	n.Path = joinPath(string(v.ref(r, 0)), string(v.ref(r, 8)))
	if r[62]&recordContent != 0 {
		n.flags |= nodeContent
	}
	if r[62]&recordDeferred != 0 {
		n.flags |= nodeDeferred
	}
	v.nodes[i] = n
	return n
}

// content returns a copy of the kept content of the clean relative path
// p.
func (v *view) content(p string) ([]byte, bool) {
	defer runtime.KeepAlive(v)
	i, ok := v.find(p)
	if !ok {
		return nil, false
	}
	r := v.rec(i)
	if r[62]&recordContent == 0 {
		return nil, false
	}
	return bytes.Clone(v.ref(r, 32)), true
}

// readDir returns the children of the directory at the clean relative
// path dir, sorted by name.
func (v *view) readDir(dir string) []*Node {
	defer runtime.KeepAlive(v)
	if d, ok := v.lookup(dir); !ok || d.Type != Dir {
		return nil
	}
	db := []byte(dir)
	var out []*Node
	for i, _ := v.search(dir, ""); i < v.count && bytes.Equal(v.ref(v.rec(i), 0), db); i++ {
		if len(v.ref(v.rec(i), 8)) == 0 {
			continue // the root, whose parent is "" too
		}
		out = append(out, v.node(i))
	}
	return out
}

// writeView caches ix, the merged index of the chain key, at file
// atomically. An index whose strings would not fit the format's 32-bit
// offsets is not cached.
func writeView(file string, key [sha256.Size]byte, ix *Index) error {
	nodes := ix.liveNodes()
	w := viewWriter{interned: map[string]uint32{}}
	type keyed struct {
		parent, name string
		n            *Node
	}
	sorted := make([]keyed, len(nodes))
	for i, n := range nodes {
		parent, name := parentDir(n.Path), baseName(n.Path)
		if n.Path == "" {
			parent, name = "", ""
		}
		sorted[i] = keyed{parent, name, n}
	}
	slices.SortFunc(sorted, func(a, b keyed) int {
		if c := strings.Compare(a.parent, b.parent); c != 0 {
			return c
		}
		return strings.Compare(a.name, b.name)
	})
	recs := make([]byte, len(sorted)*recordSize)
	deferred := false
	for i, k := range sorted {
		deferred = deferred || k.n.Deferred()
		var content []byte
		if k.n.hasContent() {
			content = ix.content[k.n.Path]
		}
		w.record(recs[i*recordSize:(i+1)*recordSize], k.parent, k.name, k.n, content)
	}
	if w.overflow || len(sorted) > math.MaxUint32 {
		return nil
	}
	payload := make([]byte, 0, viewFixed+len(recs)+w.strs.Len())
	payload = append(payload, key[:]...)
	payload = binary.LittleEndian.AppendUint32(payload, uint32(len(sorted)))
	payload = binary.LittleEndian.AppendUint32(payload, uint32(ix.listed))
	var flags uint32
	if deferred {
		flags |= viewDeferred
	}
	payload = binary.LittleEndian.AppendUint32(payload, flags)
	payload = append(append(payload, recs...), w.strs.Bytes()...)
	return writeFileAtomically(file, viewHeaderOf(payload), payload)
}

func viewHeaderOf(payload []byte) []byte {
	h := make([]byte, viewHeader)
	v := h[copy(h, viewMagic):]
	binary.LittleEndian.PutUint32(v, viewVersion)
	binary.LittleEndian.PutUint64(v[4:], uint64(len(payload)))
	binary.LittleEndian.PutUint32(v[12:], crc32.Checksum(payload, crcTable))
	return h
}

// writeFileAtomically writes header and payload to file through a
// temporary file in its directory, renamed into place.
func writeFileAtomically(file string, header, payload []byte) error {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	f, err := renameio.NewPendingFile(file, renameio.WithPermissions(0o644), renameio.WithExistingPermissions(), renameio.WithTempDir(dir))
	if err != nil {
		return err
	}
	defer f.Cleanup()
	if _, err := f.Write(header); err != nil {
		return err
	}
	if _, err := f.Write(payload); err != nil {
		return err
	}
	return f.CloseAtomicallyReplace()
}

// viewWriter lays out a view's strings, each parent path and target once.
type viewWriter struct {
	strs     bytes.Buffer
	interned map[string]uint32
	overflow bool
}

// ref appends s (once, if interned) and writes its reference at r.
func (w *viewWriter) ref(r []byte, s []byte, intern bool) {
	off, ok := uint32(0), false
	if intern {
		off, ok = w.interned[string(s)]
	}
	if !ok {
		if uint64(w.strs.Len())+uint64(len(s)) > math.MaxUint32 {
			w.overflow = true
			return
		}
		off = uint32(w.strs.Len())
		w.strs.Write(s)
		if intern {
			w.interned[string(s)] = off
		}
	}
	binary.LittleEndian.PutUint32(r, off)
	binary.LittleEndian.PutUint32(r[4:], uint32(len(s)))
}

// record encodes node n at r.
func (w *viewWriter) record(r []byte, parent, name string, n *Node, content []byte) {
	w.ref(r[0:], []byte(parent), true)
	w.ref(r[8:], []byte(name), false)
	w.ref(r[16:], []byte(n.Target), true)
	w.ref(r[24:], []byte(n.LinkedTarget), true)
	w.ref(r[32:], content, false)
	binary.LittleEndian.PutUint64(r[40:], uint64(n.Size))
	binary.LittleEndian.PutUint32(r[48:], n.Mode)
	binary.LittleEndian.PutUint32(r[52:], n.UID)
	binary.LittleEndian.PutUint32(r[56:], n.GID)
	r[60], r[61] = byte(n.Type), byte(n.LinkedType)
	if n.Implied {
		r[62] |= recordImplied
	}
	if n.hasContent() {
		r[62] |= recordContent
	}
	if n.Deferred() {
		r[62] |= recordDeferred
	}
	copy(r[64:], n.Digest[:])
}

// liveNodes returns the nodes of an index built in memory.
func (ix *Index) liveNodes() []*Node {
	var out []*Node
	for _, c := range ix.chunks {
		for i := range c {
			if c[i].Type != 0 {
				out = append(out, &c[i])
			}
		}
	}
	return out
}
