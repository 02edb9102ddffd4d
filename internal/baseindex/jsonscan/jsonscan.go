// Package jsonscan reads JSON without building values for what it skips.
package jsonscan

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"math"
	"unsafe"
)

// Scanner reads the JSON of a tar-split line or a table of contents
// without building values for what it skips: both hold tens of thousands
// of small flat objects, which encoding/json decodes ten times slower
// than a layer's metadata is worth. It reads RFC 8259 JSON; a number it
// is asked for must be an integer. The first error sticks: every read
// after it returns a zero value, and err says what went wrong.
type Scanner struct {
	b   []byte
	i   int
	err error
}

// New returns a Scanner of b.
func New(b []byte) *Scanner { return &Scanner{b: b} }

// Err is the first error, or nil.
func (s *Scanner) Err() error { return s.err }

// Fail sets the error to err, unless there is one already.
func (s *Scanner) Fail(err error) {
	if s.err == nil {
		s.err = err
	}
}

// ErrMalformed is the error of JSON that is not RFC 8259's, or not of
// the shape asked for.
var ErrMalformed = errors.New("malformed JSON")

func (s *Scanner) fail() { s.Fail(ErrMalformed) }

// Peek skips white space and returns the next byte, or 0 at the end.
func (s *Scanner) Peek() byte {
	for s.i < len(s.b) {
		switch c := s.b[s.i]; c {
		case ' ', '\t', '\n', '\r':
			s.i++
		default:
			return c
		}
	}
	return 0
}

// expect consumes the byte c after white space.
func (s *Scanner) expect(c byte) bool {
	if s.err != nil || s.Peek() != c {
		s.fail()
		return false
	}
	s.i++
	return true
}

// Object reads an object, calling fn with each key; fn must read the
// value (Str, Int, Skip, or a nested Object or Array).
func (s *Scanner) Object(fn func(key []byte)) {
	s.list('{', '}', func() {
		key := s.Bytes()
		if s.expect(':') {
			fn(key)
		}
	})
}

// Array reads an array, calling fn to read each element.
func (s *Scanner) Array(fn func()) {
	s.list('[', ']', fn)
}

// list reads open, elements separated by commas, each read by elem, and
// close.
func (s *Scanner) list(open, close byte, elem func()) {
	if !s.expect(open) {
		return
	}
	if s.Peek() == close {
		s.i++
		return
	}
	for s.err == nil {
		elem()
		switch s.Peek() {
		case ',':
			s.i++
		case close:
			s.i++
			return
		default:
			s.fail()
		}
	}
}

// Bytes reads a string. Without escapes it is a slice of the input.
func (s *Scanner) Bytes() []byte {
	if !s.expect('"') {
		return nil
	}
	start := s.i
	// The common case, base64 and paths: no escape before the closing
	// quote, found at memchr's speed.
	if end := bytes.IndexByte(s.b[start:], '"'); end >= 0 && bytes.IndexByte(s.b[start:start+end], '\\') < 0 {
		str := s.b[start : start+end]
		if !plain(str) {
			s.fail()
			return nil
		}
		s.i = start + end + 1
		return str
	}
	for ; s.i < len(s.b); s.i++ {
		switch c := s.b[s.i]; {
		case c == '\\':
			s.i++
		case c == '"':
			s.i++
			var str string
			if err := json.Unmarshal(s.b[start-1:s.i], &str); err != nil {
				s.fail()
				return nil
			}
			return []byte(str)
		}
	}
	s.fail()
	return nil
}

// plain reports whether b has no control character, which a JSON string
// must escape.
func plain(b []byte) bool {
	for len(b) >= 8 {
		v := binary.LittleEndian.Uint64(b)
		// A byte below 0x20 has none of the bits 0xe0 set.
		if (v-0x2020202020202020)&^v&0x8080808080808080 != 0 {
			break
		}
		b = b[8:]
	}
	for _, c := range b {
		if c < 0x20 {
			return false
		}
	}
	return true
}

// Str reads a string, or null as "".
func (s *Scanner) Str() string {
	if s.Null() {
		return ""
	}
	return string(s.Bytes())
}

// View reads a string, or null as "", as a string that shares the
// input's memory: for input that is never modified.
func (s *Scanner) View() string {
	if s.Null() {
		return ""
	}
	b := s.Bytes()
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// Null consumes a null and reports whether there was one.
func (s *Scanner) Null() bool {
	if s.err == nil && s.Peek() == 'n' && len(s.b)-s.i >= 4 && string(s.b[s.i:s.i+4]) == "null" {
		s.i += 4
		return true
	}
	return false
}

// Int reads an integer, or null as 0.
func (s *Scanner) Int() int64 {
	if s.Null() || s.err != nil {
		return 0
	}
	s.Peek()
	neg := s.i < len(s.b) && s.b[s.i] == '-'
	if neg {
		s.i++
	}
	start := s.i
	var v uint64
	for ; s.i < len(s.b) && s.b[s.i] >= '0' && s.b[s.i] <= '9'; s.i++ {
		d := uint64(s.b[s.i] - '0')
		if v > (math.MaxInt64-d)/10 {
			s.fail()
			return 0
		}
		v = v*10 + d
	}
	if s.i == start || (s.i < len(s.b) && (s.b[s.i] == '.' || s.b[s.i] == 'e' || s.b[s.i] == 'E')) {
		s.fail()
		return 0
	}
	if neg {
		return -int64(v)
	}
	return int64(v)
}

// Skip reads any value.
func (s *Scanner) Skip() {
	switch s.Peek() {
	case '{':
		s.Object(func([]byte) { s.Skip() })
	case '[':
		s.Array(s.Skip)
	case '"':
		s.Bytes()
	case 't', 'f', 'n':
		for _, lit := range []string{"true", "false", "null"} {
			if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
				s.i += len(lit)
				return
			}
		}
		s.fail()
	default:
		s.number()
	}
}

// number skips a number of any form.
func (s *Scanner) number() {
	start := s.i
	for ; s.i < len(s.b); s.i++ {
		c := s.b[s.i]
		if (c < '0' || c > '9') && c != '-' && c != '+' && c != '.' && c != 'e' && c != 'E' {
			break
		}
	}
	if s.i == start || !json.Valid(s.b[start:s.i]) {
		s.fail()
	}
}

// End checks that nothing but white space is left.
func (s *Scanner) End() error {
	if s.err == nil {
		s.Peek()
		if s.i != len(s.b) { // a NUL byte is no end (Peek returns 0 for both)
			s.fail()
		}
	}
	return s.err
}
