package atomicdir

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

// TestSweepInitEntries: an entry a run was killed with between creating
// and locking it is swept once its creator is dead; a live creator's is
// kept, as are other names.
func TestSweepInitEntries(t *testing.T) {
	dir := t.TempDir()
	cmd := exec.Command("true")
	if err := cmd.Run(); err != nil {
		t.Fatal(err)
	}
	dead := initPrefix + strconv.Itoa(cmd.Process.Pid) + "-123"
	live := initPrefix + strconv.Itoa(os.Getppid()) + "-456" // the go test driver
	other := "keep-me"
	for _, n := range []string{dead, live, other} {
		if err := os.Mkdir(filepath.Join(dir, n), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	Sweep(dir, ".x-")
	for n, want := range map[string]bool{dead: false, live: true, other: true} {
		_, err := os.Stat(filepath.Join(dir, n))
		if got := err == nil; got != want {
			t.Errorf("%s present after the sweep = %v, want %v", n, got, want)
		}
	}
}

// TestMkdirTempLockedAndSwept: a Temp is kept by a sweep while held, and
// swept once released.
func TestMkdirTempLockedAndSwept(t *testing.T) {
	dir := t.TempDir()
	tmp, err := MkdirTemp(dir, ".x-")
	if err != nil {
		t.Fatal(err)
	}
	Sweep(dir, ".x-")
	if _, err := os.Stat(tmp.Path); err != nil {
		t.Fatalf("held temp swept: %v", err)
	}
	tmp.Release()
	Sweep(dir, ".x-")
	if _, err := os.Stat(tmp.Path); !os.IsNotExist(err) {
		t.Fatalf("released temp not swept: %v", err)
	}
}
