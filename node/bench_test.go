package node_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/node"
)

// BenchmarkPrepare measures Prepare on a node that reverts from a layered
// image baking a MachineConfig of N files under /etc (1,000 a directory)
// to its base, which has none of them, on deployments made by real
// ostree: "first" writes the N files (and their directories) into the
// staged deployment, "again" is the run after it, which writes nothing.
// Besides the time and allocations, it reports the peak resident memory
// of the process during the Prepare (peak-RSS-MB: VmHWM, reset before
// it; the staging before it is not counted). One Prepare a benchmark
// operation; the staging is not timed. make bench runs it once each for
// N = 2,000 and 100,000 (hack/bench.sh).
func BenchmarkPrepare(b *testing.B) {
	for _, n := range []int{2000, 100000} {
		for _, run := range []string{"first", "again"} {
			b.Run(fmt.Sprintf("paths=%d/%s", n, run), func(b *testing.B) {
				mc := benchMC(b, n)
				var peak float64
				for i := 0; i < b.N; i++ {
					b.StopTimer()
					st, mcs, _ := setupMC(b, mc, nil, ostreetest.StageOptions{MCDWrite: func(string) error { return nil }})
					s, booted, staged := deployments(b, st)
					if run == "again" {
						if _, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs}); err != nil {
							b.Fatal(err)
						}
					}
					runtime.GC()
					debug.FreeOSMemory()
					resetPeakRSS(b)
					b.StartTimer()
					rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
					b.StopTimer()
					if err != nil {
						b.Fatal(err)
					}
					if w := len(rec.Written()); (run == "first") != (w >= n) {
						b.Fatalf("Prepare (%s run) wrote %d paths for %d files", run, w, n)
					}
					peak = max(peak, peakRSS(b))
					b.StartTimer()
				}
				b.ReportMetric(peak/(1<<20), "peak-RSS-MB")
			})
		}
	}
}

// benchMC is a MachineConfig (JSON) of n files under /etc, 1,000 a
// directory, each with its own content.
func benchMC(b *testing.B, n int) string {
	b.Helper()
	type file struct {
		Path     string         `json:"path"`
		Mode     int            `json:"mode"`
		Contents map[string]any `json:"contents"`
	}
	files := make([]file, n)
	for i := range files {
		files[i] = file{
			Path:     fmt.Sprintf("/etc/mcbake-bench/d%03d/f%06d.conf", i/1000, i),
			Mode:     0o644,
			Contents: map[string]any{"source": fmt.Sprintf("data:,file%%20%d%%0A", i)},
		}
	}
	mc := map[string]any{
		"apiVersion": "machineconfiguration.openshift.io/v1",
		"kind":       "MachineConfig",
		"metadata":   map[string]any{"name": "99-worker-bench"},
		"spec": map[string]any{"config": map[string]any{
			"ignition": map[string]any{"version": "3.4.0"},
			"storage":  map[string]any{"files": files},
		}},
	}
	out, err := json.Marshal(mc)
	if err != nil {
		b.Fatal(err)
	}
	return string(out)
}

// resetPeakRSS resets the process's peak resident set size (VmHWM), as
// writing 5 to /proc/self/clear_refs does (Linux 4.0 and later).
func resetPeakRSS(b *testing.B) {
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Skipf("cannot reset the peak RSS: %v", err)
	}
}

// peakRSS is the process's peak resident set size (VmHWM), in bytes.
func peakRSS(b *testing.B) float64 {
	f, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Fatal(err)
	}
	sc := bufio.NewScanner(bytes.NewReader(f))
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 64)
			if err != nil {
				b.Fatal(err)
			}
			return kb * 1024
		}
	}
	b.Fatal("no VmHWM in /proc/self/status")
	return 0
}
