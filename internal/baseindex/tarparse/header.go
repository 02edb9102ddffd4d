// Package tarparse reads tar headers and streams from bytes, quickly.
//
// It reads them as archive/tar does for the fields mcbake reads, at a
// fraction of its cost.
package tarparse

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"
)

// BlockSize is a tar block's size.
const BlockSize = 512

// ErrEndOfArchive is what readHeader returns for a zero block.
var ErrEndOfArchive = errors.New("end of archive")

// errShortEOF is what a stream's next returns when the stream ends after
// some of the bytes asked for: the header block's reader makes it
// io.ErrUnexpectedEOF, the padding's io.EOF, as archive/tar does.
var errShortEOF = errors.New("tar stream ends inside a block")

// ErrSparse is what readHeader returns for a sparse file (GNU's old
// format, or PAX's GNU.sparse records), whose content archive/tar expands
// from a map: mcbake reads such a layer with archive/tar.
var ErrSparse = errors.New("a sparse file")

// maxSpecial is the most data a PAX extended header or a GNU long name or
// link may have, as archive/tar limits it.
const maxSpecial = 1 << 20

// ParseHeader parses into hdr the header blocks of one tar entry (see
// readHeader): a tar-split segment holds exactly such blocks. Its name and
// link name may share the blocks' memory.
func ParseHeader(blocks []byte, hdr *tar.Header) error {
	next := func(n int64) ([]byte, error) {
		if n > int64(len(blocks)) {
			if n == BlockSize {
				return nil, errors.New("truncated tar header")
			}
			return nil, errors.New("truncated tar header data")
		}
		b := blocks[:n]
		blocks = blocks[n:]
		return b, nil
	}
	pad, err := readHeader(next, hdr)
	if err != nil {
		return err
	}
	if pad > int64(len(blocks)) {
		return errors.New("truncated tar header data")
	}
	if !AllZero(blocks[pad:]) {
		return errors.New("data after a tar header")
	}
	return nil
}

// readHeader reads into hdr the header blocks of one tar entry — PAX
// extended headers and GNU long names first, then the entry's own header —
// into the fields mcbake reads: name, type flag, mode, owners, size and
// link name, with archive/tar's rules (USTAR prefixes, base-256 numbers,
// PAX path/linkpath/size/uid/gid records, "\x00" type flags, a PAX global
// header returned as an entry of its own). archive/tar's reader checks far
// more than mcbake needs (each header byte, to guess the format) at a cost
// that shows at a hundred thousand headers. next returns the next n bytes
// (io.EOF when there are none, errShortEOF when there are fewer, and any
// other error of the stream as it is);
// hdr's name and link name may share their memory. It returns
// ErrEndOfArchive for a zero block, and ErrSparse for a sparse file. pad
// is the padding after a PAX global header, which is returned before its
// padding is read (as archive/tar does: a stream that ends in it ends
// after the entry), for the caller to skip.
func readHeader(next func(n int64) ([]byte, error), hdr *tar.Header) (pad int64, _ error) {
	var pax map[string]string
	var longName, longLink string
	for {
		blk, err := next(BlockSize)
		if err == errShortEOF {
			err = io.ErrUnexpectedEOF
		}
		if err != nil {
			return 0, err
		}
		if AllZero(blk) {
			return 0, ErrEndOfArchive
		}
		if err := checksum(blk); err != nil {
			return 0, err
		}
		typ := blk[156]
		size, err := parseNumber(blk[124:136])
		if err != nil {
			return 0, fmt.Errorf("size: %w", err)
		}
		switch typ {
		case tar.TypeXHeader, tar.TypeXGlobalHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
			if size < 0 {
				return 0, fmt.Errorf("a %q header with a negative size, %d", typ, size)
			}
			if size > maxSpecial {
				// archive/tar reads one byte more than the limit before
				// it refuses: a stream that ends first is truncated.
				if _, err := next(maxSpecial + 1); err == io.EOF || err == errShortEOF {
					return 0, io.ErrUnexpectedEOF
				} else if err != nil {
					return 0, err
				}
				return 0, fmt.Errorf("a %q header with %d bytes of data (at most %d)", typ, size, maxSpecial)
			}
			var global tar.Header
			if typ == tar.TypeXGlobalHeader {
				// Named as its header block says (next reuses blk's
				// memory).
				if err := header(&global, blk, typ, 0); err != nil {
					return 0, err
				}
				global.Name = strings.Clone(global.Name)
			}
			data, err := next(size)
			if err == io.EOF || err == errShortEOF {
				err = io.ErrUnexpectedEOF
			}
			if err != nil {
				return 0, err
			}
			switch typ {
			case tar.TypeXHeader:
				// Each replaces the records of the one before, as in
				// archive/tar.
				if pax, err = parsePAX(data); err != nil {
					return 0, err
				}
			case tar.TypeXGlobalHeader:
				// An entry of its own, which applies to no other, named
				// by its own path record when it has one, as in
				// archive/tar (which ignores its other records' errors).
				records, err := parsePAX(data)
				if err != nil {
					return 0, err
				}
				if p := records["path"]; p != "" {
					global.Name = p
				}
				*hdr = tar.Header{Typeflag: typ, Name: global.Name}
				return -size & (BlockSize - 1), nil
			case tar.TypeGNULongName:
				longName = cString(data)
			default:
				longLink = cString(data)
			}
			// The padding, once data is parsed: next may reuse its memory.
			// A stream that ends in it ends the archive, as in archive/tar;
			// one that fails in it fails.
			if _, err := next(-size & (BlockSize - 1)); err == io.EOF || err == errShortEOF {
				return 0, io.EOF
			} else if err != nil {
				return 0, err
			}
			continue
		case tar.TypeGNUSparse:
			return 0, ErrSparse
		}
		if err := header(hdr, blk, typ, size); err != nil {
			return 0, err
		}
		// archive/tar checks the header block's size before the PAX
		// records replace it, and again after.
		if dataSize(hdr) < 0 {
			return 0, fmt.Errorf("negative size %d", hdr.Size)
		}
		// PAX records first: a GNU long name or link wins over them, as
		// in archive/tar.
		if err := applyPAX(hdr, pax); err != nil {
			return 0, err
		}
		if longName != "" {
			hdr.Name = longName
		}
		if longLink != "" {
			hdr.Linkname = longLink
		}
		if hdr.Typeflag == tar.TypeRegA {
			hdr.Typeflag = tar.TypeReg
			if strings.HasSuffix(hdr.Name, "/") {
				hdr.Typeflag = tar.TypeDir
			}
		}
		if dataSize(hdr) < 0 {
			return 0, fmt.Errorf("negative size %d", hdr.Size)
		}
		return 0, nil
	}
}

// dataSize is the size of the content that follows hdr in a tar stream:
// archive/tar reads none after the header-only types, whatever their size
// field says.
func dataSize(hdr *tar.Header) int64 {
	switch hdr.Typeflag {
	case tar.TypeLink, tar.TypeSymlink, tar.TypeChar, tar.TypeBlock, tar.TypeDir, tar.TypeFifo, tar.TypeXGlobalHeader:
		return 0
	}
	return hdr.Size
}

// header parses an entry's own header block into hdr. Its name and link
// name share blk's memory (see nulString).
func header(hdr *tar.Header, blk []byte, typ byte, size int64) error {
	*hdr = tar.Header{Typeflag: typ, Size: size, Name: nulString(blk[0:100]), Linkname: nulString(blk[157:257])}
	mode, err := parseNumber(blk[100:108])
	if err != nil {
		return fmt.Errorf("mode: %w", err)
	}
	hdr.Mode = mode
	for _, f := range []struct {
		v    *int
		b    []byte
		name string
	}{{&hdr.Uid, blk[108:116], "uid"}, {&hdr.Gid, blk[116:124], "gid"}} {
		n, err := parseNumber(f.b)
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		*f.v = int(n)
	}
	// USTAR and PAX (magic "ustar\x00"; archive/tar reads no version)
	// may split a long name into a prefix; GNU ("ustar  \x00") keeps its
	// access and change times there.
	var prefix string
	switch {
	case string(blk[257:263]) == "ustar\x00" && string(blk[508:512]) == "tar\x00":
		prefix = cString(blk[345:476]) // star: a shorter prefix
	case string(blk[257:263]) == "ustar\x00":
		prefix = cString(blk[345:500])
	case string(blk[257:265]) == "ustar  \x00" && badGNUTimes(blk):
		// Go's writer before Go 1.8 wrote a USTAR prefix into GNU
		// headers: archive/tar reads it as one when the times do not
		// parse and it is ASCII.
		if p := cString(blk[345:500]); isASCII(p) {
			prefix = p
		}
	}
	if prefix != "" {
		hdr.Name = prefix + "/" + hdr.Name
	}
	return nil
}

// badGNUTimes reports whether a GNU header's access or change time, each
// read only when its first byte is not NUL, fails to parse.
func badGNUTimes(blk []byte) bool {
	for _, f := range [...][]byte{blk[345:357], blk[357:369]} {
		if f[0] != 0 {
			if _, err := parseNumber(f); err != nil {
				return true
			}
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return false
		}
	}
	return true
}

// checksum checks a header block's checksum, which archive/tar accepts
// as the unsigned or signed sum of its bytes with the field as spaces.
func checksum(blk []byte) error {
	if blk[148]&0x80 != 0 {
		return errors.New("checksum: a base-256 number") // archive/tar reads it as octal only
	}
	want, err := parseNumber(blk[148:156])
	if err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	unsigned, high := byteSum(blk[:148])
	u2, h2 := byteSum(blk[156:BlockSize])
	unsigned += u2 + 8*' '
	high += h2
	if want != unsigned && want != unsigned-256*high {
		return errors.New("tar header checksum mismatch")
	}
	return nil
}

// byteSum returns the sum of b's bytes and how many are 0x80 or more, a
// word at a time.
func byteSum(b []byte) (sum, high int64) {
	const lanes, highBits = 0x00ff00ff00ff00ff, 0x8080808080808080
	var acc uint64 // four 16-bit sums; 512 bytes cannot overflow them
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		acc += v&lanes + (v>>8)&lanes
		high += int64(bits.OnesCount64(v & highBits))
		b = b[8:]
	}
	sum = int64(acc&0xffff + (acc>>16)&0xffff + (acc>>32)&0xffff + acc>>48)
	for _, c := range b {
		sum += int64(c)
		if c >= 0x80 {
			high++
		}
	}
	return sum, high
}

// parseNumber parses a numeric field: octal, space or NUL terminated, or
// base-256 (the high bit of the first byte set), as archive/tar does.
func parseNumber(b []byte) (int64, error) {
	if len(b) > 0 && b[0]&0x80 != 0 {
		var v int64
		neg := b[0]&0x40 != 0
		for i, c := range b {
			if i == 0 {
				c &= 0x7f
				if neg {
					c |= 0x80
				}
			}
			if neg {
				c ^= 0xff
			}
			if v > (1<<63-1)>>8 {
				return 0, errors.New("base-256 number overflows")
			}
			v = v<<8 | int64(c)
		}
		if neg {
			v = -v - 1
		}
		return v, nil
	}
	// Unused fields are NULs, and fields are padded with spaces or NULs
	// on either side.
	b = bytes.Trim(b, " \x00")
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	var v int64
	for _, c := range b {
		if c < '0' || c > '7' || v > (1<<63-1)>>3 {
			return 0, fmt.Errorf("invalid octal %q", b)
		}
		v = v<<3 | int64(c-'0')
	}
	return v, nil
}

// parsePAX parses a PAX extended header's records with archive/tar's
// rules.
func parsePAX(data []byte) (map[string]string, error) {
	pax := map[string]string{}
	for s := string(data); len(s) > 0; {
		nStr, rest, ok := strings.Cut(s, " ")
		n, err := strconv.ParseInt(nStr, 10, 0)
		if !ok || err != nil || n < 5 || n > int64(len(s)) || n <= int64(len(nStr)+1) {
			return nil, errors.New("invalid PAX record")
		}
		n -= int64(len(nStr) + 1)
		if rest[n-1] != '\n' {
			return nil, errors.New("invalid PAX record")
		}
		k, v, ok := strings.Cut(rest[:n-1], "=")
		if !ok || !validPAXRecord(k, v) {
			return nil, errors.New("invalid PAX record")
		}
		pax[k] = v
		s = rest[n:]
	}
	return pax, nil
}

// validPAXRecord is archive/tar's check of a PAX record.
func validPAXRecord(k, v string) bool {
	if k == "" || strings.Contains(k, "=") {
		return false
	}
	switch k {
	case "path", "linkpath", "uname", "gname":
		return !strings.Contains(v, "\x00")
	}
	return !strings.Contains(k, "\x00")
}

// applyPAX applies the PAX records mcbake reads, in a fixed order, so
// that of two bad records the same one is named every time.
func applyPAX(hdr *tar.Header, pax map[string]string) error {
	if len(pax) == 0 {
		return nil
	}
	for k := range pax {
		if strings.HasPrefix(k, "GNU.sparse.") {
			return ErrSparse
		}
	}
	for _, k := range [...]string{"path", "linkpath", "size", "uid", "gid"} {
		v := pax[k]
		if v == "" {
			continue // the header block's value stands, as in archive/tar
		}
		var err error
		switch k {
		case "path":
			hdr.Name = v
		case "linkpath":
			hdr.Linkname = v
		case "size":
			hdr.Size, err = strconv.ParseInt(v, 10, 64)
		default:
			var n int64
			if n, err = strconv.ParseInt(v, 10, 64); err == nil && (n != int64(int(n))) {
				err = errors.New("out of range")
			}
			if k == "uid" {
				hdr.Uid = int(n)
			} else {
				hdr.Gid = int(n)
			}
		}
		if err != nil {
			return fmt.Errorf("PAX record %s=%q: %w", k, v, err)
		}
	}
	return nil
}

// nulString returns b up to its first NUL as a string that shares b's
// memory: ParseHeader's caller reads the header before it reuses the
// blocks, and keeps no string of it.
func nulString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// cString returns b up to its first NUL.
func cString(b []byte) string {
	if i := bytes.IndexByte(b, 0); i >= 0 {
		b = b[:i]
	}
	return string(b)
}

func AllZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
