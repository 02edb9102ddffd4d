package baseindex

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
)

// A view travels to other machines packed (PackView, UnpackView; docs/
// ci.md, "The published base index"): the same bytes, laid out for a
// compressor rather than for lookups. A view's records interleave
// string offsets that grow by the lengths before them, digests, sizes
// and modes, and a hard link's target repeats the path of the file it
// links to, so a compressor finds little to share: the 48-layer
// ostree-shaped base of docs/benchmarks.md, where every file is an
// object and a hard link to it, publishes 5.27 MB of zstd for an 18.6 MB
// view. Packed, the fields go in columns, an offset is not stored at all
// (a view's strings lie in the order its records name them, so the
// lengths give the offsets back), and a target that is the path of
// another record is that record's number: 3.7 MB, for 13 ms more than
// decompressing the view took (BenchmarkUnpackView). Unpacking rebuilds the
// view byte for byte, whose block checksums, shipped in its head, then
// check the result as they check a cached view.
//
//	magic     16 bytes  "mcbake viewpack\n"
//	version    4 bytes  little endian, packVersion
//	head       4 bytes  little endian, its length, and the view's head:
//	                    header, fixed fields and block checksums
//	sections   packSections of them, each a uvarint length and its bytes
//
// The sections, uvarints but for the strings, planes and digests:
// records per directory group; each group's directory length; those
// directories; each record's name length; the names; each record's
// target (0 none, 1 a literal, 2+i the path of record i); the literal
// targets' lengths; the literals; the linked targets' lengths; the linked
// targets; the kept contents' lengths; the contents; sizes; mode, uid and
// gid; five planes of one byte per record (type, linked type, flags,
// layer, 1 when the digest is not zero); the digests that are not zero.
const (
	packMagic   = "mcbake viewpack\n"
	packVersion = 1
)

const (
	secGroups = iota
	secDirLens
	secDirs
	secNameLens
	secNames
	secTargets
	secTargetLens
	secTargetStrs
	secLinkedLens
	secLinked
	secKeptLens
	secKept
	secSizes
	secOwners
	secPlanes
	secDigests
	packSections
)

const packPlanes = 5

// errNotCanonical is PackView's error for a view whose strings are not
// laid out as writeView lays them out.
var errNotCanonical = errors.New("the view's strings are not in its records' order")

// viewLayout is the parts of a view file that PackView and UnpackView
// work on.
type viewLayout struct {
	head          int // bytes before the body: header, fixed fields, sums
	count         int
	recs, strsLen int
}

// layoutOf checks a view's header and returns its layout; n is the
// file's length.
func layoutOf(h []byte, n uint64) (viewLayout, error) {
	if len(h) < viewHeader+viewFixed || string(h[:len(viewMagic)]) != viewMagic {
		return viewLayout{}, errors.New("not an index view")
	}
	if v := binary.LittleEndian.Uint32(h[len(viewMagic):]); v != viewVersion {
		return viewLayout{}, fmt.Errorf("an index view of format version %d, not %d", v, viewVersion)
	}
	if binary.LittleEndian.Uint64(h[len(viewMagic)+4:]) != n-uint64(viewHeader) {
		return viewLayout{}, errors.New("the view's length does not match its header")
	}
	fixed := h[viewHeader+32 : viewHeader+viewFixed]
	count, blocks := uint64(binary.LittleEndian.Uint32(fixed)), uint64(binary.LittleEndian.Uint32(fixed[12:]))
	head := uint64(viewHeader+viewFixed) + 4*blocks
	if head > n || count*recordSize > n-head || blocks != blocksOf(n-head) {
		return viewLayout{}, errors.New("the view's head does not match its length")
	}
	return viewLayout{head: int(head), count: int(count), recs: int(count * recordSize), strsLen: int(n - head - count*recordSize)}, nil
}

// PackView packs a view (what PublishableView returns) for another machine;
// UnpackView gives it back. It checks that the packed form unpacks to
// the same bytes.
func PackView(b []byte) ([]byte, error) {
	l, err := layoutOf(b, uint64(len(b)))
	if err != nil {
		return nil, err
	}
	body := b[l.head:]
	recs, strs := body[:l.recs], body[l.recs:]
	rec := func(i int) []byte { return recs[i*recordSize : (i+1)*recordSize] }
	var sec [packSections][]byte
	uv := func(s int, v uint64) { sec[s] = binary.AppendUvarint(sec[s], v) }
	planes := make([]byte, packPlanes*l.count)

	// Every record's strings, in bounds, and its path, for the targets
	// that name one.
	ref := func(r []byte, k int) ([]byte, error) {
		off, n := uint64(binary.LittleEndian.Uint32(r[k:])), uint64(binary.LittleEndian.Uint32(r[k+4:]))
		if off+n > uint64(len(strs)) {
			return nil, errNotCanonical
		}
		return strs[off : off+n], nil
	}
	paths := make(map[string]int, l.count)
	var dirs []string
	for i := range l.count {
		r := rec(i)
		var str [5][]byte
		for k := range str {
			var err error
			if str[k], err = ref(r, 8*k); err != nil {
				return nil, err
			}
		}
		p := string(appendPath(nil, str[0], str[1]))
		paths[p] = i
		if Type(r[60]) == Dir {
			dirs = append(dirs, p)
		}
	}
	// writeView writes a group per directory, in the order of their paths
	// (some without records): its path, then each record's strings. The
	// groups and every offset are checked to be there.
	slices.Sort(dirs)
	cur, i := uint64(0), 0
	take := func(r []byte, k int) error {
		if uint64(binary.LittleEndian.Uint32(r[k:])) != cur {
			return errNotCanonical
		}
		cur += uint64(binary.LittleEndian.Uint32(r[k+4:]))
		return nil
	}
	for _, d := range dirs {
		if uint64(len(d)) > uint64(len(strs))-cur || string(strs[cur:cur+uint64(len(d))]) != d {
			return nil, errNotCanonical
		}
		at := cur
		cur += uint64(len(d))
		uv(secDirLens, uint64(len(d)))
		sec[secDirs] = append(sec[secDirs], d...)
		g := uint64(0)
		for ; i < l.count; i++ {
			r := rec(i)
			if uint64(binary.LittleEndian.Uint32(r)) != at || binary.LittleEndian.Uint32(r[4:]) != uint32(len(d)) {
				break
			}
			for _, k := range []int{8, 16, 24, 32} {
				if err := take(r, k); err != nil {
					return nil, err
				}
			}
			g++
		}
		uv(secGroups, g)
	}
	if i != l.count || cur != uint64(len(strs)) {
		return nil, errNotCanonical
	}
	for i := range l.count {
		r := rec(i)
		ref := func(k int) []byte {
			return strs[binary.LittleEndian.Uint32(r[k:]):][:binary.LittleEndian.Uint32(r[k+4:])]
		}
		name := ref(8)
		uv(secNameLens, uint64(len(name)))
		sec[secNames] = append(sec[secNames], name...)
		switch t := ref(16); {
		case len(t) == 0:
			uv(secTargets, 0)
		default:
			if j, ok := paths[string(t)]; ok {
				uv(secTargets, 2+uint64(j))
				break
			}
			uv(secTargets, 1)
			uv(secTargetLens, uint64(len(t)))
			sec[secTargetStrs] = append(sec[secTargetStrs], t...)
		}
		lt, kept := ref(24), ref(32)
		uv(secLinkedLens, uint64(len(lt)))
		sec[secLinked] = append(sec[secLinked], lt...)
		uv(secKeptLens, uint64(len(kept)))
		sec[secKept] = append(sec[secKept], kept...)
		uv(secSizes, binary.LittleEndian.Uint64(r[40:]))
		for k := 48; k < 60; k += 4 {
			uv(secOwners, uint64(binary.LittleEndian.Uint32(r[k:])))
		}
		for p := range 4 {
			planes[p*l.count+i] = r[60+p]
		}
		if d := r[64:]; !allZero(d) {
			planes[4*l.count+i] = 1
			sec[secDigests] = append(sec[secDigests], d...)
		}
	}
	sec[secPlanes] = planes

	out := append([]byte(packMagic), 0, 0, 0, 0, 0, 0, 0, 0)
	binary.LittleEndian.PutUint32(out[len(packMagic):], packVersion)
	binary.LittleEndian.PutUint32(out[len(packMagic)+4:], uint32(l.head))
	out = append(out, b[:l.head]...)
	for _, s := range sec {
		out = binary.AppendUvarint(out, uint64(len(s)))
		out = append(out, s...)
	}
	back, err := UnpackView(out, int64(len(b)))
	if err != nil || !bytes.Equal(back, b) {
		return nil, fmt.Errorf("packing the index view: it does not unpack to the same bytes (%v)", err)
	}
	return out, nil
}

// appendPath appends the path of name in dir to p.
func appendPath(p, dir, name []byte) []byte {
	if len(dir) > 0 {
		p = append(append(p, dir...), '/')
	}
	return append(p, name...)
}

func allZero(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// packReader reads a packed view's sections.
type packReader struct {
	sec [packSections][]byte
	err error
}

// uv reads the next uvarint of section s; past its end, or on a
// malformed one, it records an error and returns 0.
func (p *packReader) uv(s int) uint64 {
	v, n := binary.Uvarint(p.sec[s])
	if n <= 0 {
		if p.err == nil {
			p.err = fmt.Errorf("section %d is short or malformed", s)
		}
		return 0
	}
	p.sec[s] = p.sec[s][n:]
	return v
}

// bytes takes the next n bytes of section s.
func (p *packReader) bytes(s int, n uint64) []byte {
	if n > uint64(len(p.sec[s])) {
		if p.err == nil {
			p.err = fmt.Errorf("section %d is short", s)
		}
		return nil
	}
	b := p.sec[s][:n]
	p.sec[s] = p.sec[s][n:]
	return b
}

// UnpackView returns the view a packed one holds, refusing one that would
// be longer than limit bytes. The view it returns is checked as a cached
// one is (ImportView), not here: a packed view that is malformed is an
// error, but one whose bytes were changed unpacks to a view whose
// checksums do not match.
func UnpackView(b []byte, limit int64) ([]byte, error) {
	out, err := unpackView(b, limit)
	if err != nil {
		return nil, fmt.Errorf("unpacking the index view: %w", err)
	}
	return out, nil
}

func unpackView(b []byte, limit int64) ([]byte, error) {
	const fixed = len(packMagic) + 8
	if len(b) < fixed || string(b[:len(packMagic)]) != packMagic {
		return nil, errors.New("not a packed index view")
	}
	if v := binary.LittleEndian.Uint32(b[len(packMagic):]); v != packVersion {
		return nil, fmt.Errorf("a packed view of format version %d, not %d", v, packVersion)
	}
	headLen := uint64(binary.LittleEndian.Uint32(b[len(packMagic)+4:]))
	if headLen < uint64(viewHeader+viewFixed) || headLen > uint64(len(b)-fixed) {
		return nil, errors.New("the view's head is cut short")
	}
	head := b[fixed : fixed+int(headLen)]
	n := binary.LittleEndian.Uint64(head[len(viewMagic)+4:])
	if n > uint64(limit) || int64(n)+int64(viewHeader) > limit {
		return nil, fmt.Errorf("a view of %d bytes, over the limit of %d", n, limit)
	}
	l, err := layoutOf(head, n+uint64(viewHeader))
	if err != nil {
		return nil, err
	}
	if uint64(l.head) != headLen {
		return nil, errors.New("the view's head does not match its checksum count")
	}
	if uint64(l.strsLen) > math.MaxUint32 {
		return nil, errors.New("the view's strings pass its format's 32-bit offsets")
	}
	var p packReader
	rest := b[fixed+int(headLen):]
	for s := range packSections {
		k, m := binary.Uvarint(rest)
		if m <= 0 || k > uint64(len(rest)-m) {
			return nil, fmt.Errorf("section %d is cut short", s)
		}
		p.sec[s], rest = rest[m:m+int(k)], rest[m+int(k):]
	}
	if len(rest) > 0 {
		return nil, errors.New("bytes after the last section")
	}
	if len(p.sec[secPlanes]) != packPlanes*l.count {
		return nil, fmt.Errorf("%d bytes of planes for %d records", len(p.sec[secPlanes]), l.count)
	}
	planes := p.sec[secPlanes]

	// First the directories and names, which the targets may name, and
	// the strings' total length, checked before the view is allocated.
	// A record keeps its group and where its name is in its section (16
	// bytes, no pointers: a hard link's target is looked up at random);
	// its other strings are read again, in order, when the view is
	// written.
	type group struct {
		dir      []byte
		from, to int // its records
	}
	type rec struct{ grp, nameOff, nameLen, target uint32 }
	orig := p.sec
	names := orig[secNames]
	rs := make([]rec, l.count)
	var groups []group
	total, i := uint64(0), 0
	for len(p.sec[secGroups]) > 0 && p.err == nil {
		g := p.uv(secGroups)
		dir := p.bytes(secDirs, p.uv(secDirLens))
		if g > uint64(l.count-i) {
			return nil, fmt.Errorf("a directory group of %d records, with %d left", g, l.count-i)
		}
		if len(groups) >= l.count { // a group is a directory's, and each has a record
			return nil, fmt.Errorf("more directory groups than the view's %d records", l.count)
		}
		total += uint64(len(dir))
		groups = append(groups, group{dir, i, i + int(g)})
		for range g {
			off := len(names) - len(p.sec[secNames])
			name := p.bytes(secNames, p.uv(secNameLens))
			rs[i] = rec{grp: uint32(len(groups) - 1), nameOff: uint32(off), nameLen: uint32(len(name))}
			total += uint64(len(name))
			i++
		}
	}
	if i != l.count {
		return nil, fmt.Errorf("directory groups of %d records, of %d", i, l.count)
	}
	if uint64(len(names)) > math.MaxUint32 {
		return nil, errors.New("the view's names pass its format's 32-bit offsets")
	}
	for i := range rs {
		if p.err != nil {
			break
		}
		switch t := p.uv(secTargets); {
		case t == 1:
			total += uint64(len(p.bytes(secTargetStrs, p.uv(secTargetLens))))
		case t >= 2:
			if t-2 >= uint64(l.count) {
				return nil, fmt.Errorf("record %d's target is record %d, of %d", i, t-2, l.count)
			}
			rs[i].target = uint32(t - 1)
			j := &rs[t-2]
			total += uint64(len(groups[j.grp].dir)) + uint64(j.nameLen)
			if len(groups[j.grp].dir) > 0 {
				total++
			}
		}
		total += uint64(len(p.bytes(secLinked, p.uv(secLinkedLens))))
		total += uint64(len(p.bytes(secKept, p.uv(secKeptLens))))
	}
	if p.err != nil {
		return nil, p.err
	}
	if total != uint64(l.strsLen) {
		return nil, fmt.Errorf("%d bytes of strings for a view that holds %d", total, l.strsLen)
	}

	// Then the view, its strings read again in order (q): they were all
	// there, the first reading found.
	q := packReader{sec: orig}
	for _, k := range []int{secGroups, secDirLens, secDirs} { // what is left of them after the first reading
		q.sec[k] = p.sec[k]
	}
	out := make([]byte, l.head, n+uint64(viewHeader))
	copy(out, head)
	out = out[:l.head+l.recs]
	recs := out[l.head:]
	off := uint32(0)
	put := func(r []byte, k int, s []byte) {
		binary.LittleEndian.PutUint32(r[k:], off)
		binary.LittleEndian.PutUint32(r[k+4:], uint32(len(s)))
		out = append(out, s...)
		off += uint32(len(s))
	}
	for _, g := range groups {
		dirOff := off
		out = append(out, g.dir...)
		off += uint32(len(g.dir))
		for i := g.from; i < g.to; i++ {
			r := recs[i*recordSize : (i+1)*recordSize]
			binary.LittleEndian.PutUint32(r, dirOff)
			binary.LittleEndian.PutUint32(r[4:], uint32(len(g.dir)))
			put(r, 8, q.bytes(secNames, q.uv(secNameLens)))
			switch t := q.uv(secTargets); {
			case t >= 2:
				j := &rs[rs[i].target-1]
				binary.LittleEndian.PutUint32(r[16:], off)
				start := len(out)
				out = appendPath(out, groups[j.grp].dir, names[j.nameOff:j.nameOff+j.nameLen])
				binary.LittleEndian.PutUint32(r[20:], uint32(len(out)-start))
				off += uint32(len(out) - start)
			case t == 1:
				put(r, 16, q.bytes(secTargetStrs, q.uv(secTargetLens)))
			default:
				put(r, 16, nil)
			}
			put(r, 24, q.bytes(secLinked, q.uv(secLinkedLens)))
			put(r, 32, q.bytes(secKept, q.uv(secKeptLens)))
			binary.LittleEndian.PutUint64(r[40:], q.uv(secSizes))
			for k := 48; k < 60; k += 4 {
				v := q.uv(secOwners)
				if v > math.MaxUint32 {
					return nil, fmt.Errorf("record %d: an owner or mode of %d", i, v)
				}
				binary.LittleEndian.PutUint32(r[k:], uint32(v))
			}
			for k := range 4 {
				r[60+k] = planes[k*l.count+i]
			}
			switch planes[4*l.count+i] {
			case 0:
			case 1:
				copy(r[64:], q.bytes(secDigests, 32))
			default:
				return nil, fmt.Errorf("record %d: digest flag %d", i, planes[4*l.count+i])
			}
		}
	}
	if q.err != nil {
		return nil, q.err
	}
	p = q
	for s, rest := range p.sec {
		if s != secPlanes && len(rest) > 0 {
			return nil, fmt.Errorf("section %d: %d bytes left over", s, len(rest))
		}
	}
	return out, nil
}
