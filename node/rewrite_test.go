package node

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/revert"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/mcbake/mcbake/internal/testing/roottest"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// nodeMC is the MachineConfig of the Rewrite and OnDisk tests: files with
// other modes and owners, nested new directories, a directory, a link, a
// unit with an enablement link, a mask, and a unit the node enables that
// it disables.
const nodeMC = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-node
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - {path: /etc/mcbake/a.conf, mode: 384, user: {id: 1000}, group: {id: 1001}, contents: {source: "data:,a%0A"}}
        - {path: /etc/mcbake/mode.conf, mode: 416, contents: {source: "data:,mode%0A"}}
        - {path: /etc/mcbake/owner.conf, mode: 420, user: {id: 1000}, contents: {source: "data:,owner%0A"}}
        - {path: /etc/mcbake/new/deep/b.conf, mode: 420, contents: {source: "data:,b%0A"}}
      directories:
        - {path: /etc/mcbake/dir, mode: 488}
      links:
        - {path: /etc/mcbake/link, target: a.conf}
    systemd:
      units:
        - name: foo.service
          enabled: false
        - name: bar.service
          enabled: true
          contents: "[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"
        - name: baz.service
          mask: true
`

const fooUnit = "[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"

// newNode makes a node root that the MachineConfig was reverted away from:
// /etc with only the base's enablement link for foo.service.
func newNode(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "root")
	wants := filepath.Join(dir, "etc", "systemd", "system", "multi-user.target.wants")
	units := filepath.Join(dir, "usr", "lib", "systemd", "system")
	for _, d := range []string{wants, units} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(units, "foo.service"), []byte(fooUnit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/lib/systemd/system/foo.service", filepath.Join(wants, "foo.service")); err != nil {
		t.Fatal(err)
	}
	return dir
}

// planFor is the plan that names every rendered entry below /etc but the
// stored config and its directory (which NewPlan never lists), at the path
// it was requested at unless resolved is set.
func planFor(res *render.Result, resolved bool) *revert.Plan {
	p := &revert.Plan{SchemaVersion: revert.PlanSchemaVersion, Image: manifest.ImageRef{Digest: sha("l")}, Base: manifest.ImageRef{Digest: sha("b")}}
	for _, e := range res.Entries {
		pe := revert.PlanEntry{Path: e.Path, Outcome: revert.Removed, Type: e.Type, Mode: e.Mode, UID: e.UID, GID: e.GID, Size: e.Size,
			Digest: e.Digest, Target: e.Target, Source: e.Source}
		if resolved && e.Where() != e.Path {
			pe.Path, pe.RequestedPath = e.Where(), e.Path
		}
		if e.Path == render.CurrentConfig || e.Path == path.Dir(render.CurrentConfig) || revert.ZoneOf(pe.Path) != revert.ZoneEtc {
			continue
		}
		if e.Type == manifest.Absent {
			pe.Outcome = revert.Restored
		}
		p.Rewrite = append(p.Rewrite, pe)
	}
	sortPlan(p)
	return p
}

// sortPlan puts parents before children, as NewPlan does.
func sortPlan(p *revert.Plan) {
	for i := 1; i < len(p.Rewrite); i++ {
		for j := i; j > 0 && p.Rewrite[j].Path < p.Rewrite[j-1].Path; j-- {
			p.Rewrite[j], p.Rewrite[j-1] = p.Rewrite[j-1], p.Rewrite[j]
		}
	}
}

func TestRewrite(t *testing.T) {
	requireRoot(t)
	mcs := parseMC(t, nodeMC)
	dir := newNode(t)
	root := openRoot(t, dir)
	res := renderOnNode(t, mcs, dir)
	plan := planFor(res, true)
	before := roottest.Tree(t, dir)

	dry, err := rewrite(context.Background(), root, plan, res, RewriteOptions{DryRun: true})
	if err != nil {
		t.Fatalf("Rewrite(dry run): %v", err)
	}
	if diff := cmp.Diff(before, roottest.Tree(t, dir)); diff != "" {
		t.Errorf("a dry run changed the root (-before +after):\n%s", diff)
	}
	wantOps := map[string]string{
		"/etc/mcbake": "mkdir", "/etc/mcbake/a.conf": "write", "/etc/mcbake/dir": "mkdir", "/etc/mcbake/link": "symlink",
		"/etc/mcbake/mode.conf": "write", "/etc/mcbake/owner.conf": "write", "/etc/mcbake/new": "mkdir",
		"/etc/mcbake/new/deep": "mkdir", "/etc/mcbake/new/deep/b.conf": "write",
		"/etc/systemd/system/bar.service": "write", "/etc/systemd/system/baz.service": "symlink",
		"/etc/systemd/system/multi-user.target.wants/bar.service": "symlink",
		"/etc/systemd/system/multi-user.target.wants/foo.service": "remove",
	}
	ops := func(acts []Action) map[string]string {
		m := map[string]string{}
		for _, a := range acts {
			m[a.Path] = a.Op
			if a.Op != Unchanged && len(a.Kinds) == 0 {
				t.Errorf("%s: op %s without the kinds that differed", a.Path, a.Op)
			}
		}
		return m
	}
	if diff := cmp.Diff(wantOps, ops(dry)); diff != "" {
		t.Errorf("Rewrite(dry run) ops (-want +got):\n%s", diff)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := rewrite(ctx, root, plan, res, RewriteOptions{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Rewrite(cancelled) = %v, want context.Canceled", err)
	}
	if diff := cmp.Diff(before, roottest.Tree(t, dir)); diff != "" {
		t.Errorf("a cancelled Rewrite changed the root (-before +after):\n%s", diff)
	}

	acts, err := rewrite(context.Background(), root, plan, res, RewriteOptions{})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	if diff := cmp.Diff(dry, acts, cmpopts.IgnoreFields(Action{}, "State")); diff != "" {
		t.Errorf("Rewrite and its dry run disagree (-dry +real):\n%s", diff)
	}
	for _, a := range acts {
		if a.Op != Unchanged && a.State != StateNew {
			t.Errorf("Rewrite: %s: state %q, want new", a.Path, a.State)
		}
	}
	want := map[string]string{
		"etc":                                        "dir 0755 0:0",
		"etc/mcbake":                                 "dir 0755 0:0",
		"etc/mcbake/a.conf":                          "file 0600 1000:1001 a\n",
		"etc/mcbake/mode.conf":                       "file 0640 0:0 mode\n",
		"etc/mcbake/owner.conf":                      "file 0644 1000:0 owner\n",
		"etc/mcbake/dir":                             "dir 0750 0:0",
		"etc/mcbake/link":                            "link a.conf 0:0",
		"etc/mcbake/new":                             "dir 0755 0:0",
		"etc/mcbake/new/deep":                        "dir 0755 0:0",
		"etc/mcbake/new/deep/b.conf":                 "file 0644 0:0 b\n",
		"etc/systemd":                                "dir 0755 0:0",
		"etc/systemd/system":                         "dir 0755 0:0",
		"etc/systemd/system/bar.service":             "file 0644 0:0 " + fooUnit,
		"etc/systemd/system/baz.service":             "link /dev/null 0:0",
		"etc/systemd/system/multi-user.target.wants": "dir 0755 0:0",
		"etc/systemd/system/multi-user.target.wants/bar.service": "link /etc/systemd/system/bar.service 0:0",
		"usr":                                "dir 0755 0:0",
		"usr/lib":                            "dir 0755 0:0",
		"usr/lib/systemd":                    "dir 0755 0:0",
		"usr/lib/systemd/system":             "dir 0755 0:0",
		"usr/lib/systemd/system/foo.service": "file 0644 0:0 " + fooUnit,
	}
	after := roottest.Tree(t, dir)
	if diff := cmp.Diff(want, after); diff != "" {
		t.Errorf("root after Rewrite (-want +got):\n%s", diff)
	}

	// Idempotent, with the same rendering and with one made against the
	// rewritten root (which no longer lists the existing parents nor the
	// removed link).
	for name, r := range map[string]*render.Result{"same rendering": res, "new rendering": renderOnNode(t, mcs, dir)} {
		again, err := rewrite(context.Background(), root, plan, r, RewriteOptions{})
		if err != nil {
			t.Fatalf("second Rewrite (%s): %v", name, err)
		}
		for _, a := range again {
			if a.Op != Unchanged || len(a.Kinds) != 0 {
				t.Errorf("second Rewrite (%s): %s: %s %v, want %s", name, a.Path, a.Op, a.Kinds, Unchanged)
			}
		}
		if len(again) != len(plan.Rewrite) {
			t.Errorf("second Rewrite (%s): %d actions for %d planned paths", name, len(again), len(plan.Rewrite))
		}
		if diff := cmp.Diff(after, roottest.Tree(t, dir)); diff != "" {
			t.Errorf("second Rewrite (%s) changed the root (-before +after):\n%s", name, diff)
		}
	}
}

// TestRewriteRefuses: a plan that the MachineConfigs do not define, or
// that is not valid, makes Rewrite write nothing at all, not even the
// entries before the bad one.
func TestRewriteRefuses(t *testing.T) {
	mcs := parseMC(t, nodeMC)
	tests := []struct {
		name     string
		change   func(p *revert.Plan)
		want     string
		mismatch bool // a *PlanMismatchError
	}{
		{name: "digest", change: setEntry("/etc/mcbake/owner.conf", func(pe *revert.PlanEntry) { pe.Digest = sha("other") }), want: "the plan's digest does not match", mismatch: true},
		{name: "mode", change: setEntry("/etc/mcbake/owner.conf", func(pe *revert.PlanEntry) { pe.Mode = 0o600 }), want: "the plan's mode does not match", mismatch: true},
		{name: "owner", change: setEntry("/etc/mcbake/owner.conf", func(pe *revert.PlanEntry) { pe.UID = 0 }), want: "the plan's owner does not match", mismatch: true},
		{name: "group", change: setEntry("/etc/mcbake/owner.conf", func(pe *revert.PlanEntry) { pe.GID = 1000 }), want: "the plan's owner does not match", mismatch: true},
		{name: "type", change: setEntry("/etc/mcbake/link", func(pe *revert.PlanEntry) { pe.Type = manifest.Hardlink }), want: "the plan's type does not match", mismatch: true},
		{name: "target", change: setEntry("/etc/mcbake/link", func(pe *revert.PlanEntry) { pe.Target = "/etc/shadow" }), want: "the plan's target does not match", mismatch: true},
		{name: "directory mode", change: setEntry("/etc/mcbake/dir", func(pe *revert.PlanEntry) { pe.Mode = 0o777 }), want: "the plan's mode does not match", mismatch: true},
		{name: "missing path", change: addEntry(revert.PlanEntry{Path: "/etc/mcbake/zz-other.conf", Type: manifest.File, Mode: 0o644, Digest: sha("x")}), want: "not defined by the given MachineConfigs", mismatch: true},
		{name: "absent link of a unit not disabled", change: addEntry(revert.PlanEntry{Path: "/etc/systemd/system/zz.target.wants/bar.service", Type: manifest.Absent}), want: "not defined", mismatch: true},
		{name: "parent directory not 0755", change: addEntry(revert.PlanEntry{Path: "/etc/systemd", Type: manifest.Directory, Mode: 0o700}), want: "not defined", mismatch: true},
		{name: "content written elsewhere", change: setEntry("/etc/mcbake/owner.conf", func(pe *revert.PlanEntry) { pe.Path, pe.RequestedPath = "/etc/passwd", "/etc/mcbake/owner.conf" }), want: "the MachineConfigs put this path at /etc/mcbake/owner.conf on this root, not at /etc/passwd", mismatch: true},
		{name: "removal outside the enablement dirs", change: addEntry(revert.PlanEntry{Path: "/etc/ssh/foo.service", Type: manifest.Absent}), want: "not defined", mismatch: true},
		{name: "stored config", change: addEntry(revert.PlanEntry{Path: render.CurrentConfig, Type: manifest.File, Mode: 0o644, Digest: sha("{}")}), want: "refusing to rewrite it", mismatch: true},
		{name: "path outside /etc", change: addEntry(revert.PlanEntry{Path: "/usr/bin/zz", Type: manifest.File, Mode: 0o755, Digest: sha("x")}), want: "only paths below /etc"},
		{name: "unclean path", change: addEntry(revert.PlanEntry{Path: "/etc/mcbake/../../usr/zz", Type: manifest.Directory, Mode: 0o755}), want: "not absolute and clean"},
		{name: "parent of the root", change: setEntry("/etc/mcbake", func(pe *revert.PlanEntry) { pe.Path, pe.RequestedPath = "/..", "/etc/mcbake" }), want: "not absolute and clean"},
		{name: "no image digest", change: func(p *revert.Plan) { p.Image.Digest = "" }, want: "digests are required"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newNode(t)
			root := openRoot(t, dir)
			res := renderOnNode(t, mcs, dir)
			plan := planFor(res, true)
			tt.change(plan)
			before, parent := roottest.Tree(t, dir), roottest.Entry(t, filepath.Dir(dir))
			_, err := rewrite(context.Background(), root, plan, res, RewriteOptions{})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Rewrite = %v, want an error with %q", err, tt.want)
			}
			var pm *PlanMismatchError
			if errors.As(err, &pm) != tt.mismatch {
				t.Errorf("Rewrite error %T, want a *PlanMismatchError: %v", err, tt.mismatch)
			}
			if diff := cmp.Diff(before, roottest.Tree(t, dir)); diff != "" {
				t.Errorf("a refused Rewrite changed the root (-before +after):\n%s", diff)
			}
			if got := roottest.Entry(t, filepath.Dir(dir)); got != parent {
				t.Errorf("a refused Rewrite changed the root's parent: %s, was %s", got, parent)
			}
		})
	}
}

func setEntry(p string, f func(*revert.PlanEntry)) func(*revert.Plan) {
	return func(pl *revert.Plan) {
		for i := range pl.Rewrite {
			if pl.Rewrite[i].MachineConfigPath() == p {
				f(&pl.Rewrite[i])
				return
			}
		}
		panic("no plan entry " + p)
	}
}

// addEntry appends pe last, after entries Rewrite would otherwise write.
func addEntry(pe revert.PlanEntry) func(*revert.Plan) {
	return func(p *revert.Plan) { p.Rewrite = append(p.Rewrite, pe) }
}

// TestRewriteStaysInRoot: a node root whose /etc has symlinks pointing
// outside it (absolute, relative with .., as the last component) gets
// every write inside the root or an error; the directory outside never
// changes.
func TestRewriteStaysInRoot(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name string
		// links are made under the root: path -> target, OUT standing for
		// the outside directory's host path.
		links map[string]string
		// insideOut creates OUT inside the root too.
		insideOut bool
		mc        string
		wantErr   bool
		// wantInside are root-relative paths (OUT as above) the rewrite
		// must create.
		wantInside []string
	}{
		{
			name:       "absolute symlinked parent",
			links:      map[string]string{"etc/abs": "OUT"},
			insideOut:  true,
			mc:         `storage: {files: [{path: /etc/abs/x.conf, mode: 420, contents: {source: "data:,x"}}]}`,
			wantInside: []string{"OUT/x.conf"},
		},
		{
			name:       "relative symlinked parent climbing with ..",
			links:      map[string]string{"etc/rel": "../../../../../../../../../../..OUT"},
			insideOut:  true,
			mc:         `storage: {files: [{path: /etc/rel/x.conf, mode: 420, contents: {source: "data:,x"}}]}`,
			wantInside: []string{"OUT/x.conf"},
		},
		{
			name:    "absolute symlinked parent missing in the root",
			links:   map[string]string{"etc/abs": "OUT"},
			mc:      `storage: {files: [{path: /etc/abs/x.conf, mode: 420, contents: {source: "data:,x"}}]}`,
			wantErr: true,
		},
		{
			name:       "last component a symlink to a file outside",
			links:      map[string]string{"etc/x.conf": "OUT/secret"},
			mc:         `storage: {files: [{path: /etc/x.conf, mode: 420, contents: {source: "data:,x"}}]}`,
			wantInside: []string{"etc/x.conf"},
		},
		{
			name:  "enablement link pointing outside, removed",
			links: map[string]string{"etc/systemd/system/multi-user.target.wants/foo.service": "OUT/secret"},
			mc:    `systemd: {units: [{name: foo.service, enabled: false}]}`,
		},
		{
			name:    "directory where a symlink to the outside directory is",
			links:   map[string]string{"etc/d": "OUT"},
			mc:      `storage: {directories: [{path: /etc/d, mode: 448, user: {id: 1000}}]}`,
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := newNode(t)
			outside := filepath.Join(filepath.Dir(dir), "outside")
			if err := os.Mkdir(outside, 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(outside, "secret"), []byte("secret\n"), 0o644); err != nil {
				t.Fatal(err)
			}
			sub := func(s string) string { return strings.ReplaceAll(s, "OUT", outside) }
			if tt.insideOut {
				if err := os.MkdirAll(filepath.Join(dir, outside), 0o755); err != nil {
					t.Fatal(err)
				}
			}
			for p, target := range tt.links {
				if err := os.Remove(filepath.Join(dir, p)); err != nil && !errors.Is(err, fs.ErrNotExist) {
					t.Fatal(err)
				}
				if err := os.Symlink(sub(target), filepath.Join(dir, p)); err != nil {
					t.Fatal(err)
				}
			}
			mcs := parseMC(t, "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfig\nmetadata: {name: 99-escape}\n"+
				"spec:\n  config:\n    ignition: {version: 3.4.0}\n    "+tt.mc+"\n")
			res := renderOnNode(t, mcs, dir)
			// The plan names each path as the MachineConfig does, as a plan
			// computed against a base without these links would.
			plan := planFor(res, false)
			before, outsideDir := roottest.Tree(t, outside), roottest.Entry(t, outside)
			root := openRoot(t, dir)
			_, err := rewrite(context.Background(), root, plan, res, RewriteOptions{})
			if diff := cmp.Diff(before, roottest.Tree(t, outside)); diff != "" {
				t.Errorf("Rewrite changed the directory outside the root (-before +after):\n%s", diff)
			}
			if got := roottest.Entry(t, outside); got != outsideDir {
				t.Errorf("Rewrite changed the directory outside the root: %s, was %s", got, outsideDir)
			}
			if (err != nil) != tt.wantErr {
				t.Fatalf("Rewrite error = %v, want error %v", err, tt.wantErr)
			}
			for _, p := range tt.wantInside {
				if _, err := os.Lstat(filepath.Join(dir, sub(p))); err != nil {
					t.Errorf("Rewrite did not write %s inside the root: %v", p, err)
				}
			}
		})
	}
}

// TestRewriteLeavesExistingParents: a plan may name a parent directory of
// an owned path with the MCD's parent metadata; when the node has it, its
// mode and owners stay (issue: /etc/systemd 0700 5:5 reset to 0755 0:0).
func TestRewriteLeavesExistingParents(t *testing.T) {
	requireRoot(t)
	mcs := parseMC(t, nodeMC)
	dir := newNode(t)
	systemd := filepath.Join(dir, "etc", "systemd")
	if err := os.Chmod(systemd, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Lchown(systemd, 5, 5); err != nil {
		t.Fatal(err)
	}
	root := openRoot(t, dir)
	res := renderOnNode(t, mcs, dir)
	plan := planFor(res, true)
	plan.Rewrite = append(plan.Rewrite, revert.PlanEntry{Path: "/etc/systemd", Outcome: revert.Removed, Type: manifest.Directory, Mode: 0o755,
		Source: manifest.Source{MachineConfig: "99-node", Field: "spec.config.systemd.units[bar.service].contents"}})
	sortPlan(plan)
	if _, err := rewrite(context.Background(), root, plan, res, RewriteOptions{}); err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	if got := roottest.Entry(t, systemd); got != "dir 0700 5:5" {
		t.Errorf("/etc/systemd after Rewrite = %q, want dir 0700 5:5 as the node had it", got)
	}
}

// TestRewriteAllOrNothing injects a failure after some writes: every path
// is as it was before, and the actions say old.
func TestRewriteAllOrNothing(t *testing.T) {
	requireRoot(t)
	mcs := parseMC(t, nodeMC)
	for _, n := range []int{0, 3, 8} {
		dir := newNode(t)
		root := openRoot(t, dir)
		res := renderOnNode(t, mcs, dir)
		before := roottest.Tree(t, dir)
		boom := errors.New("injected failure")
		acts, err := rewrite(context.Background(), root, planFor(res, true), res, RewriteOptions{}, func(i int) error {
			if i == n {
				return boom
			}
			return nil
		})
		if !errors.Is(err, boom) {
			t.Fatalf("Rewrite failing at write %d = %v, want the injected failure", n, err)
		}
		if diff := cmp.Diff(before, roottest.Tree(t, dir)); diff != "" {
			t.Errorf("Rewrite failing at write %d left changes (-before +after):\n%s", n, diff)
		}
		for _, a := range acts {
			if a.Op != Unchanged && a.State != StateOld {
				t.Errorf("failing at %d: %s: state %q, want old", n, a.Path, a.State)
			}
		}
	}
}
