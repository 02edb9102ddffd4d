package progress

import (
	"bytes"
	"fmt"
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// openPTY returns the terminal side of a new pseudo-terminal.
func openPTY(t *testing.T) *os.File {
	t.Helper()
	ptmx, err := os.OpenFile("/dev/ptmx", os.O_RDWR, 0)
	if err != nil {
		t.Skipf("no pseudo-terminals: %v", err)
	}
	t.Cleanup(func() { ptmx.Close() })
	if err := unix.IoctlSetPointerInt(int(ptmx.Fd()), unix.TIOCSPTLCK, 0); err != nil {
		t.Fatal(err)
	}
	n, err := unix.IoctlGetInt(int(ptmx.Fd()), unix.TIOCGPTN)
	if err != nil {
		t.Fatal(err)
	}
	pts, err := os.OpenFile(fmt.Sprintf("/dev/pts/%d", n), os.O_RDWR|unix.O_NOCTTY, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pts.Close() })
	return pts
}

// TestInteractive: a terminal gets colour and bars unless NO_COLOR is set
// (to anything) or TERM is dumb; a pipe or buffer never does.
func TestInteractive(t *testing.T) {
	pts := openPTY(t)
	tests := []struct {
		noColor, term string
		want          bool
	}{
		{"", "xterm-256color", true},
		{"1", "xterm-256color", false},
		{"", "dumb", false},
	}
	for _, tt := range tests {
		t.Setenv("NO_COLOR", tt.noColor)
		t.Setenv("TERM", tt.term)
		if got := Interactive(pts); got != tt.want {
			t.Errorf("Interactive(terminal) with NO_COLOR=%q TERM=%q = %v, want %v", tt.noColor, tt.term, got, tt.want)
		}
		r := New(pts, false)
		if (r.p != nil) != tt.want {
			t.Errorf("New(terminal) with NO_COLOR=%q TERM=%q: bars %v, want %v", tt.noColor, tt.term, r.p != nil, tt.want)
		}
		r.Wait()
	}
	t.Setenv("NO_COLOR", "")
	t.Setenv("TERM", "xterm")
	if Interactive(&bytes.Buffer{}) {
		t.Errorf("Interactive(buffer) = true")
	}
}
