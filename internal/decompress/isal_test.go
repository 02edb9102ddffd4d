//go:build cgo && isal

package decompress

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"testing/iotest"

	"github.com/klauspost/compress/gzip"
)

// readAllWith reads the gzip stream src with open, in reads of size n.
func readAllWith(open func(*bufio.Reader) (io.ReadCloser, error), src io.Reader, n int) ([]byte, error) {
	z, err := open(bufio.NewReader(src))
	if err != nil {
		return nil, err
	}
	defer z.Close()
	var out bytes.Buffer
	buf := make([]byte, n)
	for {
		m, err := z.Read(buf)
		out.Write(buf[:m])
		if err == io.EOF {
			return out.Bytes(), nil
		}
		if err != nil {
			return out.Bytes(), err
		}
	}
}

func pureGzip(br *bufio.Reader) (io.ReadCloser, error) { return gzip.NewReader(br) }

// checkSame reads b with ISA-L and with klauspost/compress, the judge: the
// same output when the judge reads it to its end, an error when it fails.
func checkSame(t *testing.T, b []byte) {
	t.Helper()
	type source struct {
		name string
		open func() io.Reader
	}
	sources := []source{
		{"", func() io.Reader { return bytes.NewReader(b) }},
		// A source that fails after the stream, as a download cut
		// short does, and one that fails with its last bytes.
		{", the source failing at its end", func() io.Reader {
			return io.MultiReader(bytes.NewReader(b), iotest.ErrReader(io.ErrUnexpectedEOF))
		}},
		{", the source failing with its last bytes", func() io.Reader { return &failingWithLast{b: b} }},
	}
	if len(b) <= 256<<10 {
		// Input a byte at a time: every header field, deflate block and
		// trailer is split between two calls into ISA-L.
		sources = append(sources, source{", input a byte at a time", func() io.Reader { return iotest.OneByteReader(bytes.NewReader(b)) }})
	}
	for _, src := range sources {
		want, werr := readAllWith(pureGzip, src.open(), 1<<16)
		for _, n := range []int{512, 1 << 16, 1 << 20} {
			got, gerr := readAllWith(newISALReader, src.open(), n)
			switch {
			case werr == nil && gerr != nil:
				t.Fatalf("reads of %d%s: isa-l failed: %v (klauspost/compress read %d bytes)", n, src.name, gerr, len(want))
			case werr != nil && gerr == nil:
				t.Fatalf("reads of %d%s: isa-l read %d bytes where klauspost/compress failed: %v", n, src.name, len(got), werr)
			case werr == nil && !bytes.Equal(got, want):
				t.Fatalf("reads of %d%s: isa-l read %d bytes, klauspost/compress %d, not the same", n, src.name, len(got), len(want))
			}
		}
	}
}

// failingWithLast reads b in reads of at most 4 KiB (less than bufio's
// buffer, so that bufio reads into the caller's), the last one with an
// error, and io.EOF after it.
type failingWithLast struct {
	b    []byte
	done bool
}

func (f *failingWithLast) Read(p []byte) (int, error) {
	if f.done {
		return 0, io.EOF
	}
	n := copy(p[:min(len(p), 4096)], f.b)
	f.b = f.b[n:]
	if len(f.b) == 0 {
		f.done = true
		return n, errors.New("the source failed")
	}
	return n, nil
}

// withHeaderCRC returns the gzip member b, whose header has the fields of
// hdr, with a header CRC (FHCRC), which Go's writers never write; bad
// makes it wrong.
func withHeaderCRC(b []byte, hdr gzip.Header, bad bool) []byte {
	n := 10
	if hdr.Extra != nil {
		n += 2 + len(hdr.Extra)
	}
	if hdr.Name != "" {
		n += len(hdr.Name) + 1
	}
	if hdr.Comment != "" {
		n += len(hdr.Comment) + 1
	}
	head := bytes.Clone(b[:n])
	head[3] |= 1 << 1
	sum := uint16(crc32.ChecksumIEEE(head))
	if bad {
		sum ^= 1
	}
	return slices.Concat(head, binary.LittleEndian.AppendUint16(nil, sum), b[n:])
}

func gz(t testing.TB, data []byte, level int, hdr gzip.Header) []byte {
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, level)
	if err != nil {
		t.Fatal(err)
	}
	w.Header = hdr
	w.Write(data)
	w.Close()
	return b.Bytes()
}

func samples(t testing.TB) [][]byte {
	r := rand.New(rand.NewPCG(1, 2))
	random := make([]byte, 3<<20)
	for i := range random {
		random[i] = byte(r.IntN(256))
	}
	text := bytes.Repeat([]byte("[Unit]\nDescription=Kubernetes Kubelet\nAfter=network-online.target\n"), 50000)
	one := gz(t, text, gzip.BestSpeed, gzip.Header{})
	named := gz(t, random[:100000], gzip.DefaultCompression, gzip.Header{Name: "layer.tar", Comment: "a comment", Extra: []byte("xx")})
	stored := gz(t, random[:70000], gzip.NoCompression, gzip.Header{})
	empty := gz(t, nil, gzip.DefaultCompression, gzip.Header{})
	out := [][]byte{one, named, stored, empty, gz(t, random, gzip.BestCompression, gzip.Header{}),
		append(append(bytes.Clone(one), named...), empty...), // members
		append(bytes.Clone(one), 0, 0, 0, 0),                 // trailing zeros
		append(bytes.Clone(one), 'x'),                        // trailing garbage
		one[:len(one)-4], one[:len(one)/2], one[:12],         // truncated
	}
	crc := bytes.Clone(one)
	crc[len(crc)-6] ^= 1
	size := bytes.Clone(one)
	size[len(size)-2] ^= 1
	body := bytes.Clone(one)
	body[len(body)/3] ^= 0x40
	out = append(out, crc, size, body)
	// Header CRCs, right and wrong, on a member with every header field
	// and on one with none; reserved flags; a name longer than
	// klauspost/compress reads.
	fields := gzip.Header{Name: "layer.tar", Comment: "a comment", Extra: []byte("extra")}
	small := gz(t, text[:5000], gzip.DefaultCompression, fields)
	plain := gz(t, text[:5000], gzip.DefaultCompression, gzip.Header{})
	reserved := bytes.Clone(plain)
	reserved[3] |= 1 << 5
	badID, badMethod := bytes.Clone(plain), bytes.Clone(plain)
	badID[1] ^= 1
	badMethod[2] = 7
	long := gz(t, text[:100], gzip.DefaultCompression, gzip.Header{Name: strings.Repeat("n", 511)})
	longer := gz(t, text[:100], gzip.DefaultCompression, gzip.Header{Name: strings.Repeat("n", 512)})
	return append(out,
		withHeaderCRC(small, fields, false), withHeaderCRC(small, fields, true),
		withHeaderCRC(plain, gzip.Header{}, false), withHeaderCRC(plain, gzip.Header{}, true),
		slices.Concat(plain, withHeaderCRC(small, fields, false), small), // members
		reserved, long, longer, small[:15], small[:30],
		badID, badMethod, slices.Concat(plain, badID)) // a second member that is not gzip
}

// TestISAL: ISA-L's reader reads what klauspost/compress's does, and
// fails where it fails: members, header fields, stored blocks, trailing
// bytes, truncations, a damaged CRC, size or body.
func TestISAL(t *testing.T) {
	if !isalLoaded() {
		t.Skip("libisal.so.2 is not installed (apt-get install libisal2)")
	}
	for i, b := range samples(t) {
		t.Logf("sample %d", i)
		checkSame(t, b)
	}
}

func FuzzISAL(f *testing.F) {
	if !isalLoaded() {
		f.Skip("libisal.so.2 is not installed (apt-get install libisal2)")
	}
	for _, b := range samples(f) {
		if len(b) < 4096 {
			f.Add(b)
		}
	}
	f.Add(gz(f, []byte("hello, hello, hello"), gzip.BestCompression, gzip.Header{Name: "n"}))
	f.Fuzz(func(t *testing.T, b []byte) { checkSame(t, b) })
}

// TestISALClearsUpper: every call into ISA-L returns with the upper halves
// of the vector registers clear. ISA-L's AVX-512 inflate left them in
// use, and Go's SHA-256 (SHA-NI, legacy SSE) after it ran at a twentieth
// of its speed: a cold build of a 1 GiB gzip base took 19 s with ISA-L
// and 3 s without it. The stream mixes literals and matches, as a layer
// does, so that the fast paths run.
func TestISALClearsUpper(t *testing.T) {
	if !isalLoaded() {
		t.Skip("libisal.so.2 is not installed (apt-get install libisal2)")
	}
	r := rand.New(rand.NewPCG(3, 4))
	words := []string{"[Unit]\n", "Description=", "kubelet ", "After=", "network-online.target\n", "ExecStart=/usr/bin/", "\x00\x01\x02"}
	var data bytes.Buffer
	for data.Len() < 8<<20 {
		data.WriteString(words[r.IntN(len(words))])
		data.WriteByte(byte(r.IntN(256)))
	}
	got, err := upperInUse(gz(t, data.Bytes(), gzip.DefaultCompression, gzip.Header{}))
	switch {
	case err != nil:
		t.Fatal(err)
	case got < 0:
		t.Skip("this processor cannot tell whether the vector registers' upper halves are in use (XGETBV with ECX=1)")
	case got != 0:
		t.Fatal("a call into ISA-L returned with the upper halves of the vector registers in use: legacy-SSE code after it (Go's SHA-256) runs many times slower")
	}
}

// TestISALTooOld: a libisal.so.2 older than 2.24, without
// isal_read_gzip_header (and with another layout of the state this file
// allocates), is not used: the Go decoder serves. The library is a stub
// with the two functions mcbake calls, built with the machine's C
// compiler, and the test binary runs again with it first on the path.
func TestISALTooOld(t *testing.T) {
	if os.Getenv("MCBAKE_TEST_ISAL_STUB") == "1" {
		if got := GzipDecoder(); got != "klauspost/compress" {
			t.Fatalf("GzipDecoder() = %q with a libisal.so.2 that lacks isal_read_gzip_header, want klauspost/compress", got)
		}
		return
	}
	cc, err := exec.LookPath("gcc")
	if err != nil {
		t.Skip("no gcc to build a stub libisal.so.2")
	}
	dir := t.TempDir()
	src := filepath.Join(dir, "stub.c")
	if err := os.WriteFile(src, []byte("void isal_inflate_init(void *s) {}\nint isal_inflate(void *s) { return -1; }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command(cc, "-shared", "-fPIC", "-o", filepath.Join(dir, "libisal.so.2"), src).CombinedOutput(); err != nil {
		t.Fatalf("building the stub: %v\n%s", err, out)
	}
	cmd := exec.Command(os.Args[0], "-test.run", "^TestISALTooOld$", "-test.v")
	cmd.Env = append(os.Environ(), "MCBAKE_TEST_ISAL_STUB=1", "LD_LIBRARY_PATH="+dir)
	if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: TestISALTooOld") {
		t.Fatalf("with the stub: %v\n%s", err, out)
	}
}
