package tarparse

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/mcbake/mcbake/internal/testing/tarseeds"
)

// entryReader reads a tar stream: archive/tar's Reader or this package's.
type entryReader interface {
	Next() (*tar.Header, error)
	io.Reader
}

// FuzzTarReader reads arbitrary bytes with Reader and with archive/tar,
// the judge: every entry archive/tar reads, Reader reads the same (the
// fields mcbake uses and the content), and it fails no earlier. It may
// read on where archive/tar fails, on fields mcbake does not read, and it
// stops at a sparse file, which the scan reads with archive/tar.
func FuzzTarReader(f *testing.F) {
	for _, seed := range tarSeeds(f) {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, s := range tarStreams {
			want, werr := readEntries(tar.NewReader(s.open(data)))
			got, gerr := readEntries(NewReader(s.open(data)))
			n := min(len(got), len(want))
			if !slices.Equal(got[:n], want[:n]) {
				t.Fatalf("%s: Reader read %+v, archive/tar %+v", s.name, got, want)
			}
			switch {
			case errors.Is(gerr, ErrSparse):
			case gerr != nil && werr == nil:
				t.Fatalf("%s: Reader failed where archive/tar did not: %v (after %d entries)", s.name, gerr, len(got))
			case gerr != nil && len(got) < len(want):
				t.Fatalf("%s: Reader failed after %d entries (%v), archive/tar after %d (%v)", s.name, len(got), gerr, len(want), werr)
			case werr == nil && len(got) != len(want):
				t.Fatalf("%s: Reader read %d entries, archive/tar %d", s.name, len(got), len(want))
			case errors.Is(werr, io.ErrUnexpectedEOF) && (!errors.Is(gerr, io.ErrUnexpectedEOF) || len(got) != len(want)):
				// Headers archive/tar read, Reader reads the same: it
				// comes to the same truncation.
				t.Fatalf("%s: archive/tar failed after %d entries with %v; Reader after %d with %v", s.name, len(want), werr, len(got), gerr)
			}
		}
	})
}

// tarStreams are the ways FuzzTarReader and TestTarReaderEdges give a tar
// stream to both readers: whole, in small reads, and ending as a truncated
// gzip stream does, with io.ErrUnexpectedEOF.
var tarStreams = []struct {
	name string
	open func([]byte) io.Reader
}{
	{"whole", func(b []byte) io.Reader { return bytes.NewReader(b) }},
	{"in small reads", func(b []byte) io.Reader { return iotest.HalfReader(bytes.NewReader(b)) }},
	{"ending in io.ErrUnexpectedEOF", func(b []byte) io.Reader {
		return io.MultiReader(bytes.NewReader(b), iotest.ErrReader(io.ErrUnexpectedEOF))
	}},
}

// TestTarReaderEdges reads streams where Reader once differed from
// archive/tar, with both, through every one of tarStreams: the same
// entries, and both fail or neither. These are stricter than
// FuzzTarReader, which lets Reader read on where archive/tar fails.
func TestTarReaderEdges(t *testing.T) {
	for name, data := range tarEdges(t) {
		for _, s := range tarStreams {
			tr, gr := tar.NewReader(s.open(data)), NewReader(s.open(data))
			want, werr := readEntries(tr)
			got, gerr := readEntries(gr)
			if !slices.Equal(got, want) || (gerr == nil) != (werr == nil) {
				t.Errorf("%s, %s: Reader read %+v (%v), archive/tar %+v (%v)", name, s.name, got, gerr, want, werr)
			}
			// The end, or the error, stays.
			_, werr = tr.Next()
			if _, gerr = gr.Next(); gerr == nil || (gerr == io.EOF) != (werr == io.EOF) {
				t.Errorf("%s, %s: Next after the end: Reader %v, archive/tar %v", name, s.name, gerr, werr)
			}
		}
	}
}

// tarEdges are tar streams that tell Reader from a reader that gets
// archive/tar's rules wrong, by name.
func tarEdges(tb testing.TB) map[string][]byte {
	tb.Helper()
	// entry returns an entry's header block, as Go's writer writes it in
	// format, and its data, padded; edit edits the block first.
	entry := func(format tar.Format, hdr tar.Header, data string, edit func(blk []byte)) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		hdr.Format, hdr.Size = format, int64(len(data))
		if err := tw.WriteHeader(&hdr); err != nil {
			tb.Fatal(err)
		}
		io.WriteString(tw, data)
		tw.Flush()
		out := b.Bytes()
		if edit != nil {
			edit(out[len(out)-BlockSize-(-len(data)&(BlockSize-1))-len(data):])
			fixChecksum(out[len(out)-BlockSize-(-len(data)&(BlockSize-1))-len(data):])
		}
		return out
	}
	// paxOf returns a PAX header of type typ, named name, with the
	// records.
	paxOf := func(typ byte, name string, records ...string) []byte {
		var data string
		for i := 0; i < len(records); i += 2 {
			rec := " " + records[i] + "=" + records[i+1] + "\n"
			n := len(rec) + 1
			for len(strconv.Itoa(n))+len(rec) != n {
				n++
			}
			data += strconv.Itoa(n) + rec
		}
		return entry(tar.FormatUSTAR, tar.Header{Name: name, Typeflag: tar.TypeReg}, data, func(blk []byte) { blk[156] = typ })
	}
	pax := func(records ...string) []byte { return paxOf(tar.TypeXHeader, "pax", records...) }
	end := make([]byte, 2*BlockSize)
	file := func(name, data string) []byte {
		return entry(tar.FormatUSTAR, tar.Header{Name: name, Typeflag: tar.TypeReg, Mode: 0o644}, data, nil)
	}
	negative := func(blk []byte) { copy(blk[124:136], bytes.Repeat([]byte{0xff}, 12)) }
	// oldGNU is a GNU header as Go's writer before Go 1.8 wrote a long
	// name: a USTAR prefix over the access and change times.
	oldGNU := func(prefix string) func([]byte) {
		return func(blk []byte) { copy(blk[345:500], prefix+"\x00") }
	}
	return map[string][]byte{
		"empty PAX values keep the header's": slices.Concat(
			pax("path", "", "linkpath", "", "size", "", "uid", "", "gid", ""),
			entry(tar.FormatUSTAR, tar.Header{Name: "kept", Linkname: "target", Typeflag: tar.TypeSymlink, Uid: 7, Gid: 8}, "", nil),
			pax("size", ""), file("f", "content"), end),
		"a negative size on a directory":               slices.Concat(entry(tar.FormatGNU, tar.Header{Name: "d/", Typeflag: tar.TypeDir}, "", negative), file("f", "x"), end),
		"a negative size on a file":                    slices.Concat(entry(tar.FormatGNU, tar.Header{Name: "f", Typeflag: tar.TypeReg}, "", negative), end),
		"a negative size that PAX replaces":            slices.Concat(pax("size", "1"), entry(tar.FormatGNU, tar.Header{Name: "f", Typeflag: tar.TypeReg}, "", negative), end),
		"a negative PAX size on a directory":           slices.Concat(pax("size", "-3"), entry(tar.FormatUSTAR, tar.Header{Name: "d/", Typeflag: tar.TypeDir}, "", nil), end),
		"a pre-Go 1.8 GNU prefix":                      slices.Concat(entry(tar.FormatGNU, tar.Header{Name: "name", Typeflag: tar.TypeReg}, "data", oldGNU("some/prefix")), end),
		"a GNU prefix that parses as times":            slices.Concat(entry(tar.FormatGNU, tar.Header{Name: "name", Typeflag: tar.TypeReg}, "data", oldGNU("0000000")), end),
		"a pre-Go 1.8 GNU prefix that is not ASCII":    slices.Concat(entry(tar.FormatGNU, tar.Header{Name: "name", Typeflag: tar.TypeReg}, "data", oldGNU("pr\xe9fix")), end),
		"a stream that ends in a file's padding":       file("f", "content")[:BlockSize+100],
		"a stream that ends in a PAX header's padding": pax("path", "p")[:BlockSize+100],
		"a stream that ends after one zero block":      slices.Concat(file("f", "x"), end[:BlockSize]),
		"a stream that ends inside a zero block":       slices.Concat(file("f", "x"), end[:BlockSize+7]),
		"a stream that ends inside a header":           slices.Concat(file("f", "x"), file("g", "y")[:100]),
		"a stream that ends inside a PAX header":       pax("path", "p")[:BlockSize+5],
		"a global header that ends in its padding":     paxOf(tar.TypeXGlobalHeader, "glob", "comment", "hi")[:BlockSize+15],
		"a global header's path":                       slices.Concat(paxOf(tar.TypeXGlobalHeader, "glob", "path", "frompax"), file("f", "x"), end),
		"a global header's prefix":                     slices.Concat(paxOf(tar.TypeXGlobalHeader, strings.Repeat("p", 90)+"/"+strings.Repeat("g", 20)), end),
		"a global header's bad size record":            slices.Concat(paxOf(tar.TypeXGlobalHeader, "glob", "size", "abc"), end),
		"a PAX header over 1 MiB, truncated": append(entry(tar.FormatUSTAR, tar.Header{Name: "pax", Typeflag: tar.TypeReg}, "", func(blk []byte) {
			blk[156] = tar.TypeXHeader
			copy(blk[124:136], fmt.Sprintf("%011o\x00", maxSpecial+1))
		}), []byte("10 path=p\n")...),
		"a base-256 checksum": func() []byte {
			b := slices.Concat(file("f", "x"), end)
			sum := 8 * int64(' ')
			for i, c := range b[:BlockSize] {
				if i < 148 || i >= 156 {
					sum += int64(c)
				}
			}
			binary.BigEndian.PutUint64(b[148:156], uint64(sum)|1<<63)
			return b
		}(),
	}
}

// tarEntry is what mcbake reads of a tar entry.
type tarEntry struct {
	name, link string
	flag       byte
	mode, size int64
	uid, gid   int
	content    [32]byte
}

// readEntries reads every entry of tr, and every other entry's content,
// up to the first error.
func readEntries(tr entryReader) ([]tarEntry, error) {
	var out []tarEntry
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		e := tarEntry{name: hdr.Name, link: hdr.Linkname, flag: hdr.Typeflag, mode: hdr.Mode, size: hdr.Size, uid: hdr.Uid, gid: hdr.Gid}
		if len(out)%2 == 0 { // every other entry's content is skipped
			h := sha256.New()
			if _, err := io.Copy(h, io.LimitReader(tr, 1<<24)); err != nil {
				return out, err
			}
			h.Sum(e.content[:0])
		}
		out = append(out, e)
	}
}

// tarSeeds returns tar streams in the formats and shapes layers have:
// Go's writer in each format, a global header, legacy type flags, a hard
// link whose size field is set, streams that end early, and the sparse
// files GNU tar writes.
func tarSeeds(tb testing.TB) [][]byte {
	tb.Helper()
	long := strings.Repeat("long/", 30) + "name"
	write := func(format tar.Format, hdrs ...*tar.Header) []byte {
		var b bytes.Buffer
		tw := tar.NewWriter(&b)
		for _, h := range hdrs {
			h.Format = format
			if h.Typeflag == tar.TypeXGlobalHeader {
				h.Format = tar.FormatPAX
			}
			if err := tw.WriteHeader(h); err != nil {
				tb.Fatal(err)
			}
			if h.Size > 0 {
				tw.Write(bytes.Repeat([]byte{'x'}, int(h.Size)))
			}
		}
		tw.Close()
		return b.Bytes()
	}
	tree := func() []*tar.Header {
		return []*tar.Header{
			{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
			{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 700},
			{Name: "etc/l", Typeflag: tar.TypeSymlink, Linkname: "passwd", Mode: 0o777},
			{Name: "etc/h", Typeflag: tar.TypeLink, Linkname: "etc/passwd"},
			{Name: "dev/null", Typeflag: tar.TypeChar, Devmajor: 1, Devminor: 3},
		}
	}
	var seeds [][]byte
	for _, format := range []tar.Format{tar.FormatUSTAR, tar.FormatPAX, tar.FormatGNU} {
		seeds = append(seeds, write(format, tree()...))
	}
	seeds = append(seeds,
		write(tar.FormatPAX, &tar.Header{Name: long, Linkname: long, Typeflag: tar.TypeSymlink}, &tar.Header{Name: "x", Typeflag: tar.TypeReg, Uid: 1 << 30, Size: 3}),
		write(tar.FormatGNU, &tar.Header{Name: long, Linkname: long, Typeflag: tar.TypeLink}, &tar.Header{Name: "x", Typeflag: tar.TypeReg, Uid: 1 << 40}),
		write(tar.FormatPAX, &tar.Header{Typeflag: tar.TypeXGlobalHeader, PAXRecords: map[string]string{"comment": "hi"}}, &tar.Header{Name: "a", Typeflag: tar.TypeReg, Size: 1}),
	)
	// A legacy "\x00" file and directory, and a hard link with a size
	// field, which has no content all the same.
	legacy := write(tar.FormatUSTAR, &tar.Header{Name: "d/", Typeflag: tar.TypeDir}, &tar.Header{Name: "f", Typeflag: tar.TypeReg, Size: 5}, &tar.Header{Name: "h", Typeflag: tar.TypeLink, Linkname: "f"})
	legacy[156], legacy[BlockSize+156] = 0, 0
	copy(legacy[3*BlockSize+124:], "00000000007\x00")
	for _, at := range []int{0, BlockSize, 3 * BlockSize} {
		fixChecksum(legacy[at:])
	}
	seeds = append(seeds, legacy)
	full := write(tar.FormatPAX, tree()...)
	seeds = append(seeds, full[:len(full)-1024], full[:len(full)-512], full[:3*BlockSize+100], full[:2*BlockSize-1])
	edges := tarEdges(tb)
	for _, name := range slices.Sorted(maps.Keys(edges)) {
		seeds = append(seeds, edges[name])
	}
	return append(seeds, tarseeds.GNUSparse(tb)...)
}
