package guard_test

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/tool/guard"
)

// TestWriteTree: the tree holds the guard's three paths and their parents
// with the modes mcbake build gives them, an earlier tree is replaced, and
// a directory holding anything else is refused untouched.
func TestWriteTree(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "guard")
	bin := []byte("#!/bin/sh\n# a node binary\n")
	ctx := context.Background()
	for range 2 { // the second replaces the first
		if err := guard.WriteTree(ctx, dir, bin, false); err != nil {
			t.Fatalf("WriteTree: %v", err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(dir, guard.BinaryPath)); err != nil || !bytes.Equal(b, bin) {
		t.Errorf("the binary: %q, %v", b, err)
	}
	if fi, err := os.Stat(filepath.Join(dir, guard.BinaryPath)); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the binary's mode: %v, %v", fi, err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, guard.UnitPath)); err != nil || !bytes.Equal(b, guard.Unit) {
		t.Errorf("the unit: %v", err)
	}
	if target, err := os.Readlink(filepath.Join(dir, guard.WantsPath)); err != nil || target != "../"+guard.UnitName {
		t.Errorf("the link: %q, %v", target, err)
	}
	for _, d := range []string{"usr", "usr/libexec/mcbake", "usr/lib/systemd/system/multi-user.target.wants"} {
		if fi, err := os.Lstat(filepath.Join(dir, d)); err != nil || !fi.IsDir() || fi.Mode().Perm() != 0o755 {
			t.Errorf("%s: %v, %v; want a directory 0755", d, fi, err)
		}
	}

	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "keep"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	err := guard.WriteTree(ctx, other, bin, false)
	if err == nil || !strings.Contains(err.Error(), "keep") {
		t.Errorf("WriteTree into a directory holding another file = %v, want a refusal naming it", err)
	}
	if _, err := os.Stat(filepath.Join(other, "usr")); err == nil {
		t.Errorf("a refused WriteTree wrote into the directory")
	}
}
