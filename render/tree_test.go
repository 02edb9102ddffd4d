package render

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/manifest"
)

// node is what the tests compare of one path in a written tree.
type node struct {
	Type     manifest.Type
	Mode     os.FileMode // permission bits; 0 for symlinks
	Content  string      // sha256 digest, files
	Target   string      // symlinks
	UID, GID int         // only filled by listTreeOwners
}

// listTree describes every path under dir (not dir itself), keyed by its
// absolute path in the image.
func listTree(t testing.TB, dir string) map[string]node {
	t.Helper()
	return walkTree(t, dir, false)
}

func listTreeOwners(t testing.TB, dir string) map[string]node {
	t.Helper()
	return walkTree(t, dir, true)
}

func walkTree(t testing.TB, dir string, owners bool) map[string]node {
	t.Helper()
	out := map[string]node{}
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var n node
		switch {
		case fi.IsDir():
			n = node{Type: manifest.Directory, Mode: fi.Mode().Perm()}
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			n = node{Type: manifest.Symlink, Target: target}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			sum := sha256.Sum256(b)
			n = node{Type: manifest.File, Mode: fi.Mode().Perm(), Content: "sha256:" + hex.EncodeToString(sum[:])}
		}
		if owners {
			st := fi.Sys().(*syscall.Stat_t)
			n.UID, n.GID = int(st.Uid), int(st.Gid)
		}
		out[strings.TrimPrefix(p, dir)] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// expectTree is the tree res's entries describe: absent entries and hard
// links to files that were not rendered leave nothing; a hard link looks
// like its target; parents the root already has (so have no entry) are
// plain 0755 root:root directories.
func expectTree(res *Result, owners bool) map[string]node {
	files := map[string]manifest.Entry{}
	for _, e := range res.Entries {
		if e.Type == manifest.File {
			files[e.Path] = e.Entry
		}
	}
	out := map[string]node{}
	for _, e := range res.Entries {
		var n node
		switch e.Type {
		case manifest.Absent:
			continue
		case manifest.Hardlink:
			target, ok := files[e.Target]
			if !ok {
				continue
			}
			n = node{Type: manifest.File, Mode: os.FileMode(target.Mode), Content: string(target.Digest)}
			if owners {
				n.UID, n.GID = target.UID, target.GID
			}
			out[e.Where()] = n
			continue
		case manifest.Symlink:
			n = node{Type: manifest.Symlink, Target: e.Target}
		default:
			n = node{Type: e.Type, Mode: os.FileMode(e.Mode), Content: string(e.Digest)}
		}
		if owners {
			n.UID, n.GID = e.UID, e.GID
		}
		out[e.Where()] = n
	}
	for p := range out {
		for _, a := range ancestors(p) {
			if _, ok := out[a]; !ok {
				out[a] = node{Type: manifest.Directory, Mode: 0o755}
			}
		}
	}
	return out
}

// treeDocs exercise WriteTree: modes, owners by name, a read-only directory
// with content, symlinks, hard links (one to a file only the root has),
// files under a root symlink, a disabled base unit and SSH keys.
var treeDocs = []string{
	mcDoc("00-t", `"storage":{"files":[`+
		`{"path":"/etc/wt/secret","mode":384,"user":{"name":"core"},"group":{"name":"wheel"},"contents":{"source":"data:,s3cret"}},`+
		`{"path":"/etc/wt/script","mode":493,"contents":{"source":"data:,%23!/bin/sh%0A"}},`+
		`{"path":"/etc/wt/ro/inside","mode":292,"contents":{"source":"data:,ro"}},`+
		`{"path":"/usr/local/bin/tool","mode":493,"contents":{"source":"data:,tool"}}],`+
		`"directories":[{"path":"/etc/wt/ro","mode":365},{"path":"/etc/wt/private","mode":448,"user":{"name":"core"},"group":{"id":1000}}],`+
		`"links":[{"path":"/etc/wt/l","target":"secret"},{"path":"/etc/wt/h","target":"/etc/wt/secret","hard":true}]},`+
		`"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA k"]}]},`+
		`"systemd":{"units":[{"name":"rootenabled.service","enabled":false},{"name":"w.service","enabled":true,"contents":"[Install]\nWantedBy=multi-user.target\n"}]}`),
}

func TestWriteTree(t *testing.T) {
	res, err := renderDocs(t, makeRoot(t, rhcosSpec()), treeDocs...)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	m := res.Manifest(parseDocs(t, treeDocs...))
	out := filepath.Join(t.TempDir(), "out")
	t.Cleanup(func() {
		if err := atomicdir.RemoveTree(out); err != nil {
			t.Error(err)
		}
	})
	if err := WriteTree(context.Background(), out, res, m, WriteOptions{}); err != nil {
		t.Fatalf("WriteTree() = %v", err)
	}
	// A second write replaces the first, read-only directory included.
	if err := WriteTree(context.Background(), out, res, m, WriteOptions{}); err != nil {
		t.Fatalf("WriteTree() over an earlier output = %v", err)
	}
	rootfs := filepath.Join(out, "rootfs")
	got := listTree(t, rootfs)
	if diff := cmp.Diff(expectTree(res, false), got); diff != "" {
		t.Errorf("WriteTree() rootfs mismatch (-want +got):\n%s", diff)
	}
	spot := map[string]node{
		"/etc/wt/ro":                 {Type: manifest.Directory, Mode: 0o555},
		"/etc/wt/secret":             {Type: manifest.File, Mode: 0o600, Content: string(sha("s3cret"))},
		"/var/usrlocal/bin/tool":     {Type: manifest.File, Mode: 0o755, Content: string(sha("tool"))},
		"/etc/wt/l":                  {Type: manifest.Symlink, Target: "secret"},
		"/etc/wt/h":                  {Type: manifest.File, Mode: 0o600, Content: string(sha("s3cret"))},
		"/var/home/core/.ssh":        {Type: manifest.Directory, Mode: 0o700},
		"/etc/machine-config-daemon": {Type: manifest.Directory, Mode: 0o755},
	}
	gotSpot := map[string]node{}
	for p := range spot {
		gotSpot[p] = got[p]
	}
	if diff := cmp.Diff(spot, gotSpot); diff != "" {
		t.Errorf("WriteTree() rootfs spot checks mismatch (-want +got):\n%s", diff)
	}
	for _, p := range []string{"/etc/systemd/system/multi-user.target.wants/rootenabled.service", "/usr/local"} {
		if _, ok := got[p]; ok {
			t.Errorf("WriteTree() wrote %s, want it absent", p)
		}
	}
	a, errA := os.Stat(filepath.Join(rootfs, "etc/wt/secret"))
	b, errB := os.Stat(filepath.Join(rootfs, "etc/wt/h"))
	if errA != nil || errB != nil || !os.SameFile(a, b) {
		t.Errorf("WriteTree() /etc/wt/h is not a hard link of /etc/wt/secret (%v, %v)", errA, errB)
	}
	wantManifest, err := manifest.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	gotManifest, err := os.ReadFile(filepath.Join(out, "manifest.json"))
	if err != nil || string(gotManifest) != string(wantManifest) {
		t.Errorf("WriteTree() manifest.json differs from manifest.Marshal() (%v)", err)
	}
	if ents := dirNames(t, filepath.Dir(out)); !cmp.Equal(ents, []string{"out"}) {
		t.Errorf("WriteTree() left %q next to the output, want only out", ents)
	}
}

func TestWriteTreeOwners(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skipf("owners are applied with chown, which needs root; running as uid %d", os.Geteuid())
	}
	res, err := renderDocs(t, makeRoot(t, rhcosSpec()), treeDocs...)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := WriteTree(context.Background(), out, res, res.Manifest(nil), WriteOptions{Chown: true}); err != nil {
		t.Fatalf("WriteTree(chown) = %v", err)
	}
	got := listTreeOwners(t, filepath.Join(out, "rootfs"))
	if diff := cmp.Diff(expectTree(res, true), got); diff != "" {
		t.Errorf("WriteTree(chown) rootfs mismatch (-want +got):\n%s", diff)
	}
	if n := got["/etc/wt/secret"]; n.UID != 1000 || n.GID != 10 {
		t.Errorf("WriteTree(chown) /etc/wt/secret owner = %d:%d, want 1000:10", n.UID, n.GID)
	}
}

func dirNames(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

func fileEntry(p, content string) Entry {
	return Entry{Entry: manifest.Entry{Path: p, Type: manifest.File, Mode: 0o644, Digest: sha(content), Size: int64(len(content))}, Content: []byte(content)}
}

func TestWriteTreeReplace(t *testing.T) {
	first := &Result{Entries: []Entry{fileEntry("/first", "1"), fileEntry("/both", "1")}}
	second := &Result{Entries: []Entry{fileEntry("/second", "2"), fileEntry("/both", "2")}}
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	for _, res := range []*Result{first, second} {
		if err := WriteTree(context.Background(), out, res, res.Manifest(nil), WriteOptions{}); err != nil {
			t.Fatalf("WriteTree() = %v", err)
		}
	}
	if diff := cmp.Diff(expectTree(second, false), listTree(t, filepath.Join(out, "rootfs"))); diff != "" {
		t.Errorf("WriteTree() second write mismatch (-want +got):\n%s", diff)
	}
	if got := dirNames(t, parent); !cmp.Equal(got, []string{"out"}) {
		t.Errorf("WriteTree() left %q in the parent, want only out", got)
	}
}

// TestWriteTreeFailure makes the write fail after some entries were
// written: no output and no temporary directory may remain, and an earlier
// output must be kept as it was.
func TestWriteTreeFailure(t *testing.T) {
	bad := &Result{Entries: []Entry{fileEntry("/a", "a"), fileEntry("/b", "b"), fileEntry("/b", "again")}}
	good := &Result{Entries: []Entry{fileEntry("/good", "g")}}
	t.Run("fresh", func(t *testing.T) {
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		err := WriteTree(context.Background(), out, bad, bad.Manifest(nil), WriteOptions{})
		if err == nil || !strings.HasPrefix(err.Error(), "writing /b: open ") || !errors.Is(err, os.ErrExist) {
			t.Errorf("WriteTree(duplicate path) = %v, want a writing /b error (file exists)", err)
		}
		if got := dirNames(t, parent); got != nil {
			t.Errorf("WriteTree(duplicate path) left %q, want nothing", got)
		}
	})
	t.Run("over an earlier output", func(t *testing.T) {
		parent := t.TempDir()
		out := filepath.Join(parent, "out")
		if err := WriteTree(context.Background(), out, good, good.Manifest(nil), WriteOptions{}); err != nil {
			t.Fatal(err)
		}
		before := listTree(t, out)
		if err := WriteTree(context.Background(), out, bad, bad.Manifest(nil), WriteOptions{}); err == nil {
			t.Errorf("WriteTree(duplicate path) = nil, want an error")
		}
		if diff := cmp.Diff(before, listTree(t, out)); diff != "" {
			t.Errorf("WriteTree(duplicate path) changed the earlier output (-want +got):\n%s", diff)
		}
		if got := dirNames(t, parent); !cmp.Equal(got, []string{"out"}) {
			t.Errorf("WriteTree(duplicate path) left %q, want only out", got)
		}
	})
}

func TestWriteTreeRefusesToReplace(t *testing.T) {
	parent := t.TempDir()
	res := &Result{Entries: []Entry{fileEntry("/x", "x")}}
	foreign := filepath.Join(parent, "home")
	if err := os.MkdirAll(filepath.Join(foreign, "rootfs"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(foreign, "notes.txt"), []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	asFile := filepath.Join(parent, "file")
	if err := os.WriteFile(asFile, []byte("keep me"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct{ dir, want string }{
		{foreign, foreign + " is not empty and not an earlier render output (it has notes.txt): refusing to replace it"},
		{asFile, asFile + " exists and is not a directory"},
	}
	for _, tt := range tests {
		err := WriteTree(context.Background(), tt.dir, res, res.Manifest(nil), WriteOptions{})
		if err == nil || err.Error() != tt.want {
			t.Errorf("WriteTree(%s) = %v, want %q", tt.dir, err, tt.want)
		}
	}
	if b, err := os.ReadFile(filepath.Join(foreign, "notes.txt")); err != nil || string(b) != "keep me" {
		t.Errorf("WriteTree() touched %s/notes.txt: %q, %v", foreign, b, err)
	}
	if got := dirNames(t, parent); !cmp.Equal(got, []string{"file", "home"}) {
		t.Errorf("WriteTree() left %q, want only file and home", got)
	}
	empty := filepath.Join(parent, "empty")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := WriteTree(context.Background(), empty, res, res.Manifest(nil), WriteOptions{}); err != nil {
		t.Errorf("WriteTree(empty dir) = %v, want nil", err)
	}
}

// TestWriteTreeTraversal hands WriteTree results that did not come from
// Render: nothing may be written outside the output directory.
func TestWriteTreeTraversal(t *testing.T) {
	host := t.TempDir() // stands for any directory of the build host
	hostInfo, err := os.Stat(host)
	if err != nil {
		t.Fatal(err)
	}
	link := func(p, target string) Entry {
		return Entry{Entry: manifest.Entry{Path: p, Type: manifest.Symlink, Mode: 0o777, Target: target}}
	}
	tests := []struct {
		name    string
		entries []Entry
		want    string
	}{{
		name:    "../ in a path",
		entries: []Entry{fileEntry("/../../escape", "x")},
		want:    `writing /../../escape: path "/../../escape" is not absolute and clean`,
	}, {
		name:    "relative path",
		entries: []Entry{fileEntry("escape", "x")},
		want:    `writing escape: path "escape" is not absolute and clean`,
	}, {
		name:    "file under a symlink to the host",
		entries: []Entry{link("/etc/x", host), fileEntry("/etc/x/payload", "x")},
		want:    "writing /etc/x/payload: a parent directory of /etc/x/payload is a symlink",
	}, {
		name:    "file under a relative symlink climbing out",
		entries: []Entry{link("/etc/x", "../../../../../../../.."+host), fileEntry("/etc/x/payload", "x")},
		want:    "writing /etc/x/payload: a parent directory of /etc/x/payload is a symlink",
	}, {
		name: "directory over a symlink to the host",
		entries: []Entry{link("/etc/x", host),
			{Entry: manifest.Entry{Path: "/etc/x", ResolvedPath: "/etc/x", Type: manifest.Directory, Mode: 0o777}}},
		want: "writing /etc/x: mkdir ",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			parent := t.TempDir()
			res := &Result{Entries: tt.entries}
			err := WriteTree(context.Background(), filepath.Join(parent, "out"), res, res.Manifest(nil), WriteOptions{})
			if err == nil || !strings.HasPrefix(err.Error(), tt.want) {
				t.Errorf("WriteTree() = %v, want an error starting with %q", err, tt.want)
			}
			if got := dirNames(t, host); got != nil {
				t.Errorf("WriteTree() wrote %q into the host directory", got)
			}
			if fi, err := os.Stat(host); err != nil || fi.Mode() != hostInfo.Mode() {
				t.Errorf("WriteTree() changed the host directory: %v, %v", fi.Mode(), err)
			}
			if got := dirNames(t, parent); got != nil {
				t.Errorf("WriteTree() left %q, want nothing", got)
			}
		})
	}
	hard := &Result{Entries: []Entry{link("/etc/x", host), {Entry: manifest.Entry{Path: "/etc/h", Type: manifest.Hardlink, Target: "/etc/x/secret"}}}}
	if err := os.WriteFile(filepath.Join(host, "secret"), []byte("host secret"), 0o600); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "out")
	if err := WriteTree(context.Background(), out, hard, hard.Manifest(nil), WriteOptions{}); err != nil {
		t.Fatalf("WriteTree(hard link through a symlink) = %v", err)
	}
	if _, err := os.Lstat(filepath.Join(out, "rootfs", "etc", "h")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("WriteTree() linked /etc/h to a host file (Lstat: %v), want it skipped", err)
	}
}

// countingTree counts the lookups made in a root.
type countingTree struct {
	fstree.Tree
	lookups int
}

func (c *countingTree) Lstat(p string) (manifest.Entry, bool, error) {
	c.lookups++
	return c.Tree.Lstat(p)
}

// TestDeepPathLinear: a file 1,000 directories deep (a hostile
// MachineConfig; well under PATH_MAX) costs a number of root lookups
// linear in its depth, and its parents resolve through a symlink in the
// root as before. Resolving every parent on its own made it cubic: such a
// MachineConfig held render, build and verify for minutes.
func TestDeepPathLinear(t *testing.T) {
	const depth = 1000
	deep := "/etc/alt" + strings.Repeat("/d", depth) + "/f.conf"
	root := &countingTree{Tree: makeRoot(t, map[string]string{"etc/real/": "", "etc/alt": "-> real"})}
	res, err := renderDocs(t, root, mcDoc("99-deep", `"storage":{"files":[{"path":"`+deep+`","contents":{"source":"data:,x"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d lookups", root.lookups)
	if root.lookups > 20*depth {
		t.Errorf("rendering a file %d directories deep made %d root lookups, want at most %d", depth, root.lookups, 20*depth)
	}
	want := "/etc/real" + strings.Repeat("/d", depth) + "/f.conf"
	dirs := 0
	for _, e := range res.Entries {
		switch {
		case e.Path == deep && e.Where() != want:
			t.Errorf("%s lands at %s, want %s", deep, e.Where(), want)
		case e.Type == manifest.Directory && strings.HasPrefix(e.Where(), "/etc/real/d"):
			dirs++
		case e.Type == manifest.Directory:
			t.Logf("directory %s (%s)", e.Path, e.Where())
		}
	}
	if dirs != depth {
		t.Errorf("rendering made %d parent directories, want %d", dirs, depth)
	}
	if err := WriteEntries(context.Background(), t.TempDir(), res.Entries, WriteOptions{}); err != nil {
		t.Errorf("WriteEntries: %v", err)
	}
}

// TestWriteTreeCancelled: a cancelled write stops, returns the context's
// error and leaves neither the output nor its temporary sibling.
func TestWriteTreeCancelled(t *testing.T) {
	res, err := renderDocs(t, nil, mcDoc("99-a", `"storage":{"files":[{"path":"/etc/a.conf","contents":{"source":"data:,a"}}]}`))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	parent := t.TempDir()
	out := filepath.Join(parent, "out")
	if err := WriteTree(ctx, out, res, res.Manifest(nil), WriteOptions{}); !errors.Is(err, context.Canceled) {
		t.Fatalf("WriteTree(cancelled) = %v, want context.Canceled", err)
	}
	if names, _ := os.ReadDir(parent); len(names) != 0 {
		t.Errorf("left in %s: %v", parent, names)
	}
}
