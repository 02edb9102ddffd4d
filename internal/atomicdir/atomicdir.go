// Package atomicdir puts output directories in place atomically.
//
// Callers build the new tree in a temporary sibling, then Replace swaps
// it with the destination in one renameat2(RENAME_EXCHANGE) and removes
// the old tree, so readers see either the old output or the new one,
// never a mix.
package atomicdir

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// Exchange atomically swaps the directories a and b. On filesystems
// without RENAME_EXCHANGE it falls back to two renames (briefly leaving b
// absent).
func Exchange(a, b string) error {
	err := unix.Renameat2(unix.AT_FDCWD, a, unix.AT_FDCWD, b, unix.RENAME_EXCHANGE)
	if err == nil {
		return nil
	}
	if !errors.Is(err, unix.EINVAL) && !errors.Is(err, unix.ENOSYS) {
		return &os.LinkError{Op: "exchange", Old: a, New: b, Err: err}
	}
	// A fresh name: a leftover from a crash must not block later swaps.
	aside, err := os.MkdirTemp(filepath.Dir(b), "."+filepath.Base(b)+".old-")
	if err != nil {
		return err
	}
	if err := os.Remove(aside); err != nil {
		return err
	}
	if err := os.Rename(b, aside); err != nil {
		return err
	}
	if err := os.Rename(a, b); err != nil {
		return errors.Join(err, os.Rename(aside, b))
	}
	return os.Rename(aside, a)
}

// Build makes dir anew, as what (a name for the output in errors): fill
// writes the new tree into an empty temporary sibling of dir (locked
// while this process lives, see MkdirTemp), which is then made 0755 and
// swapped in with Replace. dir must be absent, empty, or hold only the
// given names (CheckReplaceable): Build never replaces anything else. On
// any error the sibling is removed and an earlier dir is kept.
func Build(dir, what string, names []string, fill func(tmp string) error) (err error) {
	if err := CheckReplaceable(dir, what, names...); err != nil {
		return err
	}
	tmp, err := MkdirTemp(filepath.Dir(filepath.Clean(dir)), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, tmp.RemoveAll())
		}
		tmp.Release()
	}()
	if err := fill(tmp.Path); err != nil {
		return err
	}
	if err := os.Chmod(tmp.Path, 0o755); err != nil {
		return err
	}
	return Replace(tmp.Path, dir)
}

// Replace moves the directory tmp to dir: a plain rename when dir does not
// exist, else an Exchange followed by the removal of the old tree (now at
// tmp).
func Replace(tmp, dir string) error {
	if _, err := os.Lstat(dir); errors.Is(err, fs.ErrNotExist) {
		return os.Rename(tmp, dir)
	}
	if err := Exchange(tmp, dir); err != nil {
		return err
	}
	if err := RemoveTree(tmp); err != nil {
		return fmt.Errorf("removing the earlier output: %w", err)
	}
	return nil
}

// RemoveTree removes dir and everything under it, first making its
// directories writable: a tree written without root privileges can hold
// read-only directories (mode 0555) that os.RemoveAll alone cannot empty.
func RemoveTree(dir string) error {
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() {
			err = os.Chmod(p, 0o700)
		}
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return err
	})
	return errors.Join(err, os.RemoveAll(dir))
}

// CheckReplaceable refuses to replace dir unless it is absent, empty, or
// holds only the given names (an earlier output of the same kind, which
// what names in the error).
func CheckReplaceable(dir, what string, names ...string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if !fi.IsDir() {
		return fmt.Errorf("%s exists and is not a directory", dir)
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	allowed := map[string]bool{}
	for _, n := range names {
		allowed[n] = true
	}
	for _, e := range ents {
		if !allowed[e.Name()] {
			return fmt.Errorf("%s is not empty and not an earlier %s (it has %s): refusing to replace it", dir, what, e.Name())
		}
	}
	return nil
}
