package baseindex

import (
	"archive/tar"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
	"strconv"
	"strings"
	"unsafe"
)

// blockSize is a tar block's size.
const blockSize = 512

// errEndOfArchive is what parseHeader returns for a zero block.
var errEndOfArchive = errors.New("end of archive")

// parseHeader parses into hdr the header blocks of one tar entry — PAX extended
// headers and GNU long names first, then the entry's own header — into
// the fields mcbake reads: name, type flag, mode, owners, size and link
// name, with archive/tar's rules (USTAR prefixes, base-256 numbers, PAX
// path/linkpath/size/uid/gid records, "\x00" type flags). A tar-split
// segment holds exactly such blocks, and archive/tar's reader checks far
// more than mcbake needs (each header byte decoded as UTF-8) at a cost
// that shows at a hundred thousand headers. It returns errEndOfArchive
// for a zero block.
func parseHeader(blocks []byte, hdr *tar.Header) error {
	var pax map[string]string
	var longName, longLink string
	for {
		if len(blocks) < blockSize {
			return errors.New("truncated tar header")
		}
		blk := blocks[:blockSize]
		blocks = blocks[blockSize:]
		if allZero(blk) {
			return errEndOfArchive
		}
		if err := checksum(blk); err != nil {
			return err
		}
		typ := blk[156]
		size, err := parseNumber(blk[124:136])
		if err != nil {
			return fmt.Errorf("size: %w", err)
		}
		switch typ {
		case tar.TypeXHeader, tar.TypeGNULongName, tar.TypeGNULongLink:
			n := (size + blockSize - 1) / blockSize * blockSize
			if size < 0 || n > int64(len(blocks)) {
				return errors.New("truncated tar header data")
			}
			data := blocks[:size]
			blocks = blocks[n:]
			switch typ {
			case tar.TypeXHeader:
				if pax, err = parsePAX(data, pax); err != nil {
					return err
				}
			case tar.TypeGNULongName:
				longName = cString(data)
			default:
				longLink = cString(data)
			}
			continue
		}
		if err := header(hdr, blk, typ, size); err != nil {
			return err
		}
		if longName != "" {
			hdr.Name = longName
		}
		if longLink != "" {
			hdr.Linkname = longLink
		}
		if err := applyPAX(hdr, pax); err != nil {
			return err
		}
		if hdr.Typeflag == tar.TypeRegA {
			hdr.Typeflag = tar.TypeReg
			if strings.HasSuffix(hdr.Name, "/") {
				hdr.Typeflag = tar.TypeDir
			}
		}
		if !allZero(blocks) {
			return errors.New("data after a tar header")
		}
		return nil
	}
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
	// USTAR and PAX (magic "ustar\x00", version "00") may split a long
	// name into a prefix; GNU ("ustar  \x00") keeps other fields there.
	if string(blk[257:263]) == "ustar\x00" && string(blk[263:265]) == "00" {
		if string(blk[508:512]) == "tar\x00" { // star: a shorter prefix
			if p := cString(blk[345:476]); p != "" {
				hdr.Name = p + "/" + hdr.Name
			}
		} else if p := cString(blk[345:500]); p != "" {
			hdr.Name = p + "/" + hdr.Name
		}
	}
	return nil
}

// checksum checks a header block's checksum, which archive/tar accepts
// as the unsigned or signed sum of its bytes with the field as spaces.
func checksum(blk []byte) error {
	want, err := parseNumber(blk[148:156])
	if err != nil {
		return fmt.Errorf("checksum: %w", err)
	}
	unsigned, high := byteSum(blk[:148])
	u2, h2 := byteSum(blk[156:blockSize])
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

// parsePAX adds a PAX extended header's records to pax.
func parsePAX(data []byte, pax map[string]string) (map[string]string, error) {
	if pax == nil {
		pax = map[string]string{}
	}
	for len(data) > 0 {
		sp := bytes.IndexByte(data, ' ')
		if sp <= 0 {
			return nil, errors.New("invalid PAX record")
		}
		n, err := strconv.Atoi(string(data[:sp]))
		if err != nil || n <= sp || n > len(data) || data[n-1] != '\n' {
			return nil, errors.New("invalid PAX record")
		}
		k, v, ok := strings.Cut(string(data[sp+1:n-1]), "=")
		if !ok {
			return nil, errors.New("invalid PAX record")
		}
		pax[k] = v
		data = data[n:]
	}
	return pax, nil
}

// applyPAX applies the PAX records mcbake reads.
func applyPAX(hdr *tar.Header, pax map[string]string) error {
	for k, v := range pax {
		var err error
		switch k {
		case "path":
			hdr.Name = v
		case "linkpath":
			hdr.Linkname = v
		case "size":
			hdr.Size, err = strconv.ParseInt(v, 10, 64)
		case "uid", "gid":
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
// memory: parseHeader's caller reads the header before it reuses the
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

func allZero(b []byte) bool {
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
