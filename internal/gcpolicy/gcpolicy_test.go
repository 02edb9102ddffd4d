package gcpolicy

import (
	"math"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"
)

// gogc reads the collector's percentage without changing it (-1: off).
func gogc() int {
	s := []metrics.Sample{{Name: "/gc/gogc:percent"}}
	metrics.Read(s)
	return int(int64(s[0].Value.Uint64()))
}

func limit() int64 {
	s := []metrics.Sample{{Name: "/gc/gomemlimit:bytes"}}
	metrics.Read(s)
	return int64(s[0].Value.Uint64())
}

// fresh restores Go's defaults and this package's state around a test.
func fresh(t *testing.T) {
	t.Helper()
	reset := func() {
		mu.Lock()
		defer mu.Unlock()
		deferred, holds, base = false, 0, 100
		gen++ // outstanding cleanups end nothing
		debug.SetGCPercent(100)
		debug.SetMemoryLimit(math.MaxInt64)
	}
	reset()
	t.Cleanup(reset)
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
}

// collectUntil runs collections until cond holds, for at most 10 s.
func collectUntil(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatalf("still GOGC %d, limit %d after collections", gogc(), limit())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

func TestDeferEndsAtTheFirstCollection(t *testing.T) {
	fresh(t)
	Defer()
	if gogc() != -1 || limit() != Floor {
		t.Fatalf("after Defer: GOGC %d, limit %d; want off, %d", gogc(), limit(), Floor)
	}
	collectUntil(t, func() bool { return gogc() == 100 })
	if limit() != math.MaxInt64 {
		t.Errorf("after the first collection: limit %d, want none", limit())
	}
}

// TestHoldDuringDefer checks the two policies together: a Hold ends the
// deferral and holds its percentage, the deferral's cleanup does not undo
// the hold, and the release restores the default, never "off".
func TestHoldDuringDefer(t *testing.T) {
	fresh(t)
	Defer()
	release := Hold(30)
	if gogc() != 30 || limit() != math.MaxInt64 {
		t.Fatalf("Hold(30) during Defer: GOGC %d, limit %d; want 30, none", gogc(), limit())
	}
	inner := Hold(50)
	runtime.GC()
	runtime.GC()
	time.Sleep(50 * time.Millisecond) // the sentinel's cleanup has run
	if gogc() != 30 {
		t.Fatalf("a nested Hold and collections changed GOGC to %d, want 30", gogc())
	}
	inner()
	if gogc() != 30 {
		t.Fatalf("releasing the nested Hold: GOGC %d, want 30", gogc())
	}
	release()
	release() // a second call does nothing
	if gogc() != 100 {
		t.Errorf("after the last release: GOGC %d, want 100", gogc())
	}
}

func TestHoldAlone(t *testing.T) {
	fresh(t)
	release := Hold(30)
	if gogc() != 30 {
		t.Fatalf("Hold(30): GOGC %d", gogc())
	}
	release()
	if gogc() != 100 {
		t.Errorf("after release: GOGC %d, want 100", gogc())
	}
}

func TestEnvironmentWins(t *testing.T) {
	fresh(t)
	t.Setenv("GOGC", "200")
	debug.SetGCPercent(200)
	Defer()
	release := Hold(30)
	if gogc() != 200 || limit() != math.MaxInt64 {
		t.Errorf("GOGC=200 set: GOGC %d, limit %d after Defer and Hold", gogc(), limit())
	}
	release()
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "1GiB")
	Defer()
	if gogc() != 200 {
		t.Errorf("GOMEMLIMIT set: Defer changed GOGC to %d", gogc())
	}
}
