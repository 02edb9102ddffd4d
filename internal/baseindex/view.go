package baseindex

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
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
	"unsafe"

	"github.com/mcbake/mcbake/internal/atomicdir"
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
//	checksum  4 bytes  little endian, CRC-32C of the payload's head (key
//	                   to sums)
//	payload:
//	  key      32 bytes  the chain's key (viewKey)
//	  nodes     4 bytes  the record count
//	  listed    4 bytes  Index.Len
//	  flags     4 bytes  viewDeferred if some digest is deferred
//	  blocks    4 bytes  the body's count of viewBlock-byte blocks (the
//	                     last one may be shorter)
//	  sums     blocks × 4 bytes, the CRC-32C of each block of the body
//	  body:
//	    records  nodes × recordSize bytes, every node of the index
//	             (implied directories and the root included), sorted by
//	             parent path, then name
//	    strings  the rest: parent paths, names, targets and kept
//	             contents, which records refer to by offset and length
//
// A record, little endian: parent, name, target, linked target and
// content refs (offset and length, 4 bytes each), size (8), mode, uid,
// gid (4 each), type, linked type, flags (recordImplied, recordContent,
// recordDeferred, recordTargetDigest), the node's layer (Node.layer),
// digest (32). The root has an empty parent and name. A hard link whose
// digest is its target's record's, as in an ostree-ext base where every
// file of /usr is a hard link to an object, leaves its own zero
// (recordTargetDigest): digests are what does not compress, and this
// took 8% off the published index of such a base (5.75 to 5.27 MB for
// the 48-layer one of docs/benchmarks.md, before the published index was
// packed: pack.go, which leaves out zero digests too). The checksums catch a damaged
// or truncated file: all of them are checked when the file is opened
// (paged in in one go: 0.65 ms for a 50k-entry base's view, 1.8 ms for
// 100k entries, in BenchmarkBuildWarm), and a damaged one has the index
// built again in its place before Build returns, so that nothing read
// from the index later can fail. The cache is trusted like the rest of
// the user's cache directory, but every reference is bounds-checked when
// the file is read. Bump viewVersion whenever the encoding or what an
// Index holds changes.
const (
	viewMagic   = "mcbake baseview\n"
	viewVersion = 5
	viewHeader  = len(viewMagic) + 4 + 8 + 4
	viewFixed   = sha256.Size + 4 + 4 + 4 + 4
	viewBlock   = 4096
	recordSize  = 96

	viewDeferred = 1

	recordImplied  = 1
	recordContent  = 2
	recordDeferred = 4
	// recordTargetDigest: the digest is the one of the record at Target.
	recordTargetDigest = 8
)

// viewKey names the chain of layers: their blob digests in order, and the
// digest of each one's TOC when it names one (a layer read from its TOC
// is vouched for by it).
func viewKey(layers []Layer) [sha256.Size]byte {
	h := sha256.New()
	io.WriteString(h, viewMagic)
	for _, l := range layers {
		_, toc, _ := layerTOC(l)
		io.WriteString(h, l.Digest.String()+" "+toc.String()+" "+l.DiffID.String()+"\n")
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
	// body is the records and then the strings; sums are the blocks'
	// checksums.
	body, sums []byte
	recsLen    int
	count      int
	// nodes are the records made Nodes so far, so that a path's node is
	// always the same pointer; found are the records of the paths found
	// so far, -1 for a path not there (see find).
	mu    sync.Mutex
	nodes map[int]*Node
	found map[string]int32
}

// viewDamage is a view file's block that does not match its checksum.
type viewDamage struct {
	file  string
	block int
}

func (d *viewDamage) Error() string {
	return fmt.Sprintf("cached base index %s: block %d does not match its checksum", d.file, d.block)
}

// damaged returns the first block that does not match its checksum, or
// -1.
func (v *view) damaged() int {
	for b := 0; b*viewBlock < len(v.body); b++ {
		if crc32.Checksum(v.body[b*viewBlock:min((b+1)*viewBlock, len(v.body))], crcTable) != binary.LittleEndian.Uint32(v.sums[4*b:]) {
			return b
		}
	}
	return -1
}

// readView returns the index cached at file for the chain key, or false
// if there is none usable: any problem makes the caller build it, and a
// block that does not match its checksum is returned as a *viewDamage
// too. The file is mapped, not read: nothing is copied or decoded but
// the nodes looked up.
func readView(file string, key [sha256.Size]byte, layers []Layer) (*Index, bool, error) {
	b, unmap, ok := mapFile(file)
	if !ok {
		return nil, false, nil
	}
	v, listed, ok := openView(b, key, layers)
	if !ok {
		unmap()
		return nil, false, nil
	}
	if blk := v.damaged(); blk >= 0 {
		unmap()
		return nil, false, &viewDamage{file: file, block: blk}
	}
	// Nothing outside the view points into the mapping: nodes and
	// contents are copies.
	runtime.AddCleanup(v, func(unmap func()) { unmap() }, unmap)
	return &Index{view: v, listed: listed, files: unpackedFiles(layers)}, true, nil
}

// mapFile maps a file read-only, paged in at once (MAP_POPULATE: the
// checksums read all of it, and faulting its pages in one by one costs
// several times as much).
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
	b, err = unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED|unix.MAP_POPULATE)
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
	if binary.LittleEndian.Uint32(h) != viewVersion || binary.LittleEndian.Uint64(h[4:]) != uint64(len(p)) {
		return nil, 0, false
	}
	fixed := p[sha256.Size:viewFixed]
	count, listed, flags := binary.LittleEndian.Uint32(fixed), binary.LittleEndian.Uint32(fixed[4:]), binary.LittleEndian.Uint32(fixed[8:])
	blocks := uint64(binary.LittleEndian.Uint32(fixed[12:]))
	head := uint64(viewFixed) + 4*blocks
	if head > uint64(len(p)) {
		return nil, 0, false
	}
	body := p[head:]
	if blocks != blocksOf(uint64(len(body))) || binary.LittleEndian.Uint32(h[12:]) != crc32.Checksum(p[:head], crcTable) ||
		!bytes.Equal(p[:sha256.Size], key[:]) || uint64(count)*recordSize > uint64(len(body)) {
		return nil, 0, false
	}
	if flags&viewDeferred != 0 && slices.ContainsFunc(layers, func(l Layer) bool { return l.Unpacked == nil }) {
		return nil, 0, false
	}
	v := &view{body: body, sums: p[viewFixed:head],
		recsLen: int(count) * recordSize, count: int(count), nodes: map[int]*Node{}, found: map[string]int32{}}
	return v, int(listed), true
}

// blocksOf returns the count of blocks of a body of n bytes.
func blocksOf(n uint64) uint64 { return (n + viewBlock - 1) / viewBlock }

func (v *view) rec(i int) []byte {
	return v.body[i*recordSize : (i+1)*recordSize]
}

// ref returns the string a record refers to at k; a reference outside
// the strings (which the checksums rule out) reads as "".
func (v *view) ref(r []byte, k int) []byte {
	off, n := uint64(binary.LittleEndian.Uint32(r[k:])), uint64(binary.LittleEndian.Uint32(r[k+4:]))
	if off+n > uint64(len(v.body)-v.recsLen) {
		return nil
	}
	return v.body[v.recsLen+int(off) : v.recsLen+int(off+n)]
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

// find returns the record of the clean relative path p. The answers
// are remembered: a warm build asks for about 300 paths ten times each
// (every lookup resolves each parent of its path again, and systemd's
// unit search asks for the same directories for every unit), and each
// search probes about 17 records and their strings.
func (v *view) find(p string) (int, bool) {
	v.mu.Lock()
	i, ok := v.found[p]
	v.mu.Unlock()
	if ok {
		return int(i), i >= 0
	}
	j, hit := v.search(parentDir(p), baseName(p))
	i = -1
	if hit {
		i = int32(j)
	}
	v.mu.Lock()
	v.found[p] = i
	v.mu.Unlock()
	return j, hit
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
// record's type that is none (which the checksums rule out) reads as a
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
		layer:        r[63],
		first:        noSlot,
		next:         noSlot,
	}
	if n.Type < File || n.Type > FIFO {
		n.Type = FIFO
	}
	copy(n.Digest[:], r[64:])
	if r[62]&recordTargetDigest != 0 {
		// A target missing (which the writer rules out) reads as zero.
		if j, ok := v.search(parentDir(n.Target), baseName(n.Target)); ok {
			copy(n.Digest[:], v.rec(j)[64:])
		}
	}
	n.Path = joinPath(string(v.ref(r, 0)), string(v.ref(r, 8)))
	if r[62]&recordImplied != 0 {
		n.flags |= nodeImplied
	}
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
// atomically. It streams the file in two passes over the nodes, the
// records and then their strings, whose offsets the first pass counts,
// so that it holds no copy of the view. An index whose strings would not
// fit the format's 32-bit offsets is not cached.
func writeView(file string, key [sha256.Size]byte, ix *Index) error {
	groups := ix.dirGroups()
	count, deferred, strsLen := 0, false, uint64(0)
	for _, g := range groups {
		count += len(g.nodes)
		strsLen += uint64(len(g.dir))
		for _, n := range g.nodes {
			deferred = deferred || n.Deferred()
			strsLen += uint64(len(baseName(n.Path)) + len(n.Target) + len(n.LinkedTarget) + len(ix.kept(n)))
		}
	}
	if strsLen > math.MaxUint32 || count > math.MaxUint32 {
		return nil
	}
	fixed := make([]byte, 0, viewFixed)
	fixed = append(fixed, key[:]...)
	fixed = binary.LittleEndian.AppendUint32(fixed, uint32(count))
	fixed = binary.LittleEndian.AppendUint32(fixed, uint32(ix.listed))
	var flags uint32
	if deferred {
		flags |= viewDeferred
	}
	fixed = binary.LittleEndian.AppendUint32(fixed, flags)
	bodyLen := uint64(count)*recordSize + strsLen
	blocks := blocksOf(bodyLen)
	if blocks > math.MaxUint32 {
		return nil
	}
	fixed = binary.LittleEndian.AppendUint32(fixed, uint32(blocks))
	length := uint64(len(fixed)) + 4*blocks + bodyLen
	bw := blockWriter{sums: make([]byte, 0, 4*blocks)}
	return writeFileAtomically(file, func(w *bufio.Writer) error {
		// The head, checksums included, is written over this at the end.
		if _, err := w.Write(make([]byte, uint64(viewHeader)+uint64(len(fixed))+4*blocks)); err != nil {
			return err
		}
		bw.w = w
		writeRecords(&bw, groups, ix)
		writeStrings(&bw, groups, ix)
		bw.finish()
		if bw.total != bodyLen {
			return fmt.Errorf("wrote a view body of %d bytes, %d counted", bw.total, bodyLen)
		}
		return nil
	}, func() []byte {
		crc := crc32.Update(crc32.Checksum(fixed, crcTable), crcTable, bw.sums)
		return slices.Concat(viewHeaderOf(length, crc), fixed, bw.sums)
	})
}

// kept returns n's kept content.
func (ix *Index) kept(n *Node) []byte {
	if !n.hasContent() {
		return nil
	}
	return ix.content[n.Path]
}

// writeRecords writes every node's record, the strings' offsets counted
// in the order writeStrings writes them.
func writeRecords(w io.Writer, groups []dirGroup, ix *Index) {
	var off uint32
	ref := func(r []byte, k int, n int) {
		binary.LittleEndian.PutUint32(r[k:], off)
		binary.LittleEndian.PutUint32(r[k+4:], uint32(n))
		off += uint32(n)
	}
	var r [recordSize]byte
	for _, g := range groups {
		parent := off
		off += uint32(len(g.dir))
		for _, n := range g.nodes {
			r = [recordSize]byte{}
			binary.LittleEndian.PutUint32(r[0:], parent)
			binary.LittleEndian.PutUint32(r[4:], uint32(len(g.dir)))
			ref(r[:], 8, len(baseName(n.Path)))
			ref(r[:], 16, len(n.Target))
			ref(r[:], 24, len(n.LinkedTarget))
			ref(r[:], 32, len(ix.kept(n)))
			encodeRecord(r[:], n)
			if ix.sameDigestAsTarget(n) {
				r[62] |= recordTargetDigest
				clear(r[64:])
			}
			w.Write(r[:])
		}
	}
}

// sameDigestAsTarget reports whether n is a hard link whose digest is
// the one of the regular file at its target (not always: a later layer
// may have replaced the target, and the link keeps the inode it had).
func (ix *Index) sameDigestAsTarget(n *Node) bool {
	if n.Type != Hardlink || n.Deferred() || n.Digest == (Digest{}) {
		return false
	}
	t, ok := ix.find(n.Target)
	return ok && t.Type == File && !t.Deferred() && t.Digest == n.Digest
}

// writeStrings writes the strings writeRecords referred to.
func writeStrings(w *blockWriter, groups []dirGroup, ix *Index) {
	for _, g := range groups {
		w.WriteString(g.dir)
		for _, n := range g.nodes {
			w.WriteString(baseName(n.Path))
			w.WriteString(n.Target)
			w.WriteString(n.LinkedTarget)
			w.Write(ix.kept(n))
		}
	}
}

// encodeRecord writes n's fields but its strings into its record r.
func encodeRecord(r []byte, n *Node) {
	binary.LittleEndian.PutUint64(r[40:], uint64(n.Size))
	binary.LittleEndian.PutUint32(r[48:], n.Mode)
	binary.LittleEndian.PutUint32(r[52:], n.UID)
	binary.LittleEndian.PutUint32(r[56:], n.GID)
	r[60], r[61] = byte(n.Type), byte(n.LinkedType)
	if n.Implied() {
		r[62] |= recordImplied
	}
	if n.hasContent() {
		r[62] |= recordContent
	}
	if n.Deferred() {
		r[62] |= recordDeferred
	}
	r[63] = n.layer
	copy(r[64:], n.Digest[:])
}

// blockWriter writes a view's body to a file's buffered writer, which
// reports any error at its Flush, and appends each block's checksum to
// sums.
type blockWriter struct {
	w     *bufio.Writer
	sums  []byte
	crc   uint32
	n     int    // bytes of the block being written
	total uint64 // bytes written
}

func (b *blockWriter) Write(p []byte) (int, error) {
	written := len(p)
	b.w.Write(p)
	b.total += uint64(written)
	for len(p) > 0 {
		k := min(len(p), viewBlock-b.n)
		b.crc = crc32.Update(b.crc, crcTable, p[:k])
		b.n += k
		p = p[k:]
		if b.n == viewBlock {
			b.finish()
		}
	}
	return written, nil
}

func (b *blockWriter) WriteString(s string) (int, error) {
	return b.Write(unsafe.Slice(unsafe.StringData(s), len(s))) // only read
}

// finish ends the block being written, if any.
func (b *blockWriter) finish() {
	if b.n > 0 {
		b.sums = binary.LittleEndian.AppendUint32(b.sums, b.crc)
		b.crc, b.n = 0, 0
	}
}

// dirGroup is a directory's path and its children sorted by name; the
// root's group has the root first.
type dirGroup struct {
	dir   string
	nodes []*Node
}

// dirGroups returns the nodes of an index built in memory in the view's
// order: grouped by parent directory, the groups sorted by its path,
// each sorted by name. Every node is in its directory's list of children.
func (ix *Index) dirGroups() []dirGroup {
	var dirs []*Node
	for _, c := range ix.chunks {
		for i := range c {
			if c[i].Type == Dir {
				dirs = append(dirs, &c[i])
			}
		}
	}
	slices.SortFunc(dirs, func(a, b *Node) int { return strings.Compare(a.Path, b.Path) })
	groups := make([]dirGroup, 0, len(dirs))
	type named struct {
		name string
		n    *Node
	}
	var children []named
	for _, d := range dirs {
		children = children[:0]
		for i := d.first; i != noSlot; i = ix.node(i).next {
			if n := ix.node(i); n.Type != 0 {
				children = append(children, named{baseName(n.Path), n})
			}
		}
		slices.SortFunc(children, func(a, b named) int { return strings.Compare(a.name, b.name) })
		g := dirGroup{dir: d.Path, nodes: make([]*Node, 0, len(children)+1)}
		if d.Path == "" {
			g.nodes = append(g.nodes, d)
		}
		for _, c := range children {
			g.nodes = append(g.nodes, c.n)
		}
		groups = append(groups, g)
	}
	return groups
}

// viewHeaderOf returns a view file's header for a payload of length
// bytes whose checksum is crc.
func viewHeaderOf(length uint64, crc uint32) []byte {
	h := make([]byte, viewHeader)
	v := h[copy(h, viewMagic):]
	binary.LittleEndian.PutUint32(v, viewVersion)
	binary.LittleEndian.PutUint64(v[4:], length)
	binary.LittleEndian.PutUint32(v[12:], crc)
	return h
}

// cacheTempPrefix names the files a cache write fills before it renames
// them into place.
const cacheTempPrefix = ".mcbake-cache-"

// writeFileAtomically writes file through a temporary file in its
// directory, renamed into place: a reader sees the old file or the new
// one. write writes the content; header, when not nil, is then written
// over its start (a header with a checksum of what follows). It does not
// fsync: a cache file a crash leaves torn fails its checksum and is
// rebuilt, and syncing fifty of them would cost a cold build tens of
// milliseconds.
func writeFileAtomically(file string, write func(w *bufio.Writer) error, header func() []byte) error {
	return atomicdir.WriteCacheFile(file, cacheTempPrefix, func(f *os.File) error {
		bw := bufio.NewWriterSize(f, 256<<10)
		if err := write(bw); err != nil {
			return err
		}
		if err := bw.Flush(); err != nil {
			return err
		}
		if header != nil {
			_, err := f.WriteAt(header(), 0)
			return err
		}
		return nil
	})
}
