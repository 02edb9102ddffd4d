package node_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/testing/roottest"
	"github.com/mcbake/mcbake/node"
)

// TestBootEntriesHostile: a bootloader entry that is not a small regular
// file (a fifo, a device, a symlink to one, a file larger than a BLS
// entry ever is) is an error naming it, returned at once: the entries are
// read in the shutdown path, where a hang or a read without end is worse
// than a failure. The context only bounds a hang, so that a regression
// fails instead of blocking the suite.
func TestBootEntriesHostile(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: mknod")
	}
	tests := []struct {
		name string
		make func(p string) error
		want string
	}{
		{"fifo", func(p string) error { return unix.Mkfifo(p, 0o644) }, "not a regular file"},
		{"device", func(p string) error { return unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))) }, "not a regular file"},
		{"symlink to /dev/zero", func(p string) error { return os.Symlink("/dev/zero", p) }, "symbolic links"},
		{"too large", func(p string) error {
			return os.WriteFile(p, []byte("title big\nversion 9\n"+strings.Repeat("# padding\n", node.MaxBootEntry/10)), 0o644)
		}, "larger than"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			entries := filepath.Join(dir, "boot", "loader.1", "entries")
			for _, d := range []string{filepath.Join(dir, "ostree", "deploy"), entries} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := os.Symlink("loader.1", filepath.Join(dir, "boot", "loader")); err != nil {
				t.Fatal(err)
			}
			good := "title ok\nversion 1\noptions ostree=/ostree/boot.1/os/x/0\n"
			if err := os.WriteFile(filepath.Join(entries, "ostree-1.conf"), []byte(good), 0o644); err != nil {
				t.Fatal(err)
			}
			bad := filepath.Join(entries, "ostree-2.conf")
			if err := tt.make(bad); err != nil {
				t.Fatal(err)
			}
			s, err := node.OpenSysroot(dir)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			done := make(chan error, 1)
			go func() {
				_, err := s.Booted()
				done <- err
			}()
			select {
			case err = <-done:
			case <-ctx.Done():
				t.Fatalf("Booted with a %s entry: still reading it (%v)", tt.name, ctx.Err())
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "ostree-2.conf") {
				t.Errorf("Booted with a %s entry = %v, want an error naming it and saying %q", tt.name, err, tt.want)
			}
		})
	}
}

// TestSweepTemporaries: the temporary entries a killed run left anywhere
// in the staged /etc (or beside the record under /var) are removed before
// Prepare writes, and by SweepTemporaries, which a shutdown guard runs;
// names that only look like them, a non-empty directory and what a
// symlink leads to are left alone.
func TestSweepTemporaries(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	varDir := filepath.Join(staged.Var(), node.VarRecordDir)
	leftovers := map[string]string{
		"etc/.passwd.mcbake-0123456789ab":                     "a dead run's file",
		"etc/selinux/.config.old.mcbake-abcdefabcdef":         "a dead run's backup",
		"etc/mcbake-deep/a/b/.x.conf.mcbake-00000000000f":     "deep down",
		"etc/mcbake-deep/a/b/.empty-dir.mcbake-0000000000aa/": "",
		"etc/systemd/.link.mcbake-aaaaaaaaaaaa":               "-> /etc/passwd",
	}
	kept := map[string]string{
		"etc/.passwd.mcbake-0123456789":        "too short",
		"etc/passwd.mcbake-0123456789ab":       "no leading dot",
		"etc/.passwd.mcbake-0123456789AB":      "upper case",
		"etc/.full.mcbake-0123456789ab/inside": "a directory with something in it",
		"etc/mcbake-linked":                    "-> ../../outside-etc",
		"outside-etc/.x.mcbake-0123456789ab":   "behind a symlink",
	}
	roottest.Write(t, staged.Dir, leftovers)
	roottest.Write(t, staged.Dir, kept)
	roottest.Write(t, varDir, map[string]string{".record.json.mcbake-0123456789ab": "{"})
	rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	for p := range leftovers {
		if _, err := os.Lstat(filepath.Join(staged.Dir, p)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s after Prepare: %v, want it removed", p, err)
		}
	}
	if _, err := os.Lstat(filepath.Join(varDir, ".record.json.mcbake-0123456789ab")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the temporary entry beside the record after Prepare: %v, want it removed", err)
	}
	for p := range kept {
		if _, err := os.Lstat(filepath.Join(staged.Dir, p)); err != nil {
			t.Errorf("%s after Prepare: %v, want it kept", p, err)
		}
	}
	if !slices.ContainsFunc(rec.Notes, func(n string) bool { return strings.Contains(n, "removed 6 temporary entries") }) {
		t.Errorf("Prepare's notes = %q, want one saying it removed 6 temporary entries", rec.Notes)
	}

	// The shutdown guard's sweep: the staged deployment has no bootloader
	// entry until finalization.
	unstage(t, st)
	roottest.Write(t, staged.Dir, leftovers)
	removed, err := node.SweepTemporaries(context.Background(), st.Sysroot)
	if err != nil {
		t.Fatalf("SweepTemporaries: %v", err)
	}
	if len(removed) != len(leftovers) {
		t.Errorf("SweepTemporaries removed %q, want the %d leftovers", removed, len(leftovers))
	}
	for p := range kept {
		if _, err := os.Lstat(filepath.Join(staged.Dir, p)); err != nil {
			t.Errorf("%s after SweepTemporaries: %v, want it kept", p, err)
		}
	}
}

// TestPrepareLocked: runs on one sysroot are one at a time. While another
// run holds the lock, Prepare waits (here a short while), then fails,
// naming the lock and writing nothing; two runs started together write
// the paths once: the second finds them written.
func TestPrepareLocked(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	lock := filepath.Join(st.Sysroot, "ostree", "deploy")
	fd, err := unix.Open(lock, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	restore := node.SetLockWait(300 * time.Millisecond)
	before := roottest.Tree(t, staged.Dir)
	_, err = node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
	var busy *node.BusyError
	if !errors.As(err, &busy) || !strings.Contains(err.Error(), "another mcbake-node run holds "+lock) {
		t.Errorf("Prepare while another run holds the lock = %v, want it refused, naming %s", err, lock)
	}
	if diff := cmp.Diff(before, roottest.Tree(t, staged.Dir)); diff != "" {
		t.Errorf("a Prepare refused for the lock changed the staged deployment (-before +after):\n%s", diff)
	}
	restore()
	unix.Close(fd)

	recs := make(chan *node.Record, 2)
	errs := make(chan error, 2)
	for range 2 {
		go func() {
			rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
			recs <- rec
			errs <- err
		}()
	}
	var written []int
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatalf("Prepare beside another: %v", err)
		}
		written = append(written, len((<-recs).Written()))
	}
	slices.Sort(written)
	if written[0] != 0 || written[1] == 0 {
		t.Errorf("two Prepares at once wrote %v paths, want one to write them and the other nothing", written)
	}
}
