//go:build cgo && isal

package decompress

import (
	"bufio"
	"bytes"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/klauspost/compress/gzip"
)

// readAllWith reads the gzip stream b with open, in reads of size n.
func readAllWith(open func(*bufio.Reader) (io.ReadCloser, error), b []byte, n int) ([]byte, error) {
	z, err := open(bufio.NewReader(bytes.NewReader(b)))
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
	want, werr := readAllWith(pureGzip, b, 1<<16)
	for _, n := range []int{512, 1 << 16, 1 << 20} {
		got, gerr := readAllWith(newISALReader, b, n)
		switch {
		case werr == nil && gerr != nil:
			t.Fatalf("reads of %d: isa-l failed: %v (klauspost/compress read %d bytes)", n, gerr, len(want))
		case werr != nil && gerr == nil:
			t.Fatalf("reads of %d: isa-l read %d bytes where klauspost/compress failed: %v", n, len(got), werr)
		case werr == nil && !bytes.Equal(got, want):
			t.Fatalf("reads of %d: isa-l read %d bytes, klauspost/compress %d, not the same", n, len(got), len(want))
		}
	}
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
	return append(out, crc, size, body)
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
