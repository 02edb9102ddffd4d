package node

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/testing/roottest"
	"github.com/mcbake/mcbake/manifest"
)

// tree is a directory's content as the tests see it: path (relative, "/"
// separated) -> "dir MODE UID:GID", "file MODE UID:GID CONTENT" or
// "link TARGET UID:GID".
type tree = map[string]string

func digestOf(s string) digest.Digest { return digest.FromString(s) }

// setup makes a root directory (with /etc) and, next to it, a directory
// outside the root holding the file "secret", and opens the root.
func setup(t *testing.T) (rootDir, outside string, r *Root) {
	t.Helper()
	top := t.TempDir()
	rootDir, outside = filepath.Join(top, "root"), filepath.Join(top, "outside")
	for _, d := range []string{rootDir, outside, filepath.Join(rootDir, "etc")} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mustWrite(t, filepath.Join(outside, "secret"), "outside\n", 0o644)
	r, err := Open(rootDir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return rootDir, outside, r
}

func mustSymlink(t *testing.T, target, p string) {
	t.Helper()
	if err := os.Symlink(target, p); err != nil {
		t.Fatal(err)
	}
}

func mustMkdir(t *testing.T, p string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(p, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func mustWrite(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to set file owners")
	}
}

func TestOpenMissing(t *testing.T) {
	if _, err := Open(filepath.Join(t.TempDir(), "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Open(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestLstat(t *testing.T) {
	rootDir, outside, r := setup(t)
	etc := filepath.Join(rootDir, "etc")
	mustWrite(t, filepath.Join(etc, "file"), "hello\n", 0o640)
	mustMkdir(t, filepath.Join(etc, "dir"), 0o750)
	mustSymlink(t, "/etc/file", filepath.Join(etc, "link"))
	mustSymlink(t, "dir", filepath.Join(etc, "dirlink"))
	mustWrite(t, filepath.Join(etc, "dir", "inner"), "inner\n", 0o600)
	// Symlinked parents that point outside the root on the host: inside
	// the root they resolve as if the root were "/".
	mustSymlink(t, outside, filepath.Join(etc, "abs-out"))
	mustSymlink(t, "../../../../../../../../../../"+outside, filepath.Join(etc, "rel-out"))
	mustSymlink(t, "/", filepath.Join(etc, "slash"))
	tests := []struct {
		p      string
		want   manifest.Entry
		wantOK bool
	}{
		{p: "/etc/file", wantOK: true, want: manifest.Entry{Type: manifest.File, Mode: 0o640, Size: 6, Digest: digestOf("hello\n")}},
		{p: "/etc/dir", wantOK: true, want: manifest.Entry{Type: manifest.Directory, Mode: 0o750}},
		{p: "/etc/link", wantOK: true, want: manifest.Entry{Type: manifest.Symlink, Mode: 0o777, Size: 9, Target: "/etc/file"}},
		{p: "/etc/dirlink/inner", wantOK: true, want: manifest.Entry{Type: manifest.File, Mode: 0o600, Size: 6, Digest: digestOf("inner\n")}},
		{p: "etc/file", wantOK: true, want: manifest.Entry{Type: manifest.File, Mode: 0o640, Size: 6, Digest: digestOf("hello\n")}},
		{p: "/etc/../etc/./file", wantOK: true, want: manifest.Entry{Type: manifest.File, Mode: 0o640, Size: 6, Digest: digestOf("hello\n")}},
		{p: "/etc/slash/etc/file", wantOK: true, want: manifest.Entry{Type: manifest.File, Mode: 0o640, Size: 6, Digest: digestOf("hello\n")}},
		{p: "/etc/missing"},
		{p: "/missing/parent"},
		{p: "/etc/file/below"}, // a parent that is a file
		{p: "/etc/abs-out/secret"},
		{p: "/etc/rel-out/secret"},
		{p: "/../outside/secret"},
	}
	for _, tt := range tests {
		got, ok, err := r.Lstat(tt.p)
		if err != nil {
			t.Errorf("Lstat(%q) error = %v", tt.p, err)
			continue
		}
		if ok != tt.wantOK {
			t.Errorf("Lstat(%q) ok = %v, want %v", tt.p, ok, tt.wantOK)
			continue
		}
		if diff := cmp.Diff(tt.want, got, cmpopts.IgnoreFields(manifest.Entry{}, "Path", "UID", "GID", "Size")); ok && diff != "" {
			t.Errorf("Lstat(%q) (-want +got):\n%s", tt.p, diff)
		}
	}
}

func TestLstatRoot(t *testing.T) {
	rootDir, _, r := setup(t)
	if err := os.Chmod(rootDir, 0o711); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"/", "", "/..", "/etc/.."} {
		got, ok, err := r.Lstat(p)
		if err != nil || !ok || got.Type != manifest.Directory || got.Mode != 0o711 {
			t.Errorf("Lstat(%q) = %+v, %v, %v, want the root directory (0711)", p, got, ok, err)
		}
	}
}

func TestWriteFile(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	p := filepath.Join(rootDir, "etc", "f")
	mustWrite(t, p, "old\n", 0o644)
	before, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if err := r.WriteFile("/etc/f", []byte("new\n"), 0o4750, 1000, 1001); err != nil {
		t.Fatalf("WriteFile: %v", err)
	}
	got := roottest.Tree(t, rootDir)
	want := tree{"etc": "dir 0755 0:0", "etc/f": "file 4750 1000:1001 new\n"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("root after WriteFile (-want +got):\n%s", diff)
	}
	after, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	if os.SameFile(before, after) {
		t.Error("WriteFile rewrote the file in place, want a new file renamed over it")
	}
}

func TestWriteFileErrors(t *testing.T) {
	rootDir, _, r := setup(t)
	mustMkdir(t, filepath.Join(rootDir, "etc", "dir"), 0o755)
	for _, p := range []string{"/missing/f", "/etc/dir", "/", "/..", "/etc/.."} {
		if err := r.WriteFile(p, []byte("x"), 0o644, os.Getuid(), os.Getgid()); err == nil {
			t.Errorf("WriteFile(%q) = nil, want an error", p)
		}
	}
	var got []string
	for p := range roottest.Tree(t, rootDir) {
		got = append(got, p)
	}
	if diff := cmp.Diff([]string{"etc", "etc/dir"}, got, cmpopts.SortSlices(func(a, b string) bool { return a < b })); diff != "" {
		t.Errorf("failed writes left files behind (-want +got):\n%s", diff)
	}
}

// TestWritesStayInRoot: every write through a symlink, in a parent or as
// the last component, lands inside the root or fails; the directory
// outside is never changed.
func TestWritesStayInRoot(t *testing.T) {
	requireRoot(t)
	type op func(r *Root, out string) error
	tests := []struct {
		name string
		// links are symlinks to create under the root: path -> target,
		// where OUT stands for the outside directory's host path.
		links map[string]string
		// dirs are directories to create under the root (OUT as above).
		dirs    []string
		write   op
		wantErr bool
		// wantInside is a root-relative path the write must create.
		wantInside string
	}{
		{
			name:       "absolute symlinked parent",
			links:      map[string]string{"etc/abs": "OUT"},
			dirs:       []string{"OUT"},
			write:      func(r *Root, _ string) error { return r.WriteFile("/etc/abs/f", []byte("x"), 0o644, 0, 0) },
			wantInside: "OUT/f",
		},
		{
			name:       "relative symlinked parent climbing with ..",
			links:      map[string]string{"etc/rel": "../../../../../../../../../..OUT"},
			dirs:       []string{"OUT"},
			write:      func(r *Root, _ string) error { return r.WriteFile("/etc/rel/f", []byte("x"), 0o644, 0, 0) },
			wantInside: "OUT/f",
		},
		{
			name:    "symlinked parent to a directory missing in the root",
			links:   map[string]string{"etc/abs": "OUT"},
			write:   func(r *Root, _ string) error { return r.WriteFile("/etc/abs/f", []byte("x"), 0o644, 0, 0) },
			wantErr: true,
		},
		{
			name:  "mkdir all through a symlinked parent missing in the root",
			links: map[string]string{"etc/abs": "OUT"},
			write: func(r *Root, _ string) error {
				return r.MkdirAll("/etc/abs/sub", func(string) (uint32, int, int) { return 0o700, 0, 0 })
			},
			wantErr: true,
		},
		{
			name:       "last component a symlink to a file outside",
			links:      map[string]string{"etc/f": "OUT/secret"},
			write:      func(r *Root, _ string) error { return r.WriteFile("/etc/f", []byte("x"), 0o644, 0, 0) },
			wantInside: "etc/f",
		},
		{
			name:       "symlink over a symlink to outside",
			links:      map[string]string{"etc/f": "OUT/secret"},
			write:      func(r *Root, _ string) error { return r.Symlink("/etc/f", "/dev/null", 0, 0) },
			wantInside: "etc/f",
		},
		{
			name:    "mkdir where a symlink to the outside directory is",
			links:   map[string]string{"etc/d": "OUT"},
			write:   func(r *Root, _ string) error { return r.Mkdir("/etc/d", 0o700, 1000, 1000) },
			wantErr: true,
		},
		{
			name:  "remove through a symlinked parent",
			links: map[string]string{"etc/abs": "OUT"},
			write: func(r *Root, _ string) error { return r.Remove("/etc/abs/secret") },
		},
		{
			name:  "remove a symlink to a file outside",
			links: map[string]string{"etc/f": "OUT/secret"},
			write: func(r *Root, _ string) error { return r.Remove("/etc/f") },
		},
		{
			name:    "hard link to a file outside through a symlinked parent",
			links:   map[string]string{"etc/abs": "OUT"},
			write:   func(r *Root, _ string) error { return r.Link("/etc/l", "/etc/abs/secret") },
			wantErr: true,
		},
		{
			name:    "mkdir of /.. (the root's parent)",
			write:   func(r *Root, _ string) error { return r.Mkdir("/..", 0o700, 1000, 1000) },
			wantErr: true,
		},
		{
			name:    "symlink at /etc/..",
			write:   func(r *Root, _ string) error { return r.Symlink("/etc/..", "x", 0, 0) },
			wantErr: true,
		},
		{
			name: "path climbing out with ..",
			dirs: []string{"OUT"},
			write: func(r *Root, out string) error {
				return r.WriteFile("/../../../../../.."+out+"/f", []byte("x"), 0o644, 0, 0)
			},
			wantInside: "OUT/f",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			rootDir, outside, r := setup(t)
			sub := func(s string) string { return strings.ReplaceAll(s, "OUT", outside) }
			for _, d := range tt.dirs {
				mustMkdir(t, filepath.Join(rootDir, sub(d)), 0o755)
			}
			for p, target := range tt.links {
				mustSymlink(t, sub(target), filepath.Join(rootDir, p))
			}
			before, beforeDir := roottest.Tree(t, outside), roottest.Entry(t, outside)
			beforeParent := roottest.Entry(t, filepath.Dir(rootDir))
			err := tt.write(r, outside)
			if diff := cmp.Diff(before, roottest.Tree(t, outside)); diff != "" {
				t.Errorf("the directory outside the root changed (-before +after):\n%s", diff)
			}
			if got := roottest.Entry(t, outside); got != beforeDir {
				t.Errorf("the directory outside the root is now %s, was %s", got, beforeDir)
			}
			if got := roottest.Entry(t, filepath.Dir(rootDir)); got != beforeParent {
				t.Errorf("the root's parent directory is now %s, was %s", got, beforeParent)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("write error = %v, want error %v", err, tt.wantErr)
			}
			if tt.wantInside == "" {
				return
			}
			if _, err := os.Lstat(filepath.Join(rootDir, sub(tt.wantInside))); err != nil {
				t.Errorf("the write did not land at %s inside the root: %v", tt.wantInside, err)
			}
		})
	}
}

func TestSymlink(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	mustWrite(t, filepath.Join(rootDir, "etc", "was-file"), "x", 0o644)
	for p, target := range map[string]string{"/etc/new": "../usr/lib/x", "/etc/was-file": "/dev/null"} {
		if err := r.Symlink(p, target, 1000, 1001); err != nil {
			t.Fatalf("Symlink(%s): %v", p, err)
		}
	}
	want := tree{"etc": "dir 0755 0:0", "etc/new": "link ../usr/lib/x 1000:1001", "etc/was-file": "link /dev/null 1000:1001"}
	if diff := cmp.Diff(want, roottest.Tree(t, rootDir)); diff != "" {
		t.Errorf("root after Symlink (-want +got):\n%s", diff)
	}
}

func TestMkdir(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	mustMkdir(t, filepath.Join(rootDir, "etc", "existing"), 0o755)
	mustWrite(t, filepath.Join(rootDir, "etc", "file"), "x", 0o644)
	// What killed Mkdirs of /etc/new left: an empty temporary directory
	// (swept) and one with something in it (not ours to remove).
	mustMkdir(t, filepath.Join(rootDir, "etc", ".new.mcbake-0123456789ab"), 0o700)
	mustMkdir(t, filepath.Join(rootDir, "etc", ".new.mcbake-ba9876543210"), 0o700)
	mustWrite(t, filepath.Join(rootDir, "etc", ".new.mcbake-ba9876543210", "f"), "y", 0o644)
	if err := r.Mkdir("/etc/new", 0o1750, 1000, 1001); err != nil {
		t.Fatalf("Mkdir(new): %v", err)
	}
	if err := r.Mkdir("/etc/existing", 0o700, 1000, 0); err != nil {
		t.Fatalf("Mkdir(existing): %v", err)
	}
	if err := r.Mkdir("/etc/file", 0o700, 0, 0); err == nil {
		t.Error("Mkdir(file) = nil, want an error")
	}
	want := tree{
		"etc": "dir 0755 0:0", "etc/new": "dir 1750 1000:1001", "etc/existing": "dir 0700 1000:0", "etc/file": "file 0644 0:0 x",
		"etc/.new.mcbake-ba9876543210": "dir 0700 0:0", "etc/.new.mcbake-ba9876543210/f": "file 0644 0:0 y",
	}
	if diff := cmp.Diff(want, roottest.Tree(t, rootDir)); diff != "" {
		t.Errorf("root after Mkdir (-want +got):\n%s", diff)
	}
}

// TestMkdirNeverHalfMade: until the rename, the directory exists only
// under its temporary name, already with its mode and owner, so that a
// kill at any point leaves the path missing or made.
func TestMkdirNeverHalfMade(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	var during tree
	beforeRename = func(string) { during = roottest.Tree(t, rootDir) }
	t.Cleanup(func() { beforeRename = nil })
	if err := r.Mkdir("/etc/new", 0o1750, 1000, 1001); err != nil {
		t.Fatalf("Mkdir(new): %v", err)
	}
	if during == nil {
		t.Fatal("Mkdir made the directory without a rename")
	}
	var temps []string
	for p, v := range during {
		if p == "etc/new" {
			t.Errorf("before the rename, etc/new is there: %s", v)
		}
		if strings.HasPrefix(p, "etc/.new.mcbake-") {
			temps = append(temps, p)
			if v != "dir 1750 1000:1001" {
				t.Errorf("before the rename, %s is %q, want \"dir 1750 1000:1001\"", p, v)
			}
		}
	}
	if len(temps) != 1 {
		t.Errorf("before the rename, temporary directories %v, want one", temps)
	}
	if diff := cmp.Diff(tree{"etc": "dir 0755 0:0", "etc/new": "dir 1750 1000:1001"}, roottest.Tree(t, rootDir)); diff != "" {
		t.Errorf("root after Mkdir (-want +got):\n%s", diff)
	}
}

// TestTempNameFitsNameMax: a name of NAME_MAX bytes still has temporary
// and backup names within NAME_MAX, which isTempOf recognises.
func TestTempNameFitsNameMax(t *testing.T) {
	name := strings.Repeat("n", 255)
	for _, tmp := range []string{tempName(name), backupName(name)} {
		if len(tmp) > 255 || !tempPattern.MatchString(tmp) {
			t.Errorf("temporary name %q: %d bytes, want at most 255 matching %v", tmp, len(tmp), tempPattern)
		}
	}
	if tmp := tempName(name); !isTempOf(tmp, name) {
		t.Errorf("isTempOf(%q, the name) = false", tmp)
	}
}

// TestMkdirLongName: a directory and a file whose names are NAME_MAX
// bytes long are written (their temporary names fit too).
func TestMkdirLongName(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	name := strings.Repeat("d", 255)
	if err := r.Mkdir("/etc/"+name, 0o755, 0, 0); err != nil {
		t.Fatalf("Mkdir(255-byte name): %v", err)
	}
	if err := r.WriteFile("/etc/"+name+"/"+name, []byte("x"), 0o644, 0, 0); err != nil {
		t.Fatalf("WriteFile(255-byte name): %v", err)
	}
	want := tree{"etc": "dir 0755 0:0", "etc/" + name: "dir 0755 0:0", "etc/" + name + "/" + name: "file 0644 0:0 x"}
	if diff := cmp.Diff(want, roottest.Tree(t, rootDir)); diff != "" {
		t.Errorf("root (-want +got):\n%s", diff)
	}
}

func TestMkdirAll(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	mustMkdir(t, filepath.Join(rootDir, "usr", "real"), 0o700)
	mustSymlink(t, "/usr/real", filepath.Join(rootDir, "etc", "link"))
	var asked []string
	parent := func(p string) (uint32, int, int) {
		asked = append(asked, p)
		return 0o750, 1000, 1000
	}
	for _, d := range []string{"/etc/a/b/c", "/etc/link/x/y", "/etc/a/b"} {
		if err := r.MkdirAll(d, parent); err != nil {
			t.Fatalf("MkdirAll(%s): %v", d, err)
		}
	}
	wantAsked := []string{"/etc/a", "/etc/a/b", "/etc/a/b/c", "/etc/link/x", "/etc/link/x/y"}
	if diff := cmp.Diff(wantAsked, asked); diff != "" {
		t.Errorf("MkdirAll asked for (-want +got):\n%s", diff)
	}
	want := tree{
		"etc": "dir 0755 0:0", "etc/a": "dir 0750 1000:1000", "etc/a/b": "dir 0750 1000:1000", "etc/a/b/c": "dir 0750 1000:1000",
		"etc/link": "link /usr/real 0:0", "usr": "dir 0755 0:0", "usr/real": "dir 0700 0:0",
		"usr/real/x": "dir 0750 1000:1000", "usr/real/x/y": "dir 0750 1000:1000",
	}
	if diff := cmp.Diff(want, roottest.Tree(t, rootDir)); diff != "" {
		t.Errorf("root after MkdirAll (-want +got):\n%s", diff)
	}
}

func TestLink(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	mustWrite(t, filepath.Join(rootDir, "etc", "target"), "t", 0o600)
	mustWrite(t, filepath.Join(rootDir, "etc", "l"), "old", 0o644)
	mustSymlink(t, "/etc", filepath.Join(rootDir, "etc", "self"))
	if err := r.Link("/etc/l", "/etc/self/target"); err != nil {
		t.Fatalf("Link: %v", err)
	}
	a, errA := os.Lstat(filepath.Join(rootDir, "etc", "l"))
	b, errB := os.Lstat(filepath.Join(rootDir, "etc", "target"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("after Link, /etc/l and /etc/target are not the same file (%v, %v)", errA, errB)
	}
	if err := r.Link("/etc/l2", "/etc/missing"); err == nil {
		t.Error("Link to a missing target = nil, want an error")
	}
}

func TestRemove(t *testing.T) {
	rootDir, _, r := setup(t)
	mustWrite(t, filepath.Join(rootDir, "etc", "f"), "x", 0o644)
	mustSymlink(t, "f", filepath.Join(rootDir, "etc", "l"))
	mustMkdir(t, filepath.Join(rootDir, "etc", "d"), 0o755)
	for _, p := range []string{"/etc/l", "/etc/missing", "/missing/parent", "/etc/f/below"} {
		if err := r.Remove(p); err != nil {
			t.Errorf("Remove(%s) = %v, want nil", p, err)
		}
	}
	for _, p := range []string{"/etc/d", "/"} {
		if err := r.Remove(p); err == nil {
			t.Errorf("Remove(%s) = nil, want an error", p)
		}
	}
	got := roottest.Tree(t, rootDir)
	for _, p := range []string{"etc/f", "etc/d"} {
		if _, ok := got[p]; !ok {
			t.Errorf("Remove removed %s", p)
		}
	}
	if _, ok := got["etc/l"]; ok {
		t.Error("Remove(/etc/l) left the symlink")
	}
}
