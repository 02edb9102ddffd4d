//go:build cgo && isal

package decompress

/*
#cgo LDFLAGS: -ldl
#include <dlfcn.h>
#include <stddef.h>
#include <stdlib.h>
#include <isa-l/igzip_lib.h>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

static void (*mcbake_isal_init)(struct inflate_state *);
static int (*mcbake_isal_inflate)(struct inflate_state *);
static int mcbake_avx;

// mcbake_clear_upper clears the upper halves of the vector registers
// after a call into ISA-L. Its AVX-512 inflate returns with them in use,
// and every legacy-SSE instruction after that, such as those of Go's
// SHA-256 (SHA-NI), runs many times slower until something clears them:
// a cold build hashed its base at a twentieth of the speed.
static void mcbake_clear_upper(void) {
#if defined(__x86_64__)
	if (mcbake_avx)
		__asm__ __volatile__("vzeroupper" ::: "memory");
#endif
}

// mcbake_upper_in_use tells whether the upper halves of the vector
// registers are in use (XINUSE's AVX and ZMM_Hi256 bits): 1 or 0, and -1
// where the processor cannot tell. For tests.
static int mcbake_upper_in_use(void) {
#if defined(__x86_64__)
	unsigned a, b, c, d;
	if (!mcbake_avx || !__get_cpuid_count(0xd, 1, &a, &b, &c, &d) || !(a & (1 << 2)))
		return -1;
	unsigned lo, hi;
	__asm__ __volatile__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(1));
	return (lo & ((1 << 2) | (1 << 6))) != 0;
#else
	return -1;
#endif
}

// mcbake_isal_load opens libisal.so.2: 1 if it is there and new enough.
// This file allocates struct inflate_state itself, with the header's
// layout, which has been the same from ISA-L 2.23 to 2.32.1 (87368 bytes,
// crc_flag at 21172); ISAL_GZIP_NO_HDR_VER is there from 2.24. A header
// with another layout, which no library was checked against, is not used.
// The library has no version to ask; isal_read_gzip_header, new in 2.24,
// tells a library this file can use from an older one. Either way, the Go
// decoder serves instead.
static int mcbake_isal_load(void) {
	if (sizeof(struct inflate_state) != 87368 || offsetof(struct inflate_state, crc_flag) != 21172)
		return 0;
#if defined(__x86_64__)
	__builtin_cpu_init();
	mcbake_avx = __builtin_cpu_supports("avx");
#endif
	void *h = dlopen("libisal.so.2", RTLD_NOW | RTLD_LOCAL);
	if (h == NULL)
		return 0;
	mcbake_isal_init = dlsym(h, "isal_inflate_init");
	mcbake_isal_inflate = dlsym(h, "isal_inflate");
	if (mcbake_isal_init == NULL || mcbake_isal_inflate == NULL || dlsym(h, "isal_read_gzip_header") == NULL) {
		dlclose(h);
		return 0;
	}
	return 1;
}

// mcbake_isal_member starts a gzip member's deflate data, whose header
// the Go side has read: ISA-L inflates it and checks the trailer (CRC-32
// and size) that follows. ISA-L's own header parsing is not used: it fails
// on a header with a header CRC that is split between two calls.
static void mcbake_isal_member(struct inflate_state *s) {
	mcbake_isal_init(s);
	mcbake_clear_upper();
	s->crc_flag = ISAL_GZIP_NO_HDR_VER;
}

static struct inflate_state *mcbake_isal_new(void) {
	struct inflate_state *s = malloc(sizeof *s);
	if (s != NULL)
		mcbake_isal_member(s);
	return s;
}

// mcbake_isal_step inflates from in into out. The Go buffers are in the
// state only for the call: C keeps no Go pointer. With upper, it raises
// *upper to what mcbake_upper_in_use tells on return.
static int mcbake_isal_step(struct inflate_state *s, uint8_t *in, uint32_t in_len,
                            uint8_t *out, uint32_t out_len, uint32_t *consumed,
                            uint32_t *produced, int *finished, int *upper) {
	s->next_in = in;
	s->avail_in = in_len;
	s->next_out = out;
	s->avail_out = out_len;
	int ret = mcbake_isal_inflate(s);
	mcbake_clear_upper();
	if (upper != NULL) {
		int u = mcbake_upper_in_use();
		if (u > *upper)
			*upper = u;
	}
	*consumed = in_len - s->avail_in;
	*produced = out_len - s->avail_out;
	*finished = s->block_state == ISAL_BLOCK_FINISH;
	s->next_in = NULL;
	s->next_out = NULL;
	s->avail_in = 0;
	s->avail_out = 0;
	return ret;
}
*/
import "C"

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"sync"
	"unsafe"

	"github.com/klauspost/compress/gzip"
)

// ISA-L's inflate decodes gzip about three times as fast as
// klauspost/compress here (docs/design.md, "Indexing a base"). It is
// loaded when the first gzip stream is opened; without libisal.so.2, or
// with MCBAKE_GZIP_DECODER=go in the environment, the pure Go decoder
// serves.
var isalLoaded = sync.OnceValue(func() bool {
	return os.Getenv("MCBAKE_GZIP_DECODER") != "go" && C.mcbake_isal_load() == 1
})

func init() {
	pureGzip := newGzip
	newGzip = func(br *bufio.Reader) (io.ReadCloser, error) {
		if !isalLoaded() {
			return pureGzip(br)
		}
		return newISALReader(br)
	}
	gzipDecoder = func() string {
		if isalLoaded() {
			return "isa-l"
		}
		return "klauspost/compress"
	}
}

// isalReader reads a gzip stream of one or more members, as
// klauspost/compress's gzip.Reader does: each member's CRC-32 and size
// checked, and io.EOF only at the end of the last.
type isalReader struct {
	src   *bufio.Reader
	state *C.struct_inflate_state
	// in holds input read from src: in[pos:end] is not consumed yet.
	in       []byte
	pos, end int
	srcErr   error
	// out holds output for reads smaller than outMin: out[opos:oend].
	out        []byte
	opos, oend int
	// finished is set once the member has ended.
	finished bool
	// pending is an error that comes after the output in out; err is
	// returned by every read from then on.
	pending, err error
	// upper, for tests, is set to record the most that
	// mcbake_upper_in_use tells after a call into ISA-L.
	upper *C.int
}

const (
	isalIn = 128 << 10
	// outMin is the read below which output goes through out, so that a
	// tar reader's 512-byte reads do not each cross into C.
	outMin = 64 << 10
)

func newISALReader(br *bufio.Reader) (io.ReadCloser, error) {
	s := C.mcbake_isal_new()
	if s == nil {
		return nil, errors.New("isa-l: out of memory")
	}
	z := &isalReader{src: br, state: s, in: make([]byte, isalIn), out: make([]byte, outMin)}
	// gzip.NewReader reads the first header at once: an empty or
	// non-gzip stream fails here too.
	if err := z.header(); err != nil {
		z.Close()
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		if err == gzip.ErrHeader {
			return nil, err
		}
		return nil, fmt.Errorf("gzip: %w", err)
	}
	return z, nil
}

// header reads a member's gzip header with klauspost/compress's rules:
// io.EOF if the stream ends before it, gzip.ErrHeader if it is not one,
// io.ErrUnexpectedEOF if the stream ends inside it.
func (z *isalReader) header() error {
	if err := z.fill(); err != nil {
		return err // io.EOF: no other member
	}
	var fixed [10]byte
	crc, err := z.headerBytes(fixed[:], 0)
	if err != nil {
		return err
	}
	if fixed[0] != 0x1f || fixed[1] != 0x8b || fixed[2] != 8 {
		return gzip.ErrHeader
	}
	flg := fixed[3]
	const fhcrc, fextra, fname, fcomment = 1 << 1, 1 << 2, 1 << 3, 1 << 4
	if flg&fextra != 0 {
		var n [2]byte
		if crc, err = z.headerBytes(n[:], crc); err != nil {
			return err
		}
		if crc, err = z.headerBytes(make([]byte, binary.LittleEndian.Uint16(n[:])), crc); err != nil {
			return err
		}
	}
	for _, f := range [...]byte{fname, fcomment} {
		if flg&f == 0 {
			continue
		}
		// klauspost/compress reads at most 512 bytes of a name or
		// comment, its NUL included.
		for i := 0; ; i++ {
			if i == 512 {
				return gzip.ErrHeader
			}
			var c [1]byte
			if crc, err = z.headerBytes(c[:], crc); err != nil {
				return err
			}
			if c[0] == 0 {
				break
			}
		}
	}
	if flg&fhcrc != 0 {
		var sum [2]byte
		if _, err = z.headerBytes(sum[:], 0); err != nil {
			return err
		}
		if binary.LittleEndian.Uint16(sum[:]) != uint16(crc) {
			return gzip.ErrHeader
		}
	}
	if flg>>5 != 0 { // reserved
		return gzip.ErrHeader
	}
	return nil
}

// headerBytes fills b from the input and returns crc updated with it:
// io.ErrUnexpectedEOF if the stream ends first.
func (z *isalReader) headerBytes(b []byte, crc uint32) (uint32, error) {
	for len(b) > 0 {
		if err := z.fill(); err == io.EOF {
			return crc, io.ErrUnexpectedEOF
		} else if err != nil {
			return crc, err
		}
		n := copy(b, z.in[z.pos:z.end])
		crc = crc32.Update(crc, crc32.IEEETable, b[:n])
		z.pos += n
		b = b[n:]
	}
	return crc, nil
}

// fill reads more input when all of it is consumed. The source's error,
// which may come with its last bytes, is kept and returned once they are
// consumed, as it is: an io.ErrUnexpectedEOF of a download cut short is
// not the end of the stream.
func (z *isalReader) fill() error {
	if z.pos < z.end {
		return nil
	}
	if z.srcErr != nil {
		return z.srcErr
	}
	z.pos, z.end = 0, 0
	for z.end == 0 && z.srcErr == nil {
		z.end, z.srcErr = z.src.Read(z.in)
	}
	if z.end > 0 {
		return nil
	}
	return z.srcErr
}

func (z *isalReader) Read(p []byte) (int, error) {
	if z.err != nil {
		return 0, z.err
	}
	if len(p) == 0 {
		return 0, nil
	}
	if z.opos < z.oend {
		n := copy(p, z.out[z.opos:z.oend])
		z.opos += n
		return n, nil
	}
	if z.pending != nil {
		z.err = z.pending
		return 0, z.err
	}
	if len(p) >= outMin {
		n, err := z.inflate(p)
		z.err = err
		return n, err
	}
	n, err := z.inflate(z.out)
	z.opos, z.oend = 0, n
	if n > 0 {
		z.pending = err
		z.opos = copy(p, z.out[:n])
		return z.opos, nil
	}
	z.err = err
	return 0, err
}

// inflate decodes into p until it has something, the stream ends (io.EOF)
// or fails.
func (z *isalReader) inflate(p []byte) (int, error) {
	if z.state == nil {
		return 0, errors.New("gzip: read after Close")
	}
	for {
		if z.finished {
			// Another member follows, or the stream ends here.
			if err := z.header(); err != nil {
				return 0, err
			}
			C.mcbake_isal_member(z.state)
			z.finished = false
		}
		if err := z.fill(); err != nil && err != io.EOF {
			return 0, err
		}
		var consumed, produced C.uint32_t
		var finished C.int
		var in *C.uint8_t
		if z.pos < z.end {
			in = (*C.uint8_t)(unsafe.Pointer(&z.in[z.pos]))
		}
		out := p[:min(len(p), 1<<30)]
		ret := C.mcbake_isal_step(z.state, in, C.uint32_t(z.end-z.pos), (*C.uint8_t)(unsafe.Pointer(&out[0])), C.uint32_t(len(out)), &consumed, &produced, &finished, z.upper)
		z.pos += int(consumed)
		if ret < 0 {
			return int(produced), isalError(ret)
		}
		z.finished = finished != 0
		if produced > 0 {
			return int(produced), nil
		}
		if z.finished {
			continue
		}
		if consumed == 0 && z.pos == z.end && z.srcErr != nil {
			// The stream ends inside a member.
			if z.srcErr == io.EOF {
				return 0, io.ErrUnexpectedEOF
			}
			return 0, z.srcErr
		}
		if consumed == 0 && z.pos < z.end {
			return 0, errors.New("gzip: isa-l made no progress")
		}
	}
}

func isalError(ret C.int) error {
	switch ret {
	case C.ISAL_INVALID_BLOCK:
		return errors.New("gzip: invalid deflate block")
	case C.ISAL_INVALID_SYMBOL:
		return errors.New("gzip: invalid deflate symbol")
	case C.ISAL_INVALID_LOOKBACK:
		return errors.New("gzip: invalid deflate distance")
	case C.ISAL_INVALID_WRAPPER:
		return errors.New("gzip: invalid header")
	case C.ISAL_UNSUPPORTED_METHOD:
		return errors.New("gzip: unsupported compression method")
	case C.ISAL_INCORRECT_CHECKSUM:
		return errors.New("gzip: invalid checksum")
	}
	return fmt.Errorf("gzip: isa-l error %d", int(ret))
}

// Close frees the decoder; it does not close the source.
func (z *isalReader) Close() error {
	if z.state != nil {
		C.free(unsafe.Pointer(z.state))
		z.state = nil
	}
	if z.err == nil {
		z.err = errors.New("gzip: read after Close")
	}
	return nil
}

// upperInUse decodes the gzip stream gz with ISA-L and tells the most
// that mcbake_upper_in_use told after a call into it: 0 when the upper
// halves of the vector registers were always clear, 1 when not, -1 when
// the processor cannot tell. For tests (TestISALClearsUpper).
func upperInUse(gz []byte) (int, error) {
	if !isalLoaded() {
		return -1, errors.New("isa-l is not loaded")
	}
	r, err := newISALReader(bufio.NewReader(bytes.NewReader(gz)))
	if err != nil {
		return -1, err
	}
	defer r.Close()
	z := r.(*isalReader)
	upper := C.int(-1)
	z.upper = &upper
	if _, err := io.Copy(io.Discard, z); err != nil {
		return -1, err
	}
	return int(upper), nil
}
