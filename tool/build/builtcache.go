package build

import (
	"bufio"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/debug"
	"sync"
	"syscall"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/internal/ocilayout"
)

// builtCache remembers the new layers a build compressed, so that a build
// whose layer has the same tar (the same diff ID) copies the blob instead
// of compressing it again (docs/design.md, The warm path). An entry is
// CACHE/built/sha256/KEY, KEY covering builtCacheSchema, the compressor
// (compressorID) and the diff ID. What is read from it is checked: its
// blob is decompressed and must be the diff ID's tar, byte for byte, or
// the layer is compressed again. Its zero value remembers nothing.
type builtCache struct {
	dir, compressor string
	compression     string
}

// builtCacheSchema names the key's layout; change it when the key changes,
// or what a layer of the same tar compresses to (v2: the revert guard's
// binary spliced in from its deflate encoding, layer.go's splicingGzip).
const builtCacheSchema = "mcbake-built-layer-v2"

// builtTempPrefix is the prefix of the cache's temporary files, the
// base index cache's (docs/limits.md, "Faults").
const builtTempPrefix = ".mcbake-cache-"

// compressModule is the version and checksum of the compression module
// the binary was built with, "" when the binary does not record it.
var compressModule = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return ""
	}
	for _, d := range bi.Deps {
		if d.Path != "github.com/klauspost/compress" {
			continue
		}
		if r := d.Replace; r != nil {
			d = r
		}
		if d.Sum == "" {
			return ""
		}
		return d.Path + " " + d.Version + " " + d.Sum
	}
	return ""
})

// compressorID names what compressor (below) makes of a tar: the
// algorithm, its settings and the module's version. It must change when
// compressor's settings do.
func compressorID(compression string) (string, error) {
	var id string
	switch compression {
	case "", Gzip:
		id = "gzip DefaultCompression"
	case Zstd:
		id = "zstd EncoderConcurrency(1) SpeedDefault"
	default:
		return "", fmt.Errorf("compression %q: want gzip or zstd", compression)
	}
	return id + " " + compressModule(), nil
}

func newBuiltCache(cacheDir, compression string) (builtCache, error) {
	id, err := compressorID(compression)
	if err != nil || cacheDir == "" || compressModule() == "" {
		return builtCache{}, err
	}
	return builtCache{dir: filepath.Join(cacheDir, "built", "sha256"), compressor: id, compression: compression}, nil
}

// empty reports whether the cache holds no entry at all (a CI runner's
// first build): then writeLayer does not hash the tar a first time only
// to look it up (12 ms of a cold build, for the guard's 12 MB binary), and
// stores what it compressed. Anything in the directory, even a temporary
// file, counts as an entry.
func (c builtCache) empty() bool {
	d, err := os.Open(c.dir)
	if err != nil {
		return errors.Is(err, fs.ErrNotExist)
	}
	defer d.Close()
	_, err = d.Readdirnames(1)
	return err == io.EOF
}

func (c builtCache) file(diffID digest.Digest) string {
	h := sha256.New()
	h.Write([]byte(builtCacheSchema + "\x00" + c.compressor + "\x00" + diffID.String()))
	return filepath.Join(c.dir, hex.EncodeToString(h.Sum(nil)))
}

// lookup copies the cached blob of the tar diffID, tarSize bytes, into
// a temporary file in dir, checking on the way that it decompresses to
// that tar. Any problem, a missing entry included, reports false.
func (c builtCache) lookup(dir string, diffID digest.Digest, tarSize int64) (*layerFile, bool) {
	// Non-blocking, and a regular file only: a fifo there must not hang
	// the build.
	f, err := os.OpenFile(c.file(diffID), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	out, err := os.CreateTemp(dir, "layer-*.blob")
	if err != nil {
		return nil, false
	}
	lf, known := c.copyKnown(f, out, diffID)
	if !known {
		if _, err = f.Seek(0, io.SeekStart); err == nil {
			err = out.Truncate(0)
		}
		if err == nil {
			_, err = out.Seek(0, io.SeekStart)
		}
		if err == nil {
			lf, err = c.copyChecked(f, out, diffID, tarSize)
		}
		if err == nil {
			c.storeSum(diffID, lf)
		}
	}
	if err = errors.Join(err, out.Close()); err != nil {
		os.Remove(out.Name())
		return nil, false
	}
	lf.path = out.Name()
	return lf, true
}

// The sum file beside an entry (KEY.sum) records the blob's digest, size
// and media type, written once the blob was known to decompress to the
// diff ID's tar (when this build compressed it, or checked it). A blob
// that has its recorded digest is that blob: it is copied without being
// decompressed again, which for a layer with the revert guard's 12 MB
// binary is most of a warm build. Any other blob is checked in full.
func (c builtCache) sumFile(diffID digest.Digest) string { return c.file(diffID) + ".sum" }

// copyKnown copies f to out when f is the blob the sum file records;
// false (out partly written) otherwise.
func (c builtCache) copyKnown(f io.Reader, out io.Writer, diffID digest.Digest) (*layerFile, bool) {
	sf, err := os.OpenFile(c.sumFile(diffID), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false
	}
	defer sf.Close()
	if fi, err := sf.Stat(); err != nil || !fi.Mode().IsRegular() {
		return nil, false
	}
	b, err := io.ReadAll(io.LimitReader(sf, 512))
	if err != nil {
		return nil, false
	}
	var want digest.Digest
	var size int64
	var mediaType string
	if n, err := fmt.Sscanf(string(b), "%s %d %s\n", &want, &size, &mediaType); n != 3 || err != nil || want.Validate() != nil {
		return nil, false
	}
	if want := map[string]string{"": mediaTypeGzip, Gzip: mediaTypeGzip, Zstd: mediaTypeZstd}[c.compression]; mediaType != want {
		return nil, false
	}
	h := sha256.New()
	n, err := io.Copy(io.MultiWriter(out, h), io.LimitReader(f, size+1))
	if err != nil || n != size || digest.NewDigest(digest.SHA256, h) != want {
		return nil, false
	}
	return &layerFile{digest: want, diffID: diffID, size: size, mediaType: mediaType}, true
}

// storeSum records lf's blob in the sum file of its entry.
func (c builtCache) storeSum(diffID digest.Digest, lf *layerFile) {
	err := atomicdir.WriteCacheFile(c.sumFile(diffID), builtTempPrefix, func(f *os.File) error {
		_, err := fmt.Fprintf(f, "%s %d %s\n", lf.digest, lf.size, lf.mediaType)
		return err
	})
	if err != nil {
		slog.Warn("the new layer's sum could not be cached; going on without it", "err", err)
	}
}

func (c builtCache) copyChecked(f io.Reader, out io.Writer, diffID digest.Digest, tarSize int64) (*layerFile, error) {
	blobHash := sha256.New()
	counter := &ocilayout.CountWriter{W: io.MultiWriter(out, blobHash)}
	// A byte reader: the decompressor reads no further than its stream.
	blob := bufio.NewReader(io.TeeReader(f, counter))
	tarHash := sha256.New()
	var mediaType string
	switch c.compression {
	case "", Gzip:
		zr, err := gzip.NewReader(blob)
		if err != nil {
			return nil, err
		}
		zr.Multistream(false)
		if err := copySized(tarHash, zr, tarSize); err != nil {
			return nil, err
		}
		mediaType = mediaTypeGzip
	case Zstd:
		zr, err := zstd.NewReader(blob, zstd.WithDecoderConcurrency(1))
		if err != nil {
			return nil, err
		}
		defer zr.Close()
		if err := copySized(tarHash, zr, tarSize); err != nil {
			return nil, err
		}
		mediaType = mediaTypeZstd
	}
	// What compressor wrote ends where the stream does.
	if _, err := blob.ReadByte(); err != io.EOF {
		return nil, errors.New("data after the compressed stream")
	}
	if got := digest.NewDigest(digest.SHA256, tarHash); got != diffID {
		return nil, fmt.Errorf("decompresses to %s", got)
	}
	return &layerFile{digest: digest.NewDigest(digest.SHA256, blobHash), diffID: diffID, size: counter.N, mediaType: mediaType}, nil
}

// copySized copies exactly n bytes from r to w, and checks that r ends
// there.
func copySized(w io.Writer, r io.Reader, n int64) error {
	if _, err := io.CopyN(w, r, n); err != nil {
		return err
	}
	if m, err := io.Copy(io.Discard, io.LimitReader(r, 1)); err != nil || m != 0 {
		return errors.New("longer than its tar")
	}
	return nil
}

// store remembers lf's blob. A cache that cannot be written only costs
// time: it is a warning.
func (c builtCache) store(lf *layerFile) {
	err := atomicdir.WriteCacheFile(c.file(lf.diffID), builtTempPrefix, func(f *os.File) error {
		src, err := os.Open(lf.path)
		if err != nil {
			return err
		}
		defer src.Close()
		_, err = io.Copy(f, src)
		return err
	})
	if err != nil {
		slog.Warn("the new layer could not be cached; going on without it", "err", err)
		return
	}
	c.storeSum(lf.diffID, lf)
}
