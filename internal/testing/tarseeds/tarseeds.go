// Package tarseeds makes tar archives that tests and fuzz targets start from.
//
// Its archives come from real tools (GNU tar), so that the parsers are
// judged on what those tools write, not on what a test believes they do.
package tarseeds

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
)

// GNUSparse returns GNU tar's archives of a sparse file, in its GNU and
// PAX formats (none when there is no GNU tar).
func GNUSparse(tb testing.TB) [][]byte {
	tb.Helper()
	if _, err := exec.LookPath("tar"); err != nil {
		return nil
	}
	dir := tb.TempDir()
	f, err := os.Create(filepath.Join(dir, "sparse"))
	if err != nil {
		tb.Fatal(err)
	}
	f.WriteAt([]byte("head"), 0)
	f.WriteAt([]byte("tail"), 1<<20)
	f.Close()
	var seeds [][]byte
	for _, format := range []string{"gnu", "posix"} {
		out := filepath.Join(dir, format+".tar")
		if b, err := exec.Command("tar", "--sparse", "--format="+format, "-C", dir, "-cf", out, "sparse").CombinedOutput(); err != nil {
			tb.Fatalf("tar --sparse: %v: %s", err, b)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			tb.Fatal(err)
		}
		seeds = append(seeds, b)
	}
	return seeds
}
