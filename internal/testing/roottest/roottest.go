// Package roottest describes host directory trees, for tests of writes.
//
// Tests that must prove what a write changed, and what it left alone,
// compare trees of every path with its type, mode, owner and content or link
// target, read without following symlinks (Tree). Write makes a tree from
// a short spec of files, directories and symlinks.
package roottest

import (
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
)

// Tree describes every path below dir (dir itself excluded), keyed by its
// slash-separated path relative to dir.
func Tree(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		out[filepath.ToSlash(rel)] = Entry(t, p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Entry describes the path p: "link TARGET UID:GID", "dir MODE UID:GID" or
// "file MODE UID:GID CONTENT".
func Entry(t testing.TB, p string) string {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Fatal(err)
	}
	st := fi.Sys().(*syscall.Stat_t)
	owner := fmt.Sprintf("%d:%d", st.Uid, st.Gid)
	switch {
	case fi.Mode()&fs.ModeSymlink != 0:
		target, err := os.Readlink(p)
		if err != nil {
			t.Fatal(err)
		}
		return "link " + target + " " + owner
	case fi.IsDir():
		return fmt.Sprintf("dir %04o %s", st.Mode&0o7777, owner)
	case !fi.Mode().IsRegular():
		return fmt.Sprintf("other %s %04o %s", fi.Mode().Type(), st.Mode&0o7777, owner)
	}
	if fi.Size() > 1<<20 {
		return fmt.Sprintf("file %04o %s %d bytes", st.Mode&0o7777, owner, fi.Size()) // not read: hostile sizes
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("file %04o %s %s", st.Mode&0o7777, owner, b)
}

// Write creates the tree spec describes under dir: each key is a path
// relative to dir; a key ending in "/" is a directory, a value starting
// with "-> " a symlink to the rest, anything else a file (0644) with that
// content. Parents are made as needed, the keys in sorted order.
func Write(t testing.TB, dir string, spec map[string]string) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(spec)) {
		p := filepath.Join(dir, k)
		v := spec[k]
		err := os.MkdirAll(filepath.Dir(p), 0o755)
		switch {
		case err != nil:
		case strings.HasSuffix(k, "/"):
			err = os.MkdirAll(p, 0o755)
		case strings.HasPrefix(v, "-> "):
			err = os.Symlink(strings.TrimPrefix(v, "-> "), p)
		default:
			err = os.WriteFile(p, []byte(v), 0o644)
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}
