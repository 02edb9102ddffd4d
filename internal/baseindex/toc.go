package baseindex

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex/jsonscan"
)

// TOC lets Build read a zstd:chunked or eStargz layer's table of contents
// instead of its blob (docs/design.md, "Indexing a base"): every entry's
// metadata and a sha256 per regular file, at the blob's tail. Build reads
// the TOC and then only the compressed ranges of the files whose content
// it keeps, and checks each against its digest.
type TOC struct {
	// Annotations are the layer descriptor's annotations: they name the
	// TOC's digest and, for zstd:chunked, its position in the blob.
	Annotations map[string]string
	// ReadRanges returns the bytes of each range of the blob, in order:
	// ReadAt on a local blob, HTTP range requests on a registry's. An
	// error matching ErrNoRanges makes Build scan the blob instead.
	ReadRanges func(ctx context.Context, ranges []Range) ([][]byte, error)
}

// Range is a part of a blob.
type Range struct{ Offset, Length int64 }

// ErrNoRanges says a blob cannot be read by ranges (a registry refusing
// range requests).
var ErrNoRanges = errors.New("blob ranges cannot be read")

// ErrTOCDigest is returned when a layer's table of contents does not hash
// to the digest its descriptor's annotation names: the annotation is
// what vouches for the TOC, so this is an error, not a reason to scan.
var ErrTOCDigest = errors.New("table of contents digest mismatch")

// The annotations and footers of the two formats, as containers/storage's
// pkg/chunked and stargz-snapshotter's estargz write them.
const (
	zstdChunkedChecksum   = "io.github.containers.zstd-chunked.manifest-checksum"
	zstdChunkedPosition   = "io.github.containers.zstd-chunked.manifest-position"
	zstdChunkedFooterSize = 64
	zstdChunkedTOCType    = 1
	estargzTOCDigest      = "containerd.io/snapshot/stargz/toc.digest"
	estargzFooterSize     = 51
	estargzTOCName        = "stargz.index.json"
	// maxTOCSize bounds a TOC, compressed and not, as containers/storage
	// does.
	maxTOCSize = 150 << 20
)

// zstdChunkedMagic ends a zstd:chunked footer.
var zstdChunkedMagic = []byte{0x47, 0x4e, 0x55, 0x6c, 0x49, 0x6e, 0x55, 0x78}

// estargzMeta are the files eStargz adds to a layer, which its TOC lists
// and a chunked pull does not create; a scan of an eStargz blob skips
// them too, so that both ways give the same index.
var estargzMeta = map[string]bool{".prefetch.landmark": true, ".no.prefetch.landmark": true, estargzTOCName: true}

// tocFormat is the kind of a layer's TOC.
type tocFormat int

const (
	noTOC tocFormat = iota
	zstdChunked
	estargz
)

// tocDigest returns the format and digest of the TOC a layer's
// annotations name. Naming both, or a digest that is not one, is an
// error.
func tocDigest(annotations map[string]string) (tocFormat, digest.Digest, error) {
	z, zok := annotations[zstdChunkedChecksum]
	e, eok := annotations[estargzTOCDigest]
	f, s := zstdChunked, z
	switch {
	case zok && eok:
		return noTOC, "", errors.New("layer names both a zstd:chunked and an eStargz table of contents")
	case eok:
		f, s = estargz, e
	case !zok:
		return noTOC, "", nil
	}
	d, err := digest.Parse(s)
	if err != nil || d.Algorithm() != digest.SHA256 {
		return noTOC, "", fmt.Errorf("table of contents digest %q: not a sha256 digest", s)
	}
	return f, d, nil
}

// tocListing lists a layer from its TOC.
type tocListing struct {
	toc     *TOC
	format  tocFormat
	entries []tocEntry
	// ends are the distinct offsets of the entries' compressed data and
	// the TOC's offset, sorted: an eStargz file's data ends at the next
	// one.
	ends []int64
	i    int
	hdr  tar.Header
}

// tocEntry is one entry of a TOC, chunks merged into their file.
type tocEntry struct {
	name, link  string
	mode, size  int64
	uid, gid    int64
	offset, end int64
	// first is where the content starts, more where the eStargz chunks
	// after it are.
	first  tocChunk
	more   []tocChunk
	digest Digest
	typ    byte
	// hasDigest is set for a valid sha256 digest, badDigest for any
	// other.
	hasDigest, badDigest bool
	isChunk, skip        bool
}

// chunks returns all of the entry's chunks.
func (e *tocEntry) chunks() []tocChunk {
	return append([]tocChunk{e.first}, e.more...)
}

// tocChunk is where a part of an eStargz file's content is.
type tocChunk struct {
	offset, inner, start int64
}

// readTOC reads a layer's TOC. A missing or unusable TOC is a fallback;
// one that does not match its digest is ErrTOCDigest.
func readTOC(ctx context.Context, l Layer) (listing, error) {
	format, d, err := tocDigest(l.TOC.Annotations)
	if err != nil {
		return nil, fallback("%v", err)
	}
	var json []byte
	var tocOffset int64
	switch format {
	case zstdChunked:
		json, tocOffset, err = readZstdChunkedTOC(ctx, l, d)
	case estargz:
		json, tocOffset, err = readEstargzTOC(ctx, l, d)
	default:
		return nil, fallback("no table of contents")
	}
	if err != nil {
		return nil, err
	}
	return parseTOC(l.TOC, format, json, tocOffset)
}

// readRange reads one range of the blob.
func readRange(ctx context.Context, t *TOC, r Range) ([]byte, error) {
	b, err := t.ReadRanges(ctx, []Range{r})
	switch {
	case errors.Is(err, ErrNoRanges):
		return nil, fallback("%v", err)
	case err != nil:
		return nil, fmt.Errorf("reading the blob at %d: %w", r.Offset, err)
	case len(b) != 1 || int64(len(b[0])) != r.Length:
		return nil, fmt.Errorf("reading the blob at %d: short read", r.Offset)
	}
	return b[0], nil
}

// readZstdChunkedTOC reads, checks and decompresses a zstd:chunked TOC,
// at the position its annotation gives or else the footer's, and returns
// it with its offset.
func readZstdChunkedTOC(ctx context.Context, l Layer, d digest.Digest) ([]byte, int64, error) {
	pos, err := zstdChunkedTOCPosition(ctx, l)
	if err != nil {
		return nil, 0, err
	}
	if pos.length > maxTOCSize || pos.uncompressed > maxTOCSize {
		return nil, 0, fallback("table of contents too large (%d bytes)", max(pos.length, pos.uncompressed))
	}
	if l.Size > 0 && (pos.offset < 0 || pos.length < 0 || pos.offset+pos.length > l.Size) {
		return nil, 0, fallback("table of contents outside the blob")
	}
	blob, err := readRange(ctx, l.TOC, Range{pos.offset, pos.length})
	if err != nil {
		return nil, 0, err
	}
	if got := digest.SHA256.FromBytes(blob); got != d {
		return nil, 0, fmt.Errorf("%w: got %s, the layer's annotation says %s", ErrTOCDigest, got, d)
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxMemory(maxTOCSize))
	if err != nil {
		return nil, 0, err
	}
	defer dec.Close()
	json, err := dec.DecodeAll(blob, make([]byte, 0, pos.uncompressed))
	if err != nil {
		return nil, 0, fallback("decompressing the table of contents: %v", err)
	}
	return json, pos.offset, nil
}

// tocPosition is where a zstd:chunked TOC is.
type tocPosition struct {
	offset, length, uncompressed int64
}

// zstdChunkedTOCPosition reads the TOC's position from the annotation,
// or from the footer at the blob's tail.
func zstdChunkedTOCPosition(ctx context.Context, l Layer) (tocPosition, error) {
	var p tocPosition
	if a, ok := l.TOC.Annotations[zstdChunkedPosition]; ok {
		var typ int64
		if _, err := fmt.Sscanf(a, "%d:%d:%d:%d", &p.offset, &p.length, &p.uncompressed, &typ); err != nil || typ != zstdChunkedTOCType {
			return p, fallback("table of contents position %q", a)
		}
		return p, nil
	}
	if l.Size < zstdChunkedFooterSize {
		return p, fallback("no table of contents position and no blob size to find the footer")
	}
	f, err := readRange(ctx, l.TOC, Range{l.Size - zstdChunkedFooterSize, zstdChunkedFooterSize})
	if err != nil {
		return p, err
	}
	if !bytes.Equal(f[56:], zstdChunkedMagic) || binary.LittleEndian.Uint64(f[24:]) != zstdChunkedTOCType {
		return p, fallback("no zstd:chunked footer")
	}
	u := func(i int) int64 { return int64(min(binary.LittleEndian.Uint64(f[i*8:]), 1<<62)) }
	return tocPosition{offset: u(0), length: u(1), uncompressed: u(2)}, nil
}

// readEstargzTOC reads an eStargz footer and TOC, checks the TOC and
// returns it with its offset.
func readEstargzTOC(ctx context.Context, l Layer, d digest.Digest) ([]byte, int64, error) {
	if l.Size <= estargzFooterSize {
		return nil, 0, fallback("no blob size to find the eStargz footer")
	}
	f, err := readRange(ctx, l.TOC, Range{l.Size - estargzFooterSize, estargzFooterSize})
	if err != nil {
		return nil, 0, err
	}
	// The footer is an empty gzip member whose extra field holds
	// "%016xSTARGZ", the TOC's offset.
	if string(f[32:38]) != "STARGZ" {
		return nil, 0, fallback("no eStargz footer")
	}
	off, err := strconv.ParseInt(string(f[16:32]), 16, 64)
	size := l.Size - estargzFooterSize - off
	if err != nil || off < 0 || size <= 0 || size > maxTOCSize {
		return nil, 0, fallback("eStargz footer names no usable table of contents")
	}
	blob, err := readRange(ctx, l.TOC, Range{off, size})
	if err != nil {
		return nil, 0, err
	}
	json, err := estargzTOCJSON(blob)
	if err != nil {
		return nil, 0, err
	}
	if got := digest.SHA256.FromBytes(json); got != d {
		return nil, 0, fmt.Errorf("%w: got %s, the layer's annotation says %s", ErrTOCDigest, got, d)
	}
	return json, off, nil
}

// estargzTOCJSON decompresses the TOC member, a tar holding
// stargz.index.json.
func estargzTOCJSON(blob []byte) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(blob))
	if err != nil {
		return nil, fallback("eStargz table of contents: %v", err)
	}
	tr := tar.NewReader(zr)
	hdr, err := tr.Next()
	if err != nil || hdr.Name != estargzTOCName || hdr.Size > maxTOCSize {
		return nil, fallback("eStargz table of contents is not a tar holding %s", estargzTOCName)
	}
	json, err := io.ReadAll(io.LimitReader(tr, hdr.Size))
	if err != nil || int64(len(json)) != hdr.Size {
		return nil, fallback("eStargz table of contents: %v", err)
	}
	return json, nil
}

// tocTypes maps a TOC entry type to a tar type flag.
var tocTypes = map[string]byte{
	"reg": tar.TypeReg, "dir": tar.TypeDir, "symlink": tar.TypeSymlink, "hardlink": tar.TypeLink,
	"char": tar.TypeChar, "block": tar.TypeBlock, "fifo": tar.TypeFifo,
}

// parseTOC parses a TOC's JSON: {"version": 1, "entries": [...]}, each
// entry as containers/storage's minimal.FileMetadata or estargz's
// TOCEntry (the same names for what mcbake reads). A TOC that lists a
// path twice is not used: the order of a TOC's entries is not promised
// to be the tar stream's, and only then does it matter.
func parseTOC(t *TOC, format tocFormat, json []byte, tocOffset int64) (*tocListing, error) {
	// A name per entry: enough room for them all at once.
	l := &tocListing{toc: t, format: format, entries: make([]tocEntry, 0, bytes.Count(json, []byte(`"name"`)))}
	s := jsonscan.New(json)
	version := int64(-1)
	s.Object(func(key []byte) {
		switch string(key) {
		case "version":
			version = s.Int()
		case "entries":
			s.Array(func() { l.addEntry(tocEntryOf(s)) })
		default:
			s.Skip()
		}
	})
	if err := s.End(); err != nil {
		return nil, fallback("table of contents: %v", err)
	}
	if version != 1 {
		return nil, fallback("table of contents version %d", version)
	}
	return l, l.check(tocOffset)
}

// entry reads one TOC entry.
func tocEntryOf(s *jsonscan.Scanner) tocEntry {
	var e tocEntry
	var typ string
	var c tocChunk
	s.Object(func(key []byte) {
		switch string(key) {
		case "type":
			typ = s.View()
		case "name":
			e.name = s.View() // the TOC's JSON is never modified
		case "linkName":
			e.link = s.View()
		case "mode":
			e.mode = s.Int()
		case "size":
			e.size = s.Int()
		case "uid":
			e.uid = s.Int()
		case "gid":
			e.gid = s.Int()
		case "digest":
			e.hasDigest, e.badDigest = false, false
			if d := s.Bytes(); len(d) > 0 {
				hexSum, ok := bytes.CutPrefix(d, []byte("sha256:"))
				n, err := hex.Decode(e.digest[:], hexSum)
				e.hasDigest = ok && err == nil && n == len(e.digest)
				e.badDigest = !e.hasDigest
			}
		case "offset":
			e.offset = s.Int()
		case "endOffset":
			e.end = s.Int()
		case "innerOffset":
			c.inner = s.Int()
		case "chunkOffset":
			c.start = s.Int()
		default:
			s.Skip()
		}
	})
	c.offset = e.offset
	e.first = c
	if typ == "chunk" {
		e.isChunk = true
		return e
	}
	var ok bool
	if e.typ, ok = tocTypes[typ]; !ok && s.Err() == nil {
		s.Fail(fmt.Errorf("entry %q: unknown type %q", e.name, typ))
	}
	return e
}

// addEntry appends a TOC entry, or a chunk to the file before it.
func (l *tocListing) addEntry(e tocEntry) {
	if e.isChunk {
		if n := len(l.entries); n > 0 && l.entries[n-1].typ == tar.TypeReg {
			last := &l.entries[n-1]
			last.more = append(last.more, e.first)
			last.end = max(last.end, e.end)
			return
		}
		l.entries = append(l.entries, tocEntry{name: e.name, skip: true, isChunk: true}) // reported by check
		return
	}
	e.skip = l.format == estargz && estargzMeta[strings.TrimPrefix(e.name, "./")]
	l.entries = append(l.entries, e)
}

// check refuses what the TOC cannot stand for, and computes where each
// eStargz file's data ends.
func (l *tocListing) check(tocOffset int64) error {
	seen := make(map[string]bool, len(l.entries))
	for i := range l.entries {
		e := &l.entries[i]
		if e.isChunk {
			return fallback("table of contents: chunk of %q without its file", e.name)
		}
		p, err := entryPath(e.name)
		if err != nil {
			return fallback("table of contents: %v", err)
		}
		if seen[p] {
			return fallback("table of contents lists %q twice", e.name)
		}
		seen[p] = true
		if e.size < 0 || e.offset < 0 || e.end < 0 {
			return fallback("table of contents: entry %q has a negative size or offset", e.name)
		}
		if l.format != estargz {
			continue // zstd:chunked entries say where their data ends
		}
		if e.offset > 0 {
			l.ends = append(l.ends, e.offset)
		}
		for _, c := range e.more {
			if c.offset > 0 {
				l.ends = append(l.ends, c.offset)
			}
		}
	}
	l.ends = append(l.ends, tocOffset)
	slices.Sort(l.ends)
	l.ends = slices.Compact(l.ends)
	return nil
}

func (l *tocListing) next() (*tar.Header, *Digest, int, error) {
	for l.i < len(l.entries) && l.entries[l.i].skip {
		l.i++
	}
	if l.i == len(l.entries) {
		return nil, nil, 0, io.EOF
	}
	i := l.i
	l.i++
	e := &l.entries[i]
	// The header is the listing's own: the scanner keeps none.
	l.hdr = tar.Header{Name: e.name, Typeflag: e.typ, Mode: e.mode, Uid: int(e.uid), Gid: int(e.gid), Linkname: e.link}
	if e.typ != tar.TypeReg {
		return &l.hdr, nil, i, nil
	}
	l.hdr.Size = e.size
	switch {
	case e.hasDigest:
		return &l.hdr, &e.digest, i, nil
	case !e.badDigest && e.size == 0: // an empty file may have none
		e.digest = sha256.Sum256(nil)
		return &l.hdr, &e.digest, i, nil
	}
	return nil, nil, 0, fallback("table of contents: %q has no sha256 digest", e.name)
}

// count is how many entries the listing has, at most.
func (l *tocListing) count() int { return len(l.entries) }

// read reads the compressed ranges of the files in one ReadRanges call
// (one request to a registry) and decompresses them.
func (l *tocListing) read(ctx context.Context, files []listedFile) ([][]byte, error) {
	var ranges []Range
	for _, f := range files {
		e := &l.entries[f.loc]
		if e.size == 0 {
			continue
		}
		rs, err := l.ranges(e)
		if err != nil {
			return nil, err
		}
		ranges = append(ranges, rs...)
	}
	var parts [][]byte
	if len(ranges) > 0 {
		var err error
		if parts, err = l.toc.ReadRanges(ctx, ranges); errors.Is(err, ErrNoRanges) {
			return nil, fallback("%v", err)
		} else if err != nil {
			return nil, fmt.Errorf("reading files from the blob: %w", err)
		}
		if len(parts) != len(ranges) {
			return nil, errors.New("reading files from the blob: short read")
		}
	}
	dec, err := zstd.NewReader(nil, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return nil, err
	}
	defer dec.Close()
	out := make([][]byte, len(files))
	for i, f := range files {
		e := &l.entries[f.loc]
		if e.size == 0 {
			out[i] = []byte{}
			continue
		}
		n := 1 + len(e.more)
		if l.format == zstdChunked {
			n = 1
		}
		b, err := l.decompress(dec, e, parts[:n])
		if err != nil {
			return nil, fallback("%s: %v", e.name, err)
		}
		out[i], parts = b, parts[n:]
	}
	return out, nil
}

// ranges returns the compressed ranges a file's content is in: one for
// zstd:chunked, whose entries say where a file's frames end, and one per
// chunk for eStargz, each ending where the next data starts.
func (l *tocListing) ranges(e *tocEntry) ([]Range, error) {
	if l.format == zstdChunked {
		if e.end <= e.offset {
			return nil, fallback("table of contents: %q has no data range", e.name)
		}
		return []Range{{e.offset, e.end - e.offset}}, nil
	}
	var rs []Range
	for _, c := range e.chunks() {
		k, _ := slices.BinarySearch(l.ends, c.offset+1)
		if c.offset == 0 || k == len(l.ends) {
			return nil, fallback("table of contents: %q has no data range", e.name)
		}
		rs = append(rs, Range{c.offset, l.ends[k] - c.offset})
	}
	return rs, nil
}

// decompress returns a file's content from its compressed ranges.
func (l *tocListing) decompress(dec *zstd.Decoder, e *tocEntry, parts [][]byte) ([]byte, error) {
	if l.format == zstdChunked {
		return dec.DecodeAll(parts[0], make([]byte, 0, e.size))
	}
	out := make([]byte, 0, e.size)
	chunks := e.chunks()
	for k, c := range chunks {
		end := e.size
		if k+1 < len(chunks) {
			end = chunks[k+1].start
		}
		if c.start != int64(len(out)) || end < c.start {
			return nil, errors.New("chunks out of order")
		}
		zr, err := gzip.NewReader(bytes.NewReader(parts[k]))
		if err != nil {
			return nil, err
		}
		zr.Multistream(false)
		if _, err := io.CopyN(io.Discard, zr, c.inner); err != nil {
			return nil, err
		}
		chunk, err := io.ReadAll(io.LimitReader(zr, end-c.start))
		if err != nil {
			return nil, err
		}
		out = append(out, chunk...)
	}
	return out, nil
}
