// Package progress reports long-running work on stderr.
//
// It draws progress bars (github.com/vbauerster/mpb, as the containers
// tools use) when the writer is a terminal (see Interactive), and prints
// plain lines otherwise. A nil *Reporter reports nothing, which is what
// --quiet gives.
package progress

import (
	"fmt"
	"io"
	"os"
	"sync"

	"github.com/mattn/go-isatty"
	"github.com/vbauerster/mpb/v8"
	"github.com/vbauerster/mpb/v8/decor"
)

// Reporter reports progress; its methods are safe for concurrent use.
type Reporter struct {
	w    io.Writer
	p    *mpb.Progress // nil when w is not a terminal
	mu   sync.Mutex
	bars map[string]*mpb.Bar
	// quarter is the last quarter (0-4) printed per item, plain mode.
	quarter map[string]int64
}

// New returns a Reporter writing to w; quiet returns nil.
func New(w io.Writer, quiet bool) *Reporter {
	if quiet {
		return nil
	}
	r := &Reporter{w: w, bars: map[string]*mpb.Bar{}, quarter: map[string]int64{}}
	if Interactive(w) {
		r.p = mpb.New(mpb.WithOutput(w), mpb.WithWidth(40))
	}
	return r
}

// Interactive reports whether w is a terminal that takes colour and
// progress bars: a terminal, unless NO_COLOR is set to anything
// (no-color.org) or TERM is dumb.
func Interactive(w io.Writer) bool {
	if os.Getenv("NO_COLOR") != "" || os.Getenv("TERM") == "dumb" {
		return false
	}
	f, ok := w.(*os.File)
	return ok && isatty.IsTerminal(f.Fd())
}

// Update reports that n of total bytes of the named item are done.
func (r *Reporter) Update(name string, total, n int64) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.p != nil {
		r.bar(name, total).SetCurrent(n)
		return
	}
	if total <= 0 {
		return
	}
	q := n * 4 / total
	if last, ok := r.quarter[name]; ok && q <= last {
		return
	}
	r.quarter[name] = q
	fmt.Fprintf(r.w, "%s: %d%% (%s of %s)\n", name, q*25, size(n), size(total))
}

func (r *Reporter) bar(name string, total int64) *mpb.Bar {
	if b, ok := r.bars[name]; ok {
		return b
	}
	b := r.p.AddBar(total,
		mpb.PrependDecorators(decor.Name(name, decor.WCSyncSpaceR)),
		mpb.AppendDecorators(decor.CountersKibiByte("% .1f / % .1f"), decor.Percentage(decor.WCSyncSpace)))
	r.bars[name] = b
	return b
}

// Printf prints a status line (above the bars on a terminal).
func (r *Reporter) Printf(format string, args ...any) {
	if r == nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	fmt.Fprintf(r.w, format+"\n", args...)
}

// Wait completes every bar and waits for the display to finish.
func (r *Reporter) Wait() {
	if r == nil || r.p == nil {
		return
	}
	r.mu.Lock()
	for _, b := range r.bars {
		b.SetTotal(-1, true)
	}
	r.mu.Unlock()
	r.p.Wait()
}

// Bytes formats n bytes for people: 512 B, 1.5 KiB, 3.2 GiB.
func Bytes(n int64) string { return size(n) }

func size(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}
