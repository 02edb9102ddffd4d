package revert_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/testing/nodetest"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
)

// shape is one entry of a hand-made image tree: a file, directory,
// symlink or hard link (Data: the root-relative path it links to).
type shape struct {
	T        byte // 'f', 'd', 'l', 'h'
	Mode     uint32
	UID, GID int
	Data     string
}

func sFile(mode uint32, s string) shape { return shape{T: 'f', Mode: mode, Data: s} }
func sDir(mode uint32) shape            { return shape{T: 'd', Mode: mode} }
func sLink(t string) shape              { return shape{T: 'l', Mode: 0o777, Data: t} }
func sHard(t string) shape              { return shape{T: 'h', Data: t} }
func (s shape) own(u, g int) shape      { s.UID, s.GID = u, g; return s }

// put makes s at p, replacing what is there unless both are directories.
func (s shape) put(t *testing.T, p string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(p); err == nil && (!fi.IsDir() || s.T != 'd') {
		if err := os.RemoveAll(p); err != nil {
			t.Fatal(err)
		}
	}
	var err error
	switch s.T {
	case 'f':
		err = os.WriteFile(p, []byte(s.Data), 0o600)
	case 'd':
		if err = os.Mkdir(p, 0o700); errors.Is(err, fs.ErrExist) {
			err = nil
		}
	case 'l':
		err = os.Symlink(s.Data, p)
	case 'h':
		if err = os.Link(s.Data, p); err == nil {
			return
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(p, s.UID, s.GID); err != nil {
		t.Fatal(err)
	}
	if s.T != 'l' {
		if err := unix.Chmod(p, s.Mode); err != nil {
			t.Fatal(err)
		}
	}
}

// shapeTree writes a root with etc, usr and var and the shapes (by
// root-relative path), hard links last.
func shapeTree(t *testing.T, shapes map[string]shape) string {
	t.Helper()
	root := t.TempDir()
	all := map[string]shape{"etc": sDir(0o755), "usr": sDir(0o755), "usr/lib": sDir(0o755), "var": sDir(0o755)}
	for p, s := range shapes {
		all[p] = s
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, links := range []bool{false, true} {
		for _, p := range paths {
			s := all[p]
			if (s.T == 'h') != links {
				continue
			}
			if s.T == 'h' {
				s.Data = filepath.Join(root, s.Data)
			}
			s.put(t, filepath.Join(root, p))
		}
	}
	return root
}

// shapeCase is an image L, a base B, what the MachineConfigs own, and
// what the node changed in L's /etc (nil removes), for PredictDerived
// when derived.
type shapeCase struct {
	name    string
	l, b    map[string]shape
	owned   []manifest.Entry
	node    map[string]*shape
	derived bool
	// refused is part of ostree's error when the case makes it refuse
	// the deployment.
	refused string
}

// TestPredictShapes checks the prediction against real ostree for the
// less common shapes: a path whose type differs between the image and the
// base, symlinked parents (into /etc, into /var, dangling), owner- and
// mode-only differences, hard links, whiteouts, directories the node
// changed, parents that make ostree refuse the deployment. Each case
// predicts the revert from L to B, then reverts a node with `ostree admin
// deploy` and checks, for every owned path, that it is as the
// MachineConfig wants exactly when the prediction says it is not
// clobbered; where ostree refuses, that the prediction says so.
func TestPredictShapes(t *testing.T) {
	if ok, why := ostreetest.Available(); !ok {
		t.Skip(why)
	}
	for _, c := range []shapeCase{
		{
			name:  "L directory, B symlink into /var",
			l:     map[string]shape{"etc/foo": sDir(0o755), "etc/foo/x.conf": sFile(0o644, "x\n")},
			b:     map[string]shape{"etc/foo": sLink("../var/lib/foo"), "var/lib/foo": sDir(0o755), "var/lib/foo/x.conf": sFile(0o644, "x\n")},
			owned: []manifest.Entry{dirEntry("/etc/foo", 0o755), fileEntry("/etc/foo/x.conf", "x\n", 0o644, 0, 0)},
		},
		{
			name:  "L file, B directory",
			l:     map[string]shape{"etc/a": sFile(0o644, "L\n")},
			b:     map[string]shape{"etc/a": sDir(0o755), "etc/a/f": sFile(0o644, "B\n")},
			owned: []manifest.Entry{fileEntry("/etc/a", "L\n", 0o644, 0, 0)},
		},
		{
			name:  "L directory, B file",
			l:     map[string]shape{"etc/d": sDir(0o755), "etc/d/f": sFile(0o644, "L\n")},
			b:     map[string]shape{"etc/d": sFile(0o644, "B\n")},
			owned: []manifest.Entry{dirEntry("/etc/d", 0o755), fileEntry("/etc/d/f", "L\n", 0o644, 0, 0)},
		},
		{
			name:  "L symlink, B directory",
			l:     map[string]shape{"etc/s": sLink("/dev/null")},
			b:     map[string]shape{"etc/s": sDir(0o755)},
			owned: []manifest.Entry{linkEntry("/etc/s", "/dev/null")},
		},
		{
			name:  "L directory, B symlink to an /etc directory",
			l:     map[string]shape{"etc/d": sDir(0o755), "etc/d/f": sFile(0o644, "L\n")},
			b:     map[string]shape{"etc/d": sLink("real"), "etc/real": sDir(0o755), "etc/real/f": sFile(0o644, "L\n")},
			owned: []manifest.Entry{dirEntry("/etc/d", 0o755), fileEntry("/etc/d/f", "L\n", 0o644, 0, 0)},
		},
		{
			name:  "L directory, B dangling symlink",
			l:     map[string]shape{"etc/d": sDir(0o755), "etc/d/f": sFile(0o644, "L\n")},
			b:     map[string]shape{"etc/d": sLink("nowhere")},
			owned: []manifest.Entry{dirEntry("/etc/d", 0o755), fileEntry("/etc/d/f", "L\n", 0o644, 0, 0)},
		},
		{
			name:  "symlink owner only",
			l:     map[string]shape{"etc/s": sLink("/etc/t")},
			b:     map[string]shape{"etc/s": sLink("/etc/t").own(1000, 1000)},
			owned: []manifest.Entry{linkEntry("/etc/s", "/etc/t")},
		},
		{
			name:  "setuid bit only in B",
			l:     map[string]shape{"etc/x": sFile(0o755, "x\n")},
			b:     map[string]shape{"etc/x": sFile(0o4755, "x\n")},
			owned: []manifest.Entry{fileEntry("/etc/x", "x\n", 0o755, 0, 0)},
		},
		{
			name:  "removal of a path B has",
			b:     map[string]shape{"etc/w": sDir(0o755), "etc/w/a": sLink("/usr/lib/a")},
			owned: []manifest.Entry{absentEntry("/etc/w/a")},
		},
		{
			name:  "hard link, B links the same pair with other content",
			l:     map[string]shape{"etc/b": sFile(0o644, "L\n"), "etc/a": sHard("etc/b")},
			b:     map[string]shape{"etc/b": sFile(0o644, "B\n"), "etc/a": sHard("etc/b")},
			owned: []manifest.Entry{fileEntry("/etc/b", "L\n", 0o644, 0, 0), hardEntry("/etc/a", "/etc/b")},
		},
		{
			name:  "hard link, B the same",
			l:     map[string]shape{"etc/b": sFile(0o644, "L\n"), "etc/a": sHard("etc/b")},
			b:     map[string]shape{"etc/b": sFile(0o644, "L\n"), "etc/a": sHard("etc/b")},
			owned: []manifest.Entry{fileEntry("/etc/b", "L\n", 0o644, 0, 0), hardEntry("/etc/a", "/etc/b")},
		},
		{
			name:  "owned directory with another mode in B, the stored config below",
			l:     map[string]shape{"etc/machine-config-daemon": sDir(0o755), "etc/machine-config-daemon/currentconfig": sFile(0o644, "{}")},
			b:     map[string]shape{"etc/machine-config-daemon": sDir(0o700)},
			owned: []manifest.Entry{dirEntry("/etc/machine-config-daemon", 0o755)},
			node:  map[string]*shape{"machine-config-daemon/currentconfig": {T: 'f', Mode: 0o644, Data: "{new}"}},
		},
		{
			name:    "directory the node changed, B lacks it, a directory inside",
			derived: true,
			l:       map[string]shape{"etc/d": sDir(0o700), "etc/d/e": sDir(0o755), "etc/d/e/f": sFile(0o644, "L\n")},
			owned:   []manifest.Entry{dirEntry("/etc/d", 0o755), dirEntry("/etc/d/e", 0o755), fileEntry("/etc/d/e/f", "L\n", 0o644, 0, 0)},
			node:    map[string]*shape{"d": {T: 'd', Mode: 0o755}},
		},
		{
			name:    "directory the node changed, B has a file there",
			derived: true,
			l:       map[string]shape{"etc/d": sDir(0o700), "etc/d/f": sFile(0o644, "L\n")},
			b:       map[string]shape{"etc/d": sFile(0o644, "B\n")},
			owned:   []manifest.Entry{dirEntry("/etc/d", 0o755), fileEntry("/etc/d/f", "L\n", 0o644, 0, 0)},
			node:    map[string]*shape{"d": {T: 'd', Mode: 0o755}},
		},
		{
			name:    "file the node changed, B's parent a dangling symlink",
			derived: true,
			l:       map[string]shape{"etc/d": sDir(0o755), "etc/d/f": sFile(0o644, "L\n")},
			b:       map[string]shape{"etc/d": sLink("nowhere")},
			owned:   []manifest.Entry{fileEntry("/etc/d/f", "M\n", 0o644, 0, 0)},
			node:    map[string]*shape{"d/f": {T: 'f', Mode: 0o644, Data: "M\n"}},
			refused: "No such file or directory",
		},
		{
			name:    "file the node changed, B has a file at its parent",
			derived: true,
			l:       map[string]shape{"etc/d": sDir(0o755), "etc/d/f": sFile(0o644, "L\n")},
			b:       map[string]shape{"etc/d": sFile(0o644, "B\n")},
			owned:   []manifest.Entry{fileEntry("/etc/d/f", "M\n", 0o644, 0, 0)},
			node:    map[string]*shape{"d/f": {T: 'f', Mode: 0o644, Data: "M\n"}},
			refused: "Not a directory",
		},
		{
			name:    "directory the node changed, B a symlink to a directory",
			derived: true,
			l:       map[string]shape{"etc/d": sDir(0o700), "etc/d/f": sFile(0o644, "L\n")},
			b:       map[string]shape{"etc/d": sLink("real"), "etc/real": sDir(0o755), "etc/real/f": sFile(0o644, "B\n")},
			owned:   []manifest.Entry{dirEntry("/etc/d", 0o755), fileEntry("/etc/d/f", "L\n", 0o644, 0, 0)},
			node:    map[string]*shape{"d": {T: 'd', Mode: 0o755}},
		},
		{
			name:    "directory the node changed, B a symlink into /var",
			derived: true,
			l:       map[string]shape{"etc/foo": sDir(0o700), "etc/foo/x.conf": sFile(0o644, "x\n")},
			b:       map[string]shape{"etc/foo": sLink("../var/lib/foo"), "var/lib/foo": sDir(0o755)},
			owned:   []manifest.Entry{dirEntry("/etc/foo", 0o755), fileEntry("/etc/foo/x.conf", "x\n", 0o644, 0, 0)},
			node:    map[string]*shape{"foo": {T: 'd', Mode: 0o755}},
		},
		{
			name:    "directory and file the node changed, B a dangling symlink at the directory",
			derived: true,
			l:       map[string]shape{"etc/d": sDir(0o700), "etc/d/f": sFile(0o644, "L\n")},
			b:       map[string]shape{"etc/d": sLink("nowhere")},
			owned:   []manifest.Entry{dirEntry("/etc/d", 0o755), fileEntry("/etc/d/f", "M\n", 0o644, 0, 0)},
			node:    map[string]*shape{"d": {T: 'd', Mode: 0o755}, "d/f": {T: 'f', Mode: 0o644, Data: "M\n"}},
		},
		{
			name:    "directory the node added where B has a file, the directory owned",
			derived: true,
			b:       map[string]shape{"etc/new": sFile(0o644, "B\n")},
			owned:   []manifest.Entry{dirEntry("/etc/new", 0o755), fileEntry("/etc/new/f", "M\n", 0o644, 0, 0)},
			node:    map[string]*shape{"new": {T: 'd', Mode: 0o755}, "new/f": {T: 'f', Mode: 0o644, Data: "M\n"}},
		},
		{
			name:    "directory the node added where B has a file, only the file owned",
			derived: true,
			b:       map[string]shape{"etc/new": sFile(0o644, "B\n")},
			owned:   []manifest.Entry{fileEntry("/etc/new/f", "M\n", 0o644, 0, 0)},
			node:    map[string]*shape{"new": {T: 'd', Mode: 0o755}, "new/f": {T: 'f', Mode: 0o644, Data: "M\n"}},
		},
		{
			name:    "nested directories the node changed, B symlinks at both",
			derived: true,
			l:       map[string]shape{"etc/a": sDir(0o700), "etc/a/b": sDir(0o700), "etc/a/b/c": sFile(0o644, "L\n")},
			b:       map[string]shape{"etc/a": sLink("x"), "etc/x": sDir(0o755), "etc/x/b": sLink("y"), "etc/x/y": sDir(0o755), "etc/x/y/c": sFile(0o644, "B\n")},
			owned:   []manifest.Entry{dirEntry("/etc/a", 0o755), dirEntry("/etc/a/b", 0o755), fileEntry("/etc/a/b/c", "L\n", 0o644, 0, 0)},
			node:    map[string]*shape{"a": {T: 'd', Mode: 0o755}, "a/b": {T: 'd', Mode: 0o755}},
		},
		{
			name:    "file the node changed, B's parent a symlink loop",
			derived: true,
			l:       map[string]shape{"etc/d": sDir(0o755), "etc/d/f": sFile(0o644, "L\n")},
			b:       map[string]shape{"etc/d": sLink("e"), "etc/e": sLink("d")},
			owned:   []manifest.Entry{fileEntry("/etc/d/f", "M\n", 0o644, 0, 0)},
			node:    map[string]*shape{"d/f": {T: 'f', Mode: 0o644, Data: "M\n"}},
			refused: "Too many levels of symbolic links",
		},
		{
			name:  "B's parent a symlink loop",
			l:     map[string]shape{"etc/d": sDir(0o755), "etc/d/f": sFile(0o644, "L\n")},
			b:     map[string]shape{"etc/d": sLink("e"), "etc/e": sLink("d")},
			owned: []manifest.Entry{dirEntry("/etc/d", 0o755), fileEntry("/etc/d/f", "L\n", 0o644, 0, 0)},
		},
		{
			name:    "directory the node added, B has it with another mode",
			derived: true,
			b:       map[string]shape{"etc/d": sDir(0o700)},
			owned:   []manifest.Entry{dirEntry("/etc/d", 0o755)},
			node:    map[string]*shape{"d": {T: 'd', Mode: 0o755}},
		},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			c.check(t)
		})
	}
}

func (c shapeCase) check(t *testing.T) {
	lRoot, bRoot := shapeTree(t, c.l), shapeTree(t, c.b)
	m := &manifest.Manifest{Entries: append([]manifest.Entry(nil), c.owned...)}
	m.Sort()
	bt := nodetest.OpenRoot(t, bRoot)
	var entries []revert.Entry
	var err error
	if c.derived {
		entries, err = revert.PredictDerived(context.Background(), revert.Ownership{Manifest: m}, nodetest.OpenRoot(t, lRoot), bt)
	} else {
		entries, err = revert.Predict(context.Background(), m, bt)
	}
	if err != nil {
		t.Fatal(err)
	}
	clobbered := map[string]bool{}
	for _, e := range entries {
		clobbered[e.Want.Path] = e.Clobbered
	}
	newRoot, err := ostreetest.TryRevert(t, lRoot, bRoot, func(etc string) error {
		for p, s := range c.node {
			if s == nil {
				if err := os.RemoveAll(filepath.Join(etc, p)); err != nil {
					return err
				}
				continue
			}
			s.put(t, filepath.Join(etc, p))
		}
		return nil
	})
	if c.refused != "" || err != nil {
		c.checkRefused(t, entries, err)
		return
	}
	for _, me := range m.Entries {
		if ok, got := asWantedOnNode(t, newRoot, me); ok == clobbered[me.Path] {
			for _, e := range entries {
				if e.Want.Path == me.Path {
					t.Errorf("%s: predicted %s (%s), but after the revert the node has %s", me.Path, e.Outcome, e.Reason, got)
				}
			}
		}
	}
}

// checkRefused checks a case in which ostree refuses the deployment (on
// a node, finalization fails and it boots L again): the prediction must
// say so at a clobbered path.
func (c shapeCase) checkRefused(t *testing.T, entries []revert.Entry, err error) {
	t.Helper()
	if err == nil || !strings.Contains(err.Error(), c.refused) {
		t.Fatalf("ostree: %v, want a refusal with %q", err, c.refused)
	}
	for _, e := range entries {
		if e.Clobbered && strings.Contains(e.Reason, "ostree refuses") {
			return
		}
	}
	for _, e := range entries {
		t.Logf("%s: %s (%s)", e.Want.Path, e.Outcome, e.Reason)
	}
	t.Errorf("ostree refuses the deployment (%v), and no path is predicted to make it", err)
}

// asWantedOnNode reports whether the reverted node (the deployment, and
// its stateroot's /var) has me as the MachineConfig wants, and what it
// has.
func asWantedOnNode(t *testing.T, newRoot string, me manifest.Entry) (bool, string) {
	t.Helper()
	rp := nodetest.Resolve(t, newRoot, me)
	host := filepath.Join(newRoot, rp)
	if rp == "/var" || strings.HasPrefix(rp, "/var/") {
		host = filepath.Join(ostreetest.VarDir(newRoot), strings.TrimPrefix(rp, "/var"))
	}
	fi, err := os.Lstat(host)
	if me.Type == manifest.Absent {
		return err != nil, "something at " + rp
	}
	if err != nil {
		return false, "nothing at " + rp
	}
	st := fi.Sys().(*syscall.Stat_t)
	owners := int(st.Uid) == me.UID && int(st.Gid) == me.GID
	mode := manifest.Mode(st.Mode & 0o7777)
	switch me.Type {
	case manifest.File:
		b, _ := os.ReadFile(host)
		return fi.Mode().IsRegular() && sha(string(b)) == me.Digest && mode == me.Mode && owners, "a file with " + string(b)
	case manifest.Directory:
		return fi.IsDir() && mode == me.Mode && owners, "directory " + fi.Mode().String()
	case manifest.Symlink:
		target, _ := os.Readlink(host)
		return fi.Mode()&fs.ModeSymlink != 0 && target == me.Target && owners, "symlink to " + target
	case manifest.Hardlink:
		other, err := os.Lstat(filepath.Join(newRoot, me.Target))
		return err == nil && os.SameFile(fi, other), "another inode than " + me.Target
	}
	t.Fatalf("%s: type %s", me.Path, me.Type)
	return false, ""
}

func hardEntry(p, target string) manifest.Entry {
	return manifest.Entry{Path: p, Type: manifest.Hardlink, Target: target, Source: manifest.Source{MachineConfig: "99-test", Field: "spec.config.storage.links[0]"}}
}
