package testbase

import (
	"archive/tar"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
)

// SizeOptions adds bulk content for benchmarks: Files regular files holding
// TotalBytes bytes in all, spread over Layers gzip layers, under
// usr/lib/testbase-bulk, usr/share/testbase-bulk and (one file in 50)
// etc/testbase-bulk. Sizes are log-normally distributed; content is a mix
// of random bytes and random words, about 2-3x compressible by gzip. Both
// come from a PRNG with a fixed seed: the same options give the same bytes.
type SizeOptions struct {
	TotalBytes int64
	Files      int
	Layers     int
}

const (
	bulkSeed      = 0x7465737462617365 // "testbase"
	bulkChunk     = 4096
	randomPercent = 15 // share of chunks that are incompressible
)

func (s SizeOptions) validate() error {
	switch {
	case s.TotalBytes < 0:
		return fmt.Errorf("size: negative total bytes %d", s.TotalBytes)
	case s.Files <= 0:
		return fmt.Errorf("size: files must be positive, got %d", s.Files)
	case s.Layers <= 0 || s.Layers > s.Files:
		return fmt.Errorf("size: layers must be between 1 and files (%d), got %d", s.Files, s.Layers)
	}
	return nil
}

// specs splits the bulk files into contiguous, equal-count layers.
func (s SizeOptions) specs() []layerSpec {
	sizes := s.fileSizes()
	var out []layerSpec
	for k := range s.Layers {
		lo, hi := k*s.Files/s.Layers, (k+1)*s.Files/s.Layers
		spec := layerSpec{compression: "gzip", comment: fmt.Sprintf("testbase: bulk content %d/%d", k+1, s.Layers)}
		for i := lo; i < hi; i++ {
			spec.files = append(spec.files, bulkEntry(i, sizes[i]))
		}
		out = append(out, spec)
	}
	return out
}

func bulkEntry(i int, size int64) entry {
	e := entry{typ: tar.TypeReg, mode: 0o644, bulk: &bulkFile{index: uint64(i), size: size}}
	switch {
	case i%50 == 0:
		e.name = fmt.Sprintf("etc/testbase-bulk/conf-%06d.conf", i)
	case i%2 == 0:
		e.name = fmt.Sprintf("usr/lib/testbase-bulk/pkg%04d/lib%06d.so", i/200, i)
		e.mode = 0o755
	default:
		e.name = fmt.Sprintf("usr/share/testbase-bulk/pkg%04d/doc%06d.txt", i/200, i)
	}
	return e
}

// fileSizes draws log-normal weights and scales them so the sizes add up
// to TotalBytes exactly.
func (s SizeOptions) fileSizes() []int64 {
	rng := rand.New(rand.NewPCG(bulkSeed, 0))
	weights := make([]float64, s.Files)
	var sum float64
	for i := range weights {
		weights[i] = math.Exp(rng.NormFloat64())
		sum += weights[i]
	}
	sizes := make([]int64, s.Files)
	var total int64
	for i, w := range weights {
		sizes[i] = int64(float64(s.TotalBytes) * w / sum)
		total += sizes[i]
	}
	for i := 0; total < s.TotalBytes; i = (i + 1) % s.Files {
		sizes[i]++
		total++
	}
	return sizes
}

// bulkFile is generated content: file index selects the PRNG stream.
type bulkFile struct {
	index uint64
	size  int64
}

var words = []string{
	"systemd", "service", "kubelet", "container", "runtime", "network", "config",
	"ostree", "deployment", "rpm", "package", "library", "module", "kernel",
	"device", "mount", "volume", "image", "layer", "manifest", "digest", "node",
	"cluster", "operator", "machine", "pool", "update", "rollback", "revert",
	"default", "enabled", "disabled", "path", "file", "directory", "owner",
	"group", "mode", "label", "selinux", "context", "policy", "registry",
	"mirror", "socket", "target", "timer", "unit", "drop-in", "preset", "the",
	"a", "of", "to", "and", "in", "is", "for", "on", "with", "=", "#", "0", "1",
}

// writeTo writes the file's content in chunks; each chunk is random bytes
// or random words.
func (b *bulkFile) writeTo(w io.Writer) error {
	rng := rand.New(rand.NewPCG(bulkSeed, b.index+1))
	buf := make([]byte, bulkChunk)
	for left := b.size; left > 0; {
		n := min(left, bulkChunk)
		chunk := buf[:n]
		if rng.IntN(100) < randomPercent {
			fillRandom(rng, chunk)
		} else {
			fillWords(rng, chunk)
		}
		if _, err := w.Write(chunk); err != nil {
			return err
		}
		left -= n
	}
	return nil
}

func fillRandom(rng *rand.Rand, p []byte) {
	var tmp [8]byte
	for i := 0; i < len(p); i += 8 {
		binary.LittleEndian.PutUint64(tmp[:], rng.Uint64())
		copy(p[i:], tmp[:])
	}
}

func fillWords(rng *rand.Rand, p []byte) {
	for i := 0; i < len(p); {
		i += copy(p[i:], words[rng.IntN(len(words))])
		if i < len(p) {
			p[i] = ' '
			if rng.IntN(10) == 0 {
				p[i] = '\n'
			}
			i++
		}
	}
}
