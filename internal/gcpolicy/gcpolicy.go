// Package gcpolicy is the one place that tunes the garbage collector.
//
// Its two policies compose (docs/design.md, Memory and The warm path): a
// command defers its first collection (Defer), and a large base index
// tightens collections while it lives (Hold). Neither changes anything
// when the environment sets GOGC (or, for Defer, GOMEMLIMIT).
package gcpolicy

import (
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"sync"
)

// Floor is the heap a command may grow to before its first collection.
const Floor = 32 << 20

var (
	mu       sync.Mutex
	deferred bool // Defer's settings are in force
	holds    int  // Holds not yet released
	base     = 100
	held     int
	gen      int // counts Defers: a cleanup ends only its own
)

func envSet(names ...string) bool {
	for _, n := range names {
		if os.Getenv(n) != "" {
			return true
		}
	}
	return false
}

// Defer turns the collector off until the heap reaches Floor; from the
// first collection on, Go's defaults apply again (or a Hold's). A command
// that allocates a few tens of MiB and exits, a warm build, then spends
// nothing on collections, which from 4 MiB on, as the defaults do, cost
// it a tenth of its time; a big one is collected as before once its heap
// passes the floor. Call it once, first thing in main.
func Defer() {
	if envSet("GOGC", "GOMEMLIMIT") {
		return
	}
	mu.Lock()
	defer mu.Unlock()
	if deferred || holds > 0 {
		return
	}
	base = debug.SetGCPercent(-1)
	debug.SetMemoryLimit(Floor)
	deferred = true
	gen++
	// The sentinel is unreachable from here on: the first collection
	// frees it, and its cleanup ends the deferral. It is too big for the
	// tiny allocator, which frees objects in batches.
	runtime.AddCleanup(new([64]byte), func(g int) {
		mu.Lock()
		defer mu.Unlock()
		if g == gen {
			endDeferral()
		}
	}, gen)
}

// endDeferral restores the collector's percentage (a Hold's while one
// is held) and lifts the memory limit. mu is held.
func endDeferral() {
	if !deferred {
		return
	}
	deferred = false
	debug.SetMemoryLimit(math.MaxInt64)
	if holds > 0 {
		debug.SetGCPercent(held)
	} else {
		debug.SetGCPercent(base)
	}
}

// Hold sets the collector's percentage to pct until its release; the
// first Hold's percentage applies while several are held. It ends a
// Defer's deferral: a caller holding wants collections now.
func Hold(pct int) (release func()) {
	if envSet("GOGC") {
		return func() {}
	}
	mu.Lock()
	defer mu.Unlock()
	if holds == 0 {
		held = pct
		if deferred {
			holds++
			endDeferral()
			holds--
		} else {
			base = debug.SetGCPercent(pct)
		}
	}
	holds++
	var once sync.Once
	return func() {
		once.Do(func() {
			mu.Lock()
			defer mu.Unlock()
			if holds--; holds == 0 && !deferred {
				debug.SetGCPercent(base)
			}
		})
	}
}
