package render

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/roottest"

	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/testing/systemdtest"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// The systemd differential tests (docs/design.md, "What the
// machine-config-daemon writes") render MachineConfigs against a base tree
// and replay the MCD on another copy of the same tree with the real systemctl
// --root (internal/testing/systemdtest); every path under /etc/systemd/system
// must end the same (type, mode, symlink target, content), and where the
// replay fails the rendering must refuse.

// sdCase is one differential case: a base tree (makeRoot's spec), the
// MachineConfig's units and storage files, and what must happen.
type sdCase struct {
	name  string
	base  map[string]string
	units []types.Unit
	files map[string]string // storage files: path -> content
	// raw, when set, is a MachineConfig file to use instead.
	raw string
	// want is "ok" (both succeed), "refused" (the replay fails and
	// mcbake refuses, with wantErr in its error) or "node" (mcbake
	// refuses a specifier only the node knows).
	want    string
	wantErr string
	// check, when set, looks at the replayed tree (paths relative to
	// /etc/systemd/system) to pin the bullet the case is about.
	check func(t *testing.T, tree map[string]sdNode)
	// degrading, when set, are the units the MCD's on-disk check must
	// find enabled otherwise (both sides are compared in every case).
	degrading []string
}

// sdNode is what the differential compares of a path.
type sdNode struct {
	Type    manifest.Type
	Mode    os.FileMode
	Target  string
	Content string
}

var (
	replayerOnce sync.Once
	replayer     *systemdtest.Replayer
	replayerErr  error
)

// needSystemctl returns the replayer, skipping the test when systemctl is
// missing.
func needSystemctl(t *testing.T) *systemdtest.Replayer {
	t.Helper()
	replayerOnce.Do(func() {
		var p string
		if p, replayerErr = systemdtest.Systemctl(); replayerErr == nil {
			replayer = &systemdtest.Replayer{Systemctl: p}
		}
	})
	if replayerErr != nil {
		t.Skipf("skipping the systemd differential test: %v", replayerErr)
	}
	return replayer
}

// writeSpec creates makeRoot's spec under dir, and /dev/null (as on a
// node) when running as root.
func writeSpec(t testing.TB, dir string, spec map[string]string) {
	t.Helper()
	roottest.Write(t, dir, spec)
	if err := os.MkdirAll(filepath.Join(dir, "etc/systemd/system"), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.MkdirAll(filepath.Join(dir, "dev"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := unix.Mknod(filepath.Join(dir, "dev/null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))); err != nil {
			t.Fatal(err)
		}
	}
}

// sdDoc returns the case's MachineConfig.
func (c sdCase) doc(t testing.TB) string {
	if c.raw != "" {
		b, err := os.ReadFile(c.raw)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	cfg := types.Config{Ignition: types.Ignition{Version: "3.5.0"}}
	cfg.Systemd.Units = c.units
	for _, p := range sortedKeys(c.files) {
		src := percentURL([]byte(c.files[p]))
		cfg.Storage.Files = append(cfg.Storage.Files, types.File{Node: types.Node{Path: p},
			FileEmbedded1: types.FileEmbedded1{Contents: types.Resource{Source: &src}}})
	}
	b, err := json.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":"99-sd"},"spec":{"config":%s}}`, b)
}

// sdOutcome is what one side of a case did.
type sdOutcome struct {
	err  error
	tree map[string]sdNode
	// degrading are the units the MCD's on-disk check finds enabled
	// otherwise than their MachineConfig says.
	degrading []string
}

// runCase renders and replays c and returns both outcomes.
func runCase(t *testing.T, rp *systemdtest.Replayer, c sdCase) (mcbake, mcd sdOutcome) {
	t.Helper()
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	writeSpec(t, base, c.base)
	mcs, err := machineconfig.Parse("99-sd.json", []byte(c.doc(t)))
	if c.raw != "" {
		mcs, err = machineconfig.Load([]string{c.raw}, nil)
	}
	if err != nil {
		t.Fatalf("Parse() = %v", err)
	}
	merged := machineconfig.Merge(mcs)

	// mcbake: render against the base, apply the entries to a copy.
	root, err := fstree.Open(base)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Render(context.Background(), merged, root)
	mcbake.err = err
	if err := root.Close(); err != nil {
		t.Fatal(err)
	}
	if mcbake.err == nil {
		a := filepath.Join(dir, "mcbake")
		writeSpec(t, a, c.base)
		applyEntries(t, a, res.Entries)
		mcbake.tree = snapshot(t, a)
		for _, u := range res.Degrading {
			mcbake.degrading = append(mcbake.degrading, u.Name)
		}
		sort.Strings(mcbake.degrading)
	}

	// The MCD: the replay with the real systemctl on another copy.
	b := filepath.Join(dir, "mcd")
	writeSpec(t, b, c.base)
	var files []systemdtest.File
	for _, f := range merged.Files {
		if !strings.HasPrefix(f.Path, "/etc/") {
			continue // only /etc (unit files, presets, os-release) matters to systemctl
		}
		content, err := decode(f.Contents, fstree.MaxContent)
		if err != nil {
			t.Fatal(err)
		}
		mode := os.FileMode(0o644)
		if f.Mode != nil {
			mode = os.FileMode(*f.Mode)
		}
		files = append(files, systemdtest.File{Path: f.Path, Content: content, Mode: mode})
	}
	var units []types.Unit
	for _, u := range merged.Units {
		units = append(units, u.Unit)
	}
	var log strings.Builder
	r := *rp
	r.Log = func(format string, args ...any) { fmt.Fprintf(&log, format+"\n", args...) }
	if mcd.err = r.Replay(b, files, units); mcd.err == nil {
		mcd.tree = snapshot(t, b)
		mcd.degrading = r.Degrading(b, units)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("MachineConfig: %s\nbase: %v\nreplay:\n%s", c.doc(t), c.base, log.String())
		}
	})
	return mcbake, mcd
}

// compare fails t when the two outcomes disagree.
func compare(t *testing.T, c sdCase, mcbake, mcd sdOutcome) {
	t.Helper()
	nodeRefusal := mcbake.err != nil && strings.Contains(mcbake.err.Error(), "only the node can resolve")
	switch {
	case nodeRefusal && c.want == "node":
	case nodeRefusal:
		t.Errorf("mcbake refuses a node-only specifier: %v (the replay: %v)", mcbake.err, mcd.err)
	case mcd.err != nil && mcbake.err == nil:
		t.Errorf("the MCD fails (%v) but mcbake renders", mcd.err)
	case mcd.err == nil && mcbake.err != nil:
		t.Errorf("mcbake refuses (%v) but the MCD succeeds", mcbake.err)
	case mcd.err == nil:
		if diff := cmp.Diff(mcd.tree, keptDirs(mcbake.tree, mcd.tree)); diff != "" {
			t.Errorf("/etc/systemd/system differs (-systemctl +mcbake):\n%s", diff)
		}
		if !slices.Equal(mcd.degrading, mcbake.degrading) {
			t.Errorf("units the MCD's on-disk check finds enabled otherwise: systemctl %q, mcbake %q", mcd.degrading, mcbake.degrading)
		}
	}
	if c.want == "" {
		return
	}
	got := "ok"
	switch {
	case nodeRefusal:
		got = "node"
	case mcbake.err != nil || mcd.err != nil:
		got = "refused"
	}
	if got != c.want {
		t.Errorf("outcome = %s (mcbake: %v; MCD: %v), want %s", got, mcbake.err, mcd.err, c.want)
	}
	if c.wantErr != "" && (mcbake.err == nil || !strings.Contains(mcbake.err.Error(), c.wantErr)) {
		t.Errorf("mcbake's error = %v, want one containing %q", mcbake.err, c.wantErr)
	}
	if c.check != nil && mcd.tree != nil {
		c.check(t, mcd.tree)
	}
	if c.degrading != nil && !slices.Equal(c.degrading, mcd.degrading) {
		t.Errorf("the MCD's on-disk check finds %q enabled otherwise, want %q", mcd.degrading, c.degrading)
	}
}

// keptDirs returns mcbake's tree without the empty directories systemctl
// removed after their last link: mcbake keeps them (docs/design.md, "What
// the machine-config-daemon writes").
func keptDirs(mcbake, mcd map[string]sdNode) map[string]sdNode {
	out := map[string]sdNode{}
	for p, n := range mcbake {
		if _, ok := mcd[p]; !ok && n.Type == manifest.Directory && emptyDir(mcbake, p) {
			continue
		}
		out[p] = n
	}
	return out
}

func emptyDir(tree map[string]sdNode, dir string) bool {
	for p := range tree {
		if strings.HasPrefix(p, dir+"/") {
			return false
		}
	}
	return true
}

// applyEntries applies a rendering to the tree at dir as its layer would:
// parents first, an absent entry removes the path, a directory entry is
// made where there is none, files and symlinks replace what is there.
func applyEntries(t testing.TB, dir string, entries []Entry) {
	t.Helper()
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Where() < sorted[j].Where() })
	for _, e := range sorted {
		p := filepath.Join(dir, e.Where())
		var err error
		switch e.Type {
		case manifest.Absent:
			err = os.RemoveAll(p)
		case manifest.Directory:
			if fi, serr := os.Lstat(p); serr == nil && fi.IsDir() {
				err = os.Chmod(p, os.FileMode(e.Mode))
			} else if err = os.RemoveAll(p); err == nil {
				err = os.Mkdir(p, os.FileMode(e.Mode))
			}
		case manifest.File:
			if err = os.RemoveAll(p); err == nil {
				err = os.WriteFile(p, e.Content, os.FileMode(e.Mode))
			}
			if err == nil {
				err = os.Chmod(p, os.FileMode(e.Mode))
			}
		case manifest.Symlink:
			if err = os.RemoveAll(p); err == nil {
				err = os.Symlink(e.Target, p)
			}
		}
		if err != nil {
			t.Fatalf("applying %s %s: %v", e.Type, e.Path, err)
		}
	}
}

// snapshot describes every path under dir's /etc/systemd/system.
func snapshot(t testing.TB, dir string) map[string]sdNode {
	t.Helper()
	top := filepath.Join(dir, systemdtest.UnitDir)
	out := map[string]sdNode{}
	err := filepath.Walk(top, func(p string, fi os.FileInfo, err error) error {
		if err != nil {
			if errors.Is(err, os.ErrNotExist) && p == top {
				return nil
			}
			return err
		}
		rel := strings.TrimPrefix(p, top)
		var n sdNode
		switch {
		case fi.IsDir():
			n = sdNode{Type: manifest.Directory, Mode: fi.Mode().Perm()}
		case fi.Mode()&os.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			n = sdNode{Type: manifest.Symlink, Target: target}
		default:
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			n = sdNode{Type: manifest.File, Mode: fi.Mode().Perm(), Content: string(b)}
		}
		out[rel] = n
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// Helpers for writing cases.

func ptr[T any](v T) *T { return &v }

func unit(name string, enabled *bool, contents string, dropins ...types.Dropin) types.Unit {
	u := types.Unit{Name: name, Enabled: enabled, Dropins: dropins}
	if contents != "" {
		u.Contents = &contents
	}
	return u
}

func masked(name string, mask bool, enabled *bool) types.Unit {
	return types.Unit{Name: name, Mask: &mask, Enabled: enabled}
}

func dropin(name, contents string) types.Dropin { return types.Dropin{Name: name, Contents: &contents} }

var (
	on  = ptr(true)
	off = ptr(false)
)

// svc is a service unit file with the given [Install] lines.
func svc(install ...string) string {
	s := "[Unit]\nDescription=test\n[Service]\nExecStart=/bin/true\n"
	if len(install) > 0 {
		s += "[Install]\n" + strings.Join(install, "\n") + "\n"
	}
	return s
}

const (
	usrlib = "usr/lib/systemd/system/"
	etc    = "etc/systemd/system/"
	preset = "usr/lib/systemd/system-preset/"
)

func has(t *testing.T, tree map[string]sdNode, p, target string) {
	t.Helper()
	if n, ok := tree[p]; !ok || n.Type != manifest.Symlink || target != "" && n.Target != target {
		t.Errorf("systemctl's tree at %s = %+v, want a symlink to %q", p, n, target)
	}
}

func lacks(t *testing.T, tree map[string]sdNode, p string) {
	t.Helper()
	if n, ok := tree[p]; ok {
		t.Errorf("systemctl's tree has %s (%+v), want none", p, n)
	}
}

func runCases(t *testing.T, cases []sdCase) {
	rp := needSystemctl(t)
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			mcbake, mcd := runCase(t, rp, c)
			compare(t, c, mcbake, mcd)
		})
	}
}
