package guard_test

import (
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/render"
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
		if err := guard.WriteTree(ctx, dir, bin, render.WriteOptions{}); err != nil {
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
	err := guard.WriteTree(ctx, other, bin, render.WriteOptions{})
	if err == nil || !strings.Contains(err.Error(), "keep") {
		t.Errorf("WriteTree into a directory holding another file = %v, want a refusal naming it", err)
	}
	if _, err := os.Stat(filepath.Join(other, "usr")); err == nil {
		t.Errorf("a refused WriteTree wrote into the directory")
	}
}

// elfHeader is a minimal ELF64 little-endian executable header for
// machine (no sections, no program headers).
func elfHeader(machine elf.Machine) []byte {
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(h[18:], uint16(machine))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64) // e_ehsize
	return h
}

// TestArch: the guard's binary must be the image's architecture; a script
// runs anywhere; Binary names what this mcbake has.
func TestArch(t *testing.T) {
	for _, tc := range []struct {
		bin  []byte
		want string
	}{
		{elfHeader(elf.EM_X86_64), "amd64"},
		{elfHeader(elf.EM_AARCH64), "arm64"},
		{elfHeader(elf.EM_S390), "s390x"},
		{[]byte("#!/bin/sh\n"), ""},
	} {
		if got := guard.ArchOf(tc.bin); got != tc.want {
			t.Errorf("ArchOf(%.8q) = %q, want %q", tc.bin, got, tc.want)
		}
	}
	if err := guard.CheckArch(elfHeader(elf.EM_X86_64), "arm64"); err == nil || !strings.Contains(err.Error(), "for linux/amd64, the image for linux/arm64") {
		t.Errorf("CheckArch(amd64 binary, arm64) = %v", err)
	}
	if err := guard.CheckArch(elfHeader(elf.EM_AARCH64), "arm64"); err != nil {
		t.Errorf("CheckArch(arm64 binary, arm64) = %v", err)
	}
	if err := guard.CheckArch([]byte("#!/bin/sh\n"), "s390x"); err != nil {
		t.Errorf("CheckArch(a script, s390x) = %v", err)
	}
	_, err := guard.Binary("riscv64")
	if !errors.Is(err, guard.ErrNoBinary) || !strings.Contains(err.Error(), "GUARD_ARCHES=riscv64") {
		t.Errorf("Binary(riscv64) = %v, want ErrNoBinary with the way to get one", err)
	}
}
