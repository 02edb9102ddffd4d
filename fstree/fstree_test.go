package fstree

import (
	"path"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/roottest"
)

// makeTree creates a tree on disk: each key is a path relative to the
// tree; a key ending in "/" is a directory, a value starting with "-> " a
// symlink to the rest, anything else a file with that content.
func makeTree(t testing.TB, spec map[string]string) *Dir {
	t.Helper()
	dir := t.TempDir()
	roottest.Write(t, dir, spec)
	return openDir(t, dir)
}

// openDir opens dir as a Dir, closed when the test ends.
func openDir(t testing.TB, dir string) *Dir {
	t.Helper()
	d, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing %s: %v", dir, err)
		}
	})
	return d
}

// TestDirLstatType checks that Dir's LstatType is its Lstat without the
// digest.
func TestDirLstatType(t *testing.T) {
	d := makeTree(t, map[string]string{"etc/a.conf": "a\n", "etc/dir/": "", "etc/link": "-> a.conf"})
	for _, p := range []string{"/etc/a.conf", "/etc/dir", "/etc/link", "/etc/absent", "/"} {
		want, wantOK, err := d.Lstat(p)
		if err != nil {
			t.Fatal(err)
		}
		if p == "/etc/a.conf" && want.Digest == "" {
			t.Fatalf("Lstat(%s) has no digest", p)
		}
		want.Digest = ""
		got, ok, err := d.LstatType(p)
		if err != nil || ok != wantOK || got != want {
			t.Errorf("LstatType(%s) = %+v, %v, %v; want %+v, %v", p, got, ok, err, want, wantOK)
		}
	}
}

// FuzzResolve resolves arbitrary paths in a directory tree with symlinks
// that point up, out, in loops and at absolute paths: never a panic, and
// the result is always absolute and clean (inside the root).
func FuzzResolve(f *testing.F) {
	root := makeTree(f, map[string]string{
		"etc/a/":        "",
		"etc/up":        "-> ../../../..",
		"etc/abs":       "-> /usr/lib",
		"etc/loop1":     "-> loop2",
		"etc/loop2":     "-> loop1",
		"usr/local":     "-> ../var/usrlocal",
		"var/usrlocal/": "",
		"usr/lib/x":     "x",
	})
	for _, s := range []string{"/etc/up/etc/passwd", "/usr/local/bin/x", "/etc/loop1/x", "../../x", "/etc/abs/x/../../y", "/"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, p string) {
		got, err := Resolve(root, p)
		if err != nil {
			return
		}
		if !path.IsAbs(got) || path.Clean(got) != got {
			t.Fatalf("Resolve(%q) = %q, not absolute and clean", p, got)
		}
	})
}
