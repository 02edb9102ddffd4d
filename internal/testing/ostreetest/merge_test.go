package ostreetest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// These tests pin what real ostree's three-way /etc merge does on a revert
// L -> B, one rule per case (docs/design.md, "ostree's /etc merge"). In each, l and b are the two
// images' /etc, node is what the machine-config-daemon does to the live
// /etc of the L deployment, and want is the B deployment's /etc after
// `ostree admin deploy` (nil: absent).

type mergeCase struct {
	name string
	l, b map[string]entry
	node []op
	want map[string]*entry
}

func ptr(e entry) *entry { return &e }

var mergeCases = []mergeCase{
	{
		// The clobber: the MCD rewrote L's file byte for byte (new inode,
		// new mtime), so ostree sees it unmodified and takes B's.
		name: "unmodified takes B's version",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", file(0o644, "L"))},
		want: map[string]*entry{"a": ptr(file(0o644, "B"))},
	},
	{
		name: "unmodified and absent from B is removed",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{},
		node: []op{write("a", file(0o644, "L"))},
		want: map[string]*entry{"a": nil},
	},
	{
		name: "modified content is kept",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", file(0o644, "T"))},
		want: map[string]*entry{"a": ptr(file(0o644, "T"))},
	},
	{
		name: "added on the node is kept",
		l:    map[string]entry{},
		b:    map[string]entry{},
		node: []op{write("a", file(0o600, "T").owned(1000, 1000))},
		want: map[string]*entry{"a": ptr(file(0o600, "T").owned(1000, 1000))},
	},
	{
		name: "added on the node wins over B's default",
		l:    map[string]entry{},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", file(0o644, "T"))},
		want: map[string]*entry{"a": ptr(file(0o644, "T"))},
	},
	{
		name: "removed on the node stays removed",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{remove("a")},
		want: map[string]*entry{"a": nil},
	},
	{
		// ostree removes the whole path from B's /etc, B's new files in it
		// included.
		name: "directory removed on the node takes B's new files with it",
		l:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "L")},
		b:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "B"), "d/g": file(0o644, "B")},
		node: []op{remove("d")},
		want: map[string]*entry{"d": nil, "d/f": nil, "d/g": nil},
	},
	{
		name: "mode-only change counts as modified",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", file(0o600, "L"))},
		want: map[string]*entry{"a": ptr(file(0o600, "L"))},
	},
	{
		name: "owner-only change counts as modified",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", file(0o644, "L").owned(1000, 0))},
		want: map[string]*entry{"a": ptr(file(0o644, "L").owned(1000, 0))},
	},
	{
		name: "group-only change counts as modified",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", file(0o644, "L").owned(0, 1000))},
		want: map[string]*entry{"a": ptr(file(0o644, "L").owned(0, 1000))},
	},
	{
		name: "mtime-only change is not a modification",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{touch("a", time.Date(2001, 2, 3, 4, 5, 6, 0, time.UTC))},
		want: map[string]*entry{"a": ptr(file(0o644, "B"))},
	},
	{
		name: "symlink target change is kept",
		l:    map[string]entry{"a": link("/usr/lib/l")},
		b:    map[string]entry{"a": link("/usr/lib/b")},
		node: []op{write("a", link("/usr/lib/t"))},
		want: map[string]*entry{"a": ptr(link("/usr/lib/t"))},
	},
	{
		name: "unmodified symlink takes B's target",
		l:    map[string]entry{"a": link("/usr/lib/l")},
		b:    map[string]entry{"a": link("/usr/lib/b")},
		node: []op{write("a", link("/usr/lib/l"))},
		want: map[string]*entry{"a": ptr(link("/usr/lib/b"))},
	},
	{
		// A unit mask: the file becomes a symlink to /dev/null.
		name: "file replaced by a symlink is kept",
		l:    map[string]entry{"a": file(0o644, "L")},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", link("/dev/null"))},
		want: map[string]*entry{"a": ptr(link("/dev/null"))},
	},
	{
		// An enablement link L has and the node removed (systemctl
		// disable) comes back with B: both L and the node lack it, so it
		// is not a node change at all.
		name: "link absent from L and the node comes back from B",
		l:    map[string]entry{},
		b:    map[string]entry{"w": dir(0o755), "w/a": link("/usr/lib/a")},
		node: nil,
		want: map[string]*entry{"w": ptr(dir(0o755)), "w/a": ptr(link("/usr/lib/a"))},
	},
	{
		name: "directory created only in L goes with its unmodified files",
		l:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "L")},
		b:    map[string]entry{},
		node: []op{write("d/f", file(0o644, "L"))},
		want: map[string]*entry{"d": nil, "d/f": nil},
	},
	{
		name: "file under a new nested directory is kept with the node's directories",
		l:    map[string]entry{},
		b:    map[string]entry{},
		node: []op{
			write("n1", dir(0o750)),
			write("n1/n2", dir(0o700).owned(1000, 1000)),
			write("n1/n2/f", file(0o640, "T")),
		},
		want: map[string]*entry{
			"n1":      ptr(dir(0o750)),
			"n1/n2":   ptr(dir(0o700).owned(1000, 1000)),
			"n1/n2/f": ptr(file(0o640, "T")),
		},
	},
	{
		name: "directory mode-only change is lost when B has the directory",
		l:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "L")},
		b:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "B")},
		node: []op{chmod("d", 0o700)},
		want: map[string]*entry{"d": ptr(dir(0o755)), "d/f": ptr(file(0o644, "B"))},
	},
	{
		name: "directory owner-only change is lost when B has the directory",
		l:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "L")},
		b:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "B")},
		node: []op{write("d", dir(0o755).owned(1000, 1000))},
		want: map[string]*entry{"d": ptr(dir(0o755)), "d/f": ptr(file(0o644, "B"))},
	},
	{
		// ostree recreates a modified file's parents from the node's
		// directories (ensure_directory_from_template), even where B has
		// them: the directory's mode change survives.
		name: "directory mode change is kept when a file below it is modified",
		l:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "L")},
		b:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "B")},
		node: []op{chmod("d", 0o700), write("d/f", file(0o644, "T"))},
		want: map[string]*entry{"d": ptr(dir(0o700)), "d/f": ptr(file(0o644, "T"))},
	},
	{
		// The same mechanism overrides B's own default for the directory:
		// the node's copy of it is unmodified, yet B's mode is lost.
		name: "unmodified directory takes the node's mode when a file below it is added",
		l:    map[string]entry{"d": dir(0o755)},
		b:    map[string]entry{"d": dir(0o750).owned(0, 1000)},
		node: []op{write("d/new", file(0o644, "T"))},
		want: map[string]*entry{"d": ptr(dir(0o755)), "d/new": ptr(file(0o644, "T"))},
	},
	{
		// A modified directory that B lacks is copied whole, so its
		// unmodified files survive although B lacks them too.
		name: "directory mode change where B lacks the directory keeps all of it",
		l:    map[string]entry{"d": dir(0o755), "d/f": file(0o644, "L")},
		b:    map[string]entry{},
		node: []op{chmod("d", 0o700)},
		want: map[string]*entry{"d": ptr(dir(0o700)), "d/f": ptr(file(0o644, "L"))},
	},
	{
		name: "directory added on the node replaces B's file",
		l:    map[string]entry{},
		b:    map[string]entry{"a": file(0o644, "B")},
		node: []op{write("a", dir(0o755)), write("a/f", file(0o644, "T"))},
		want: map[string]*entry{"a": ptr(dir(0o755)), "a/f": ptr(file(0o644, "T"))},
	},
}

func TestMerge(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	for _, tt := range mergeCases {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := Revert(t, image(t, tt.l, nil), image(t, tt.b, nil), apply(tt.node))
			got := readAll(t, filepath.Join(root, "etc"), keys(tt.want))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("B's /etc after the revert (-want +got):\n%s", diff)
			}
		})
	}
}

// TestMergeIgnoresXattrs: an xattr-only change is not a modification.
func TestMergeIgnoresXattrs(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	probe := filepath.Join(t.TempDir(), "probe")
	if err := os.WriteFile(probe, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := setxattr("probe", "user.mcbake", "x")(filepath.Dir(probe)); err != nil {
		t.Skipf("no user xattrs on the temporary directory's filesystem: %v", err)
	}
	l := image(t, map[string]entry{"a": file(0o644, "L")}, nil)
	b := image(t, map[string]entry{"a": file(0o644, "B")}, nil)
	root := Revert(t, l, b, setxattr("a", "user.mcbake", "node"))
	got := readAll(t, filepath.Join(root, "etc"), []string{"a"})
	if diff := cmp.Diff(map[string]*entry{"a": ptr(file(0o644, "B"))}, got); diff != "" {
		t.Errorf("B's /etc after the revert (-want +got):\n%s", diff)
	}
	if _, err := unix.Lgetxattr(filepath.Join(root, "etc", "a"), "user.mcbake", make([]byte, 16)); !errors.Is(err, unix.ENODATA) {
		t.Errorf("user.mcbake on B's /etc/a: err = %v, want ENODATA (B's default has no xattr)", err)
	}
}

// TestMergeRefusesFileOverBDirectory: a node file where B has a directory
// makes ostree refuse the deployment (on a node: finalization fails and it
// stays on L).
func TestMergeRefusesFileOverBDirectory(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	l := image(t, map[string]entry{"a": file(0o644, "L")}, nil)
	b := image(t, map[string]entry{"a": dir(0o755), "a/f": file(0o644, "B")}, nil)
	work := t.TempDir()
	t.Cleanup(func() { unseal(work) })
	_, _, err := revert(work, l, b, apply([]op{write("a", file(0o644, "T"))}))
	if err == nil || !strings.Contains(err.Error(), "newly defaults to directory") {
		t.Errorf("revert with a node file over B's directory: err = %v, want ostree's \"newly defaults to directory\"", err)
	}
}

// TestRevertLayout checks the image import layout on the deployed B root
// and that the node's /var is the stateroot's, shared and untouched.
func TestRevertLayout(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	other := map[string]entry{
		"run":       dir(0o755),
		"run/x":     file(0o644, "x"),
		"var":       dir(0o755),
		"var/lib":   dir(0o755),
		"var/lib/x": file(0o644, "image var"),
		"opt":       link("var/opt"),
	}
	l := image(t, map[string]entry{"a": file(0o644, "L")}, other)
	b := image(t, map[string]entry{"a": file(0o644, "B")}, other)
	var lVar string
	root := Revert(t, l, b, func(etc string) error {
		lVar = VarDir(filepath.Dir(etc))
		return put(filepath.Join(lVar, "lib", "node"), file(0o644, "node var"))
	})
	if VarDir(root) != lVar {
		t.Errorf("VarDir(B) = %s, VarDir(L) = %s, want the same stateroot /var", VarDir(root), lVar)
	}
	want := map[string]*entry{
		"etc/a":                    ptr(file(0o644, "B")),
		"usr/etc/a":                ptr(file(0o644, "B")),
		"run":                      ptr(dir(0o755)),
		"run/x":                    nil,
		"opt":                      ptr(link("var/opt")),
		"var/lib/x":                ptr(file(0o644, "image var")),
		fakeKernelDir + "/vmlinuz": ptr(file(0o644, "ostreetest fake kernel\n")),
	}
	if diff := cmp.Diff(want, readAll(t, root, keys(want))); diff != "" {
		t.Errorf("B deployment root (-want +got):\n%s", diff)
	}
	wantVar := map[string]*entry{"lib/node": ptr(file(0o644, "node var")), "lib/x": nil}
	if diff := cmp.Diff(wantVar, readAll(t, VarDir(root), keys(wantVar))); diff != "" {
		t.Errorf("node /var after the revert (-want +got):\n%s", diff)
	}
}
