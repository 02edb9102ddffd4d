package node_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/roottest"
	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
)

// prepareMC is a worker-like MachineConfig: files under /etc (one in a new
// nested directory, one with another owner), a kubelet-like unit with
// contents and enablement, a drop-in on a base unit, a mask, a unit the
// base enables that it disables, a file the certificate writer manages,
// one the node will modify, and one under /usr/local.
const prepareMC = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 99-worker-prepare}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/mcbake/kubelet.conf, mode: 420, contents: {source: "data:,kubelet%0A"}}
        - {path: /etc/mcbake/new/deep/b.conf, mode: 384, user: {id: 1000}, contents: {source: "data:,b%0A"}}
        - {path: /etc/mcbake/modified.conf, mode: 420, contents: {source: "data:,as%20the%20MC%20says%0A"}}
        - {path: /etc/hostname, mode: 420, contents: {source: "data:,worker-0%0A"}}
        - {path: /etc/kubernetes/kubelet-ca.crt, mode: 420, contents: {source: "data:,ca%20v1%0A"}}
        - {path: /usr/local/bin/tool, mode: 493, contents: {source: "data:,%23!/bin/sh%0A"}}
    systemd:
      units:
        - name: kubelet.service
          enabled: true
          contents: "[Unit]\nDescription=kubelet\n[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"
        - name: crio.service
          dropins: [{name: 10-mcbake.conf, contents: "[Service]\nEnvironment=MCBAKE=1\n"}]
        - name: zincati.service
          mask: true
        - name: openvswitch.service
          enabled: false
`

const unitFile = "[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"

// baseTree is the base image B: accounts, systemd units, one of them
// enabled, and a hostname.
func baseTree(t testing.TB, dir string) {
	roottest.Write(t, dir, map[string]string{
		"etc/passwd":          "root:x:0:0:root:/root:/bin/sh\ncore:x:1000:1000::/var/home/core:/bin/sh\n",
		"etc/group":           "root:x:0:\ncore:x:1000:\n",
		"etc/hostname":        "localhost\n",
		"etc/systemd/system/": "",
		"etc/systemd/system/multi-user.target.wants/openvswitch.service": "-> /usr/lib/systemd/system/openvswitch.service",
		"usr/lib/systemd/system/openvswitch.service":                     unitFile,
		"usr/lib/systemd/system/crio.service":                            unitFile,
		"usr/lib/systemd/system/zincati.service":                         unitFile,
		"usr/local":                                                      "-> ../var/usrlocal",
		"var/usrlocal/":                                                  "",
	})
}

// setup builds B, bakes the MachineConfig into L as mcbake build would
// (its rendering against B, written over B), and stages B on a node that
// runs L, whose /etc the machine-config-daemon wrote identically; then
// the node modifies two files. It returns the state and the rendering.
func setup(t *testing.T) (ostreetest.Staged, []*machineconfig.MachineConfig, *manifest.Manifest) {
	t.Helper()
	return setupWith(t, ostreetest.StageOptions{MCDWrite: func(etc string) error {
		// The MCD wrote what L baked (the same bytes), so the node's /etc
		// is L's defaults; then the node changes two files.
		if err := os.WriteFile(filepath.Join(etc, "mcbake", "modified.conf"), []byte("the node's own\n"), 0o644); err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(etc, "kubernetes", "kubelet-ca.crt"), []byte("ca v2, rotated\n"), 0o644)
	}})
}

// setupWith is setup with o's commit metadata and MCD writes (o.L and
// o.B are filled in).
func setupWith(t *testing.T, o ostreetest.StageOptions) (ostreetest.Staged, []*machineconfig.MachineConfig, *manifest.Manifest) {
	t.Helper()
	return setupMC(t, prepareMC, nil, o)
}

// setupMC is setupWith with the MachineConfig mc, and editL, when set,
// changing L's tree after the bake (a layered image whose MachineConfigs
// are not all the node's).
func setupMC(t testing.TB, mc string, editL func(lRoot string), o ostreetest.StageOptions) (ostreetest.Staged, []*machineconfig.MachineConfig, *manifest.Manifest) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root: ostree deploys and owners")
	}
	mcs, err := machineconfig.Parse("prepare.yaml", []byte(mc))
	if err != nil {
		t.Fatal(err)
	}
	top := t.TempDir()
	bRoot, lRoot := filepath.Join(top, "b"), filepath.Join(top, "l")
	baseTree(t, bRoot)
	base, err := fstree.Open(bRoot)
	if err != nil {
		t.Fatal(err)
	}
	defer base.Close()
	res, err := render.Render(context.Background(), machineconfig.Merge(mcs), base)
	if err != nil {
		t.Fatal(err)
	}
	m := res.Manifest(mcs)
	for i := range m.Entries {
		if m.Entries[i].Base, err = fstree.BaseState(base, m.Entries[i]); err != nil {
			t.Fatal(err)
		}
	}
	baseTree(t, lRoot)
	bake(t, lRoot, res)
	if editL != nil {
		editL(lRoot)
	}
	o.L, o.B = lRoot, bRoot
	return ostreetest.StageWith(t, o), mcs, m
}

// bake writes the rendering into the root as a layer would.
func bake(t testing.TB, root string, res *render.Result) {
	t.Helper()
	for _, e := range res.Entries {
		if e.Type == manifest.Absent {
			if err := os.Remove(filepath.Join(root, e.Where())); err != nil {
				t.Fatal(err)
			}
		}
	}
	tmp := filepath.Join(t.TempDir(), "layer")
	if err := render.WriteEntries(context.Background(), tmp, res.Entries, render.WriteOptions{Chown: true}); err != nil {
		t.Fatal(err)
	}
	if out, err := exec.Command("cp", "-a", tmp+"/.", root).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v: %s", err, out)
	}
}

// deployments are the booted (L) and staged (B) deployments of st.
func deployments(t testing.TB, st ostreetest.Staged) (*node.Sysroot, *node.Deployment, *node.Deployment) {
	t.Helper()
	s, err := node.OpenSysroot(st.Sysroot)
	if err != nil {
		t.Fatal(err)
	}
	booted, err := s.Deployment(st.Booted)
	if err != nil {
		t.Fatal(err)
	}
	staged, err := s.Deployment(st.Staged)
	if err != nil {
		t.Fatal(err)
	}
	return s, booted, staged
}

func paths(cs []node.Change) []string {
	var out []string
	for _, c := range cs {
		out = append(out, c.Path)
	}
	sort.Strings(out)
	return out
}

// TestPrepare computes and writes the staged deployment's paths: exactly
// those finalization would leave wrong where the node did not change
// them, with the MCD's modes and owners; the paths revert.Diff predicts;
// nothing else in the staged deployment; idempotent; a dry run writes
// nothing.
func TestPrepare(t *testing.T) {
	st, mcs, m := setup(t)
	s, booted, staged := deployments(t, st)
	before := roottest.Tree(t, staged.Dir)
	// Agreement: CI's prediction for the same MachineConfigs and base,
	// on the staged deployment before Prepare wrote into it.
	b, err := fstree.Open(staged.Dir)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	rep, err := revert.Diff(context.Background(), m, manifest.ImageRef{Digest: digest.FromString("L")}, manifest.ImageRef{Digest: digest.FromString("B")}, b)
	if err != nil {
		t.Fatal(err)
	}
	plan, err := revert.NewPlan(rep)
	if err != nil {
		t.Fatal(err)
	}
	var predicted []string
	for _, pe := range plan.Rewrite {
		// The node changed modified.conf, which CI cannot know.
		if pe.Path != "/etc/mcbake/modified.conf" {
			predicted = append(predicted, pe.Path)
		}
	}
	sort.Strings(predicted)

	dry, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, DryRun: true})
	if err != nil {
		t.Fatalf("Prepare(dry run): %v", err)
	}
	if diff := cmp.Diff(before, roottest.Tree(t, staged.Dir)); diff != "" {
		t.Fatalf("a dry run changed the staged deployment (-before +after):\n%s", diff)
	}
	rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	if diff := cmp.Diff(paths(dry.Written()), paths(rec.Written())); diff != "" {
		t.Errorf("Prepare and its dry run disagree (-dry +real):\n%s", diff)
	}
	want := []string{
		"/etc/hostname",
		"/etc/kubernetes",
		"/etc/mcbake",
		"/etc/mcbake/kubelet.conf",
		"/etc/mcbake/new",
		"/etc/mcbake/new/deep",
		"/etc/mcbake/new/deep/b.conf",
		"/etc/systemd/system/crio.service.d",
		"/etc/systemd/system/crio.service.d/10-mcbake.conf",
		"/etc/systemd/system/kubelet.service",
		"/etc/systemd/system/multi-user.target.wants/crio.service",
		"/etc/systemd/system/multi-user.target.wants/kubelet.service",
		"/etc/systemd/system/multi-user.target.wants/openvswitch.service",
		"/etc/systemd/system/zincati.service",
	}
	if diff := cmp.Diff(want, paths(rec.Written())); diff != "" {
		t.Errorf("Prepare wrote (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(predicted, paths(rec.Written())); diff != "" {
		t.Errorf("Prepare's writes and revert.Diff's clobbers (but the file the node changed) differ (-plan +prepare):\n%s", diff)
	}
	for _, c := range rec.Written() {
		if c.State != node.StateNew {
			t.Errorf("%s: state %s, want new", c.Path, c.State)
		}
	}
	skipped := map[string]string{}
	for _, c := range rec.Changes {
		if c.Op == node.OpSkipped {
			skipped[c.Path] = c.Reason
		}
	}
	for _, p := range []string{"/etc/mcbake/modified.conf", "/etc/kubernetes/kubelet-ca.crt", render.CurrentConfig, "/var/usrlocal/bin/tool"} {
		if skipped[p] == "" {
			t.Errorf("%s was not skipped (skipped: %v)", p, skipped)
		}
	}

	// The staged /etc now has what the MachineConfigs want, and nothing
	// else changed.
	after := roottest.Tree(t, staged.Dir)
	changed := map[string]bool{}
	for p := range after {
		if before[p] != after[p] {
			changed["/"+p] = true
		}
	}
	for p := range before {
		if _, ok := after[p]; !ok {
			changed["/"+p] = true
		}
	}
	wantChanged := map[string]bool{}
	for _, p := range want {
		wantChanged[p] = true
	}
	for _, p := range []string{node.RecordDir, node.RecordDir + "/" + node.RecordFile, node.RecordDir + "/" + node.MachineConfigsFile, "/etc/systemd", "/etc/systemd/system"} {
		wantChanged[p] = true // the record; directories whose entries changed
	}
	for p := range changed {
		if !wantChanged[p] && !strings.HasPrefix(p, "/etc/systemd/system/") {
			t.Errorf("Prepare changed %s, which it does not own", p)
		}
	}
	if got := after["etc/mcbake/new/deep/b.conf"]; got != "file 0600 1000:0 b\n" {
		t.Errorf("b.conf = %q, want file 0600 1000:0 b", got)
	}
	if _, ok := after["etc/systemd/system/multi-user.target.wants/openvswitch.service"]; ok {
		t.Errorf("the disabled unit's link is still in the staged /etc")
	}
	if got := after["etc/systemd/system/zincati.service"]; got != "link /dev/null 0:0" {
		t.Errorf("zincati.service = %q, want the mask", got)
	}

	again, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
	if err != nil {
		t.Fatalf("second Prepare: %v", err)
	}
	if w := again.Written(); len(w) != 0 {
		t.Errorf("second Prepare wrote %v, want nothing", paths(w))
	}
	recJSON := validateJSON(t, "record", again)
	schematest.Invalid(t, "record", recJSON, "no staged deployment", func(v any) { delete(schematest.Object(v), "staged") })
	schematest.Invalid(t, "record", recJSON, "an unknown op", func(v any) { schematest.Object(v, "changes", 0)["op"] = "wrote" })
	schematest.Invalid(t, "record", recJSON, "a serial as a string", func(v any) { schematest.Object(v, "booted")["serial"] = "0" })
	validateFile(t, "record-file", filepath.Join(staged.Dir, node.RecordDir, node.RecordFile))
	validateFile(t, "record-file", filepath.Join(staged.Var(), node.VarRecordDir, node.RecordFile))
	records, err := node.ReadRecords(filepath.Join(staged.Dir, node.RecordDir, node.RecordFile))
	if err != nil || len(records) != 1 {
		t.Fatalf("records = %d, %v; want 1, the last run's", len(records), err)
	}
	varRecords, err := node.ReadRecords(filepath.Join(staged.Var(), node.VarRecordDir, node.RecordFile))
	if err != nil || len(varRecords) != 2 {
		t.Errorf("records under /var = %d, %v; want 2", len(varRecords), err)
	}
}

// dryRunChanges runs a dry-run Prepare on st's deployments and returns
// its Changes by path.
func dryRunChanges(t *testing.T, st ostreetest.Staged, mcs []*machineconfig.MachineConfig) map[string]node.Change {
	t.Helper()
	s, booted, staged := deployments(t, st)
	rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, DryRun: true})
	if err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	got := map[string]node.Change{}
	for _, c := range rec.Changes {
		got[c.Path] = c
	}
	return got
}

// TestPrepareHardLink: a hard link the MachineConfigs own, which the MCD
// made in the live /etc (os.Link) while the default is a copy, is what
// ostree's diff calls unmodified (it compares content, mode and owners,
// not inodes): finalization leaves the staged /etc's, so Prepare writes
// it there.
func TestPrepareHardLink(t *testing.T) {
	mc := strings.Replace(prepareMC, "    systemd:\n", "      links:\n        - {path: /etc/mcbake/hl.conf, target: /etc/mcbake/kubelet.conf, hard: true}\n    systemd:\n", 1)
	st, mcs, _ := setupMC(t, mc, nil, ostreetest.StageOptions{MCDWrite: func(etc string) error {
		hl := filepath.Join(etc, "mcbake", "hl.conf")
		if err := os.Remove(hl); err != nil {
			return err
		}
		return os.Link(filepath.Join(etc, "mcbake", "kubelet.conf"), hl)
	}})
	c, ok := dryRunChanges(t, st, mcs)["/etc/mcbake/hl.conf"]
	if !ok {
		t.Fatal("no change for /etc/mcbake/hl.conf")
	}
	if c.Node != node.Unmodified || c.Op == node.OpSkipped {
		t.Errorf("the MCD's hard link: node %s, op %s (%s); want unmodified and written", c.Node, c.Op, c.Reason)
	}
}

// TestPrepareRemovedParent: an owned file the booted image's defaults
// lack, below a directory they have and the node removed, is skipped:
// finalization removes the whole directory (ostree's merge deletes what
// the node removed, recursively), whatever is written below it.
func TestPrepareRemovedParent(t *testing.T) {
	st, mcs, _ := setupMC(t, prepareMC, func(lRoot string) {
		if err := os.Remove(filepath.Join(lRoot, "etc/mcbake/new/deep/b.conf")); err != nil {
			t.Fatal(err)
		}
	}, ostreetest.StageOptions{MCDWrite: func(etc string) error {
		return os.RemoveAll(filepath.Join(etc, "mcbake", "new"))
	}})
	got := dryRunChanges(t, st, mcs)
	for _, p := range []string{"/etc/mcbake/new", "/etc/mcbake/new/deep", "/etc/mcbake/new/deep/b.conf"} {
		if c := got[p]; c.Op != node.OpSkipped || c.Node != node.Removed {
			t.Errorf("%s: node %s, op %s (%s); want skipped as removed", p, c.Node, c.Op, c.Reason)
		}
	}
	if r := got["/etc/mcbake/new/deep/b.conf"].Reason; !strings.Contains(r, "/etc/mcbake/new") {
		t.Errorf("b.conf's reason %q does not name the removed directory", r)
	}
}

// TestPrepareSymlinkedParent: a parent the defaults have as a symlink,
// which the node replaced with a directory, is modified: ostree's diff
// does not look below it, and finalization keeps what is written inside
// the staged directory. The file below is not skipped as below a removed
// directory (the symlink's target, followed, has one the node lacks).
func TestPrepareSymlinkedParent(t *testing.T) {
	st, mcs, _ := setupMC(t, prepareMC, func(lRoot string) {
		etc := filepath.Join(lRoot, "etc", "mcbake")
		if err := os.Rename(filepath.Join(etc, "new"), filepath.Join(etc, "new.d")); err != nil {
			t.Fatal(err)
		}
		if err := os.Remove(filepath.Join(etc, "new.d", "deep", "b.conf")); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink("new.d", filepath.Join(etc, "new")); err != nil {
			t.Fatal(err)
		}
	}, ostreetest.StageOptions{MCDWrite: func(etc string) error {
		p := filepath.Join(etc, "mcbake", "new")
		if err := os.Remove(p); err != nil {
			return err
		}
		return os.Mkdir(p, 0o755)
	}})
	c, ok := dryRunChanges(t, st, mcs)["/etc/mcbake/new/deep/b.conf"]
	if !ok {
		t.Fatal("no change for b.conf")
	}
	if c.Op == node.OpSkipped && strings.Contains(c.Reason, "above it") {
		t.Errorf("b.conf skipped as below a changed directory: %s", c.Reason)
	}
}

// TestPrepareMovedIntoVar: a file the booted deployment has below a real
// /etc directory, which the staged one turns into a symlink into /var, is
// skipped (mcbake-node writes no /var path), and the reason says the node
// has nothing there, as the diff predicts.
func TestPrepareMovedIntoVar(t *testing.T) {
	st, mcs, _ := setupMC(t, prepareMC, nil, ostreetest.StageOptions{MCDWrite: func(string) error { return nil }})
	dir := filepath.Join(st.Staged, "etc", "mcbake", "new")
	if err := os.MkdirAll(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("../../var/lib/mcbake-new", dir); err != nil {
		t.Fatal(err)
	}
	c, ok := dryRunChanges(t, st, mcs)["/var/lib/mcbake-new/deep/b.conf"]
	if !ok {
		t.Fatal("no change for b.conf at /var/lib/mcbake-new/deep/b.conf")
	}
	if c.Op != node.OpSkipped || !strings.Contains(c.Reason, "where the node has nothing") {
		t.Errorf("b.conf moved into /var: op %s (%s); want skipped, saying the node has nothing there", c.Op, c.Reason)
	}
}

// TestPrepareFailureHalfway injects a failure after some of the writes:
// every path ends old, the returned record says so, and the staged
// deployment has no record of the failed run.
func TestPrepareFailureHalfway(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	before := roottest.Tree(t, staged.Dir)
	boom := errors.New("injected failure")
	rec, err := node.Prepare(context.Background(), s, booted, staged, node.WithFailAt(node.PrepareOptions{MachineConfigs: mcs}, func(i int) error {
		if i == 7 {
			return boom
		}
		return nil
	}))
	if !errors.Is(err, boom) {
		t.Fatalf("Prepare = %v, want the injected failure", err)
	}
	if rec == nil || rec.Error == "" {
		t.Fatalf("Prepare's record = %+v, want one that names the error", rec)
	}
	for _, c := range rec.Written() {
		if c.State != node.StateOld {
			t.Errorf("%s: state %s after the failure, want old", c.Path, c.State)
		}
	}
	// The record too: it is written with the paths, or not at all.
	if diff := cmp.Diff(before, roottest.Tree(t, staged.Dir), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("a failed Prepare left changes (-before +after):\n%s", diff)
	}
}

// TestPrepareRecordFails: when the record cannot be written (in the
// staged deployment or under the stateroot's /var), Prepare fails and
// every path it would have written is back as it was: the record is part
// of the transaction.
func TestPrepareRecordFails(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(staged, varDir string) error
	}{
		{"record directory a file", func(staged, _ string) error {
			return os.WriteFile(filepath.Join(staged, "etc/mcbake/revert"), []byte("in the way\n"), 0o644)
		}},
		{"record file a directory", func(staged, _ string) error {
			return os.MkdirAll(filepath.Join(staged, "etc/mcbake/revert/record.json/full"), 0o755)
		}},
		{"/var copy's directory a file", func(_, varDir string) error {
			if err := os.MkdirAll(filepath.Join(varDir, "lib"), 0o755); err != nil {
				return err
			}
			return os.WriteFile(filepath.Join(varDir, "lib/mcbake"), []byte("in the way\n"), 0o644)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, mcs, _ := setup(t)
			s, booted, staged := deployments(t, st)
			if err := os.MkdirAll(filepath.Join(staged.Dir, "etc/mcbake"), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := tt.break_(staged.Dir, staged.Var()); err != nil {
				t.Fatal(err)
			}
			before := roottest.Tree(t, staged.Dir)
			rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
			if err == nil {
				t.Fatal("Prepare = nil, want the record's write to fail")
			}
			if rec == nil || rec.Error == "" {
				t.Errorf("Prepare returned no record naming the error (%v), want one", rec != nil)
			} else if len(rec.Written()) == 0 {
				t.Fatal("Prepare had nothing to write: the test proves nothing")
			} else {
				for _, c := range rec.Written() {
					if c.State != node.StateOld {
						t.Errorf("%s: state %s after the failure, want old", c.Path, c.State)
					}
				}
			}
			if diff := cmp.Diff(before, roottest.Tree(t, staged.Dir)); diff != "" {
				t.Errorf("a Prepare whose record failed left changes (-before +after):\n%s", diff)
			}
		})
	}
}

// TestPrepareRecordBounded: every run replaces the staged deployment's
// record, whatever was there (one too large to read, say), and the
// history under /var keeps the last node.MaxHistory records, only the
// newest with its changes; a history that is not one is kept aside, and
// the record says so.
func TestPrepareRecordBounded(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	stagedRecord := filepath.Join(staged.Dir, node.RecordDir, node.RecordFile)
	varDir := filepath.Join(staged.Var(), node.VarRecordDir)
	roottest.Write(t, staged.Dir, map[string]string{
		strings.TrimPrefix(node.RecordDir, "/") + "/" + node.RecordFile: "[" + strings.Repeat(" ", 5<<20) + "]",
	})
	roottest.Write(t, varDir, map[string]string{node.RecordFile: "{not a history"})
	for run := range node.MaxHistory + 2 {
		now := time.Date(2026, 12, 5, 10, 0, run, 0, time.UTC)
		rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, Now: func() time.Time { return now }})
		if err != nil {
			t.Fatalf("Prepare, run %d: %v", run+1, err)
		}
		if run == 0 && (len(rec.Notes) != 1 || !strings.Contains(rec.Notes[0], "kept aside")) {
			t.Errorf("the first run's notes = %q, want one saying the history was kept aside", rec.Notes)
		}
	}
	records, err := node.ReadRecords(stagedRecord)
	if err != nil || len(records) != 1 || len(records[0].Changes) == 0 {
		t.Fatalf("the staged deployment's records = %d, %v; want 1, with its changes", len(records), err)
	}
	stored := validateFile(t, "record-file", filepath.Join(varDir, node.RecordFile))
	schematest.Invalid(t, "record-file", stored, "a record without its time", func(v any) { delete(schematest.Object(v, 0), "time") })
	history, err := node.ReadRecords(filepath.Join(varDir, node.RecordFile))
	if err != nil || len(history) != node.MaxHistory {
		t.Fatalf("the records under /var = %d, %v; want %d", len(history), err, node.MaxHistory)
	}
	for i, r := range history {
		newest := i == len(history)-1
		if newest != (len(r.Changes) > 0) || newest == (r.Omitted > 0) {
			t.Errorf("history[%d]: %d changes, %d omitted; want changes in the newest only", i, len(r.Changes), r.Omitted)
		}
	}
	if got, want := history[len(history)-1].Time, records[0].Time; !got.Equal(want) {
		t.Errorf("the newest record under /var is of %v, want the last run's (%v)", got, want)
	}
	aside, err := filepath.Glob(filepath.Join(varDir, node.RecordFile+".corrupt-*"))
	if err != nil || len(aside) != 1 {
		t.Fatalf("histories kept aside = %v, %v; want one", aside, err)
	}
	if b, err := os.ReadFile(aside[0]); err != nil || string(b) != "{not a history" {
		t.Errorf("the history kept aside = %q, %v; want what was there", b, err)
	}
}

// TestPrepareLabels: with an SELinux policy in the staged deployment,
// every written path gets the context its file_contexts assigns (on a
// host without SELinux the security.selinux xattr is stored as given).
func TestPrepareLabels(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	roottest.Write(t, staged.Dir, map[string]string{
		"etc/selinux/config": "SELINUX=enforcing\nSELINUXTYPE=targeted\n",
		"etc/selinux/targeted/contexts/files/file_contexts": `/etc(/.*)?	system_u:object_r:etc_t:s0
/etc/systemd/system(/.*)?	system_u:object_r:systemd_unit_file_t:s0
/etc/hostname	--	system_u:object_r:hostname_etc_t:s0
/etc/mcbake/new(/.*)?	-d	system_u:object_r:mcbake_dir_t:s0
/etc/systemd/system/zincati\.service	-l	system_u:object_r:masked_t:s0
`,
		"etc/selinux/targeted/contexts/files/file_contexts.local": "/etc/mcbake/kubelet\\.conf	system_u:object_r:kubelet_conf_t:s0\n",
	})
	if _, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs}); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	want := map[string]string{
		"etc/hostname":                       "system_u:object_r:hostname_etc_t:s0",
		"etc/mcbake":                         "system_u:object_r:etc_t:s0",
		"etc/mcbake/kubelet.conf":            "system_u:object_r:kubelet_conf_t:s0",
		"etc/mcbake/new":                     "system_u:object_r:mcbake_dir_t:s0",
		"etc/mcbake/new/deep":                "system_u:object_r:mcbake_dir_t:s0",
		"etc/mcbake/new/deep/b.conf":         "system_u:object_r:etc_t:s0",
		"etc/systemd/system/kubelet.service": "system_u:object_r:systemd_unit_file_t:s0",
		"etc/systemd/system/zincati.service": "system_u:object_r:masked_t:s0",
		"etc/systemd/system/crio.service.d":  "system_u:object_r:systemd_unit_file_t:s0",
		"etc/systemd/system/multi-user.target.wants/kubelet.service": "system_u:object_r:systemd_unit_file_t:s0",
	}
	got := map[string]string{}
	for p := range want {
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(filepath.Join(staged.Dir, p), "security.selinux", buf)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		got[p] = strings.TrimRight(string(buf[:n]), "\x00")
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("labels (-want +got):\n%s", diff)
	}
}

// TestPrepareReadOnlySysroot: on a sysroot mounted read-only the writes
// happen in a private mount namespace; the host keeps it read-only.
func TestPrepareReadOnlySysroot(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	if err := unix.Mount(st.Sysroot, st.Sysroot, "", unix.MS_BIND, ""); err != nil {
		t.Skipf("bind mount: %v", err)
	}
	t.Cleanup(func() { _ = unix.Unmount(st.Sysroot, unix.MNT_DETACH) })
	if err := unix.Mount("", st.Sysroot, "", unix.MS_REMOUNT|unix.MS_BIND|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remounting read-only: %v", err)
	}
	if err := os.WriteFile(filepath.Join(staged.Dir, "etc", "probe"), nil, 0o644); err == nil || !errors.Is(err, unix.EROFS) {
		t.Fatalf("writing the read-only sysroot = %v, want EROFS", err)
	}
	rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs})
	if err != nil {
		t.Fatalf("Prepare on a read-only sysroot: %v", err)
	}
	if len(rec.Written()) == 0 {
		t.Fatal("Prepare wrote nothing")
	}
	if _, err := os.Lstat(filepath.Join(staged.Dir, "etc", "mcbake", "kubelet.conf")); err != nil {
		t.Errorf("after Prepare: %v", err)
	}
	if err := os.WriteFile(filepath.Join(staged.Dir, "etc", "probe"), nil, 0o644); !errors.Is(err, unix.EROFS) {
		t.Errorf("the host's sysroot is writable after Prepare (%v), want it still read-only", err)
	}
}

// TestPrepareRefuses: a staged /etc that has a fifo or a symlink where the
// MachineConfigs own a file, or no MachineConfig: an error that names the
// path and the MachineConfig, and nothing written.
func TestPrepareRefuses(t *testing.T) {
	tests := []struct {
		name   string
		break_ func(etc string) error
		mcs    bool
		want   string
	}{
		{"fifo", func(etc string) error {
			if err := os.MkdirAll(filepath.Join(etc, "mcbake"), 0o755); err != nil {
				return err
			}
			return unix.Mkfifo(filepath.Join(etc, "mcbake", "kubelet.conf"), 0o644)
		}, true, "/etc/mcbake/kubelet.conf (99-worker-prepare spec.config.storage.files[0]): the staged deployment has something that is not a file, directory or symlink there"},
		{"symlink", func(etc string) error {
			if err := os.MkdirAll(filepath.Join(etc, "mcbake"), 0o755); err != nil {
				return err
			}
			return os.Symlink("/etc/shadow", filepath.Join(etc, "mcbake", "kubelet.conf"))
		}, true, "the staged deployment has a symlink there, where the MachineConfig owns a file"},
		{"no MachineConfig", func(string) error { return nil }, false, "no MachineConfig given"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st, mcs, _ := setup(t)
			s, booted, staged := deployments(t, st)
			if err := tt.break_(filepath.Join(staged.Dir, "etc")); err != nil {
				t.Fatal(err)
			}
			before := roottest.Tree(t, staged.Dir)
			o := node.PrepareOptions{}
			if tt.mcs {
				o.MachineConfigs = mcs
			}
			_, err := node.Prepare(context.Background(), s, booted, staged, o)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Prepare = %v, want %q", err, tt.want)
			}
			if diff := cmp.Diff(before, roottest.Tree(t, staged.Dir)); diff != "" {
				t.Errorf("a refused Prepare changed the staged deployment (-before +after):\n%s", diff)
			}
		})
	}
}

// unstage removes the bootloader entry of the staged deployment, which
// ostreetest.Stage deploys unstaged: a staged deployment has none until it
// is finalized.
func unstage(t *testing.T, st ostreetest.Staged) {
	t.Helper()
	entries, err := filepath.Glob(filepath.Join(st.Sysroot, "boot", "loader", "entries", "*.conf"))
	if err != nil {
		t.Fatal(err)
	}
	removed := 0
	for _, e := range entries {
		b, err := os.ReadFile(e)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range strings.Fields(string(b)) {
			link, ok := strings.CutPrefix(f, "ostree=")
			if !ok {
				continue
			}
			target, err := filepath.EvalSymlinks(filepath.Join(st.Sysroot, link))
			if err != nil {
				t.Fatal(err)
			}
			if want, _ := filepath.EvalSymlinks(st.Staged); target == want {
				if err := os.Remove(e); err != nil {
					t.Fatal(err)
				}
				removed++
			}
		}
	}
	if removed != 1 {
		t.Fatalf("removed %d bootloader entries of %s, want 1", removed, st.Staged)
	}
}

// TestSysrootDeployments: the booted deployment is the default bootloader
// entry's on a sysroot that is not running, the staged one the deployment
// no entry names; and the refusals.
func TestSysrootDeployments(t *testing.T) {
	st, mcs, _ := setup(t)
	s, err := node.OpenSysroot(st.Sysroot)
	if err != nil {
		t.Fatal(err)
	}
	// Deployed, not staged: the base is the default entry, nothing staged.
	booted, err := s.Booted()
	if err != nil || booted.Dir != st.Staged {
		t.Fatalf("Booted() = %+v, %v; want the newest deployment %s", booted, err, st.Staged)
	}
	if _, err := s.Staged(booted); !errors.Is(err, node.ErrNothingStaged) {
		t.Errorf("Staged() with both deployments in the bootloader = %v, want ErrNothingStaged", err)
	}

	unstage(t, st)
	booted, err = s.Booted()
	if err != nil || booted.Dir != st.Booted {
		t.Fatalf("Booted() = %+v, %v; want %s", booted, err, st.Booted)
	}
	staged, err := s.Staged(booted)
	if err != nil || staged.Dir != st.Staged {
		t.Fatalf("Staged() = %+v, %v; want %s", staged, err, st.Staged)
	}
	rec, err := node.PrepareRevert(context.Background(), node.PrepareOptions{Sysroot: st.Sysroot, MachineConfigs: mcs, DryRun: true})
	if err != nil || rec.Staged.Dir != st.Staged || len(rec.Written()) == 0 {
		t.Fatalf("PrepareRevert(dry run) = %+v, %v; want writes for %s", rec, err, st.Staged)
	}

	// A second candidate.
	other := filepath.Join(filepath.Dir(st.Staged), strings.Repeat("a", 64)+".0")
	if err := os.Mkdir(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Staged(booted); !errors.Is(err, node.ErrSeveralStaged) {
		t.Errorf("Staged() with two candidates = %v, want ErrSeveralStaged", err)
	}
	// The only candidate is of the booted commit.
	for _, d := range []string{other, st.Staged} {
		if err := os.RemoveAll(d); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Mkdir(filepath.Join(filepath.Dir(st.Staged), booted.Checksum+".1"), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Staged(booted); !errors.Is(err, node.ErrStagedIsBooted) {
		t.Errorf("Staged() of the booted commit = %v, want ErrStagedIsBooted", err)
	}
	if _, err := node.OpenSysroot(t.TempDir()); err == nil {
		t.Error("OpenSysroot(an empty directory) = nil error")
	}
}

// TestBootedComposefs: on a running system whose "/" is not a deployment
// directory (a composefs or overlay root, as this test's "/" is not one),
// the booted deployment is the one whose etc is the running /etc; with
// none, it is an error.
func TestBootedComposefs(t *testing.T) {
	st, _, _ := setup(t)
	unstage(t, st)
	s, err := node.OpenSysroot(st.Sysroot)
	if err != nil {
		t.Fatal(err)
	}
	s.Running = true
	restore := node.SetRunningEtc(t.TempDir())
	if d, err := s.Booted(); err == nil {
		t.Fatalf("Booted() with an /etc of no deployment = %+v, want an error", d)
	}
	restore()
	// The running /etc, as ostree-prepare-root mounts it: a bind mount of
	// the deployment's (here the directory itself).
	defer node.SetRunningEtc(filepath.Join(st.Booted, "etc"))()
	booted, err := s.Booted()
	if err != nil || booted.Dir != st.Booted {
		t.Fatalf("Booted() = %+v, %v; want %s", booted, err, st.Booted)
	}
}

// TestPreparePlanMismatch: a plan that lists another path than the node
// computes, or whose images the node cannot identify, is refused and
// nothing is written.
func TestPreparePlanMismatch(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	dry, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	plan := &revert.Plan{SchemaVersion: revert.PlanSchemaVersion, Image: manifest.ImageRef{Digest: digest.FromString("L")}, Base: manifest.ImageRef{Digest: digest.FromString("B")}}
	for _, c := range dry.Written()[1:] {
		plan.Rewrite = append(plan.Rewrite, revert.PlanEntry{Path: c.Path, Type: manifest.Directory, Mode: 0o755})
	}
	plan.Rewrite = append(plan.Rewrite, revert.PlanEntry{Path: "/etc/not-owned", Type: manifest.Directory, Mode: 0o755})
	before := roottest.Tree(t, staged.Dir)
	_, err = node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, Plan: plan})
	var pm *node.PlanMismatchError
	if !errors.As(err, &pm) {
		t.Fatalf("Prepare with a mismatched plan = %v, want a PlanMismatchError", err)
	}
	for _, want := range []string{
		"cannot tell which image the booted deployment",
		"/etc/not-owned: the plan rewrites it, the node computes nothing to write there",
		dry.Written()[0].Path + ": the node computes a write the plan does not list",
	} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Prepare with a mismatched plan = %v, want it to say %q", err, want)
		}
	}
	if diff := cmp.Diff(before, roottest.Tree(t, staged.Dir)); diff != "" {
		t.Errorf("a refused plan changed the staged deployment (-before +after):\n%s", diff)
	}
}

// imageMeta is the commit metadata ostree-ext records for an image with
// the manifest digest m, config digest c and one layer diff ID d.
func imageMeta(m, c, d string) map[string]string {
	return map[string]string{
		"ostree.manifest-digest":        digest.FromString(m).String(),
		"ostree.manifest":               `{"schemaVersion":2,"config":{"digest":"` + digest.FromString(c).String() + `"}}`,
		"ostree.container.image-config": `{"rootfs":{"type":"layers","diff_ids":["` + digest.FromString(d).String() + `"]}}`,
	}
}

func imageRef(m, c, d string) manifest.ImageRef {
	return manifest.ImageRef{Digest: digest.FromString(m), Config: digest.FromString(c), DiffIDs: []digest.Digest{digest.FromString(d)}}
}

// TestPlanImages: plans name images by config digest and diff IDs, which
// survive a conversion to another manifest format. Prepare and Rewrite
// accept a plan for a converted copy of the images the deployments were
// made from, and refuse one for other images.
func TestPlanImages(t *testing.T) {
	st, mcs, m := setupWith(t, ostreetest.StageOptions{MCDWrite: func(string) error { return nil },
		LMeta: imageMeta("L manifest", "L config", "L layer"), BMeta: imageMeta("B manifest", "B config", "B layer")})
	s, booted, staged := deployments(t, st)
	dry, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, DryRun: true})
	if err != nil {
		t.Fatal(err)
	}
	plan := &revert.Plan{SchemaVersion: revert.PlanSchemaVersion,
		// Converted copies: other manifest digests, the same config and layers.
		Image: imageRef("L as docker schema2", "L config", "L layer"), Base: imageRef("B as docker schema2", "B config", "B layer")}
	for _, c := range dry.Written() {
		if !c.ConfigDir {
			plan.Rewrite = append(plan.Rewrite, revert.PlanEntry{Path: c.Path, Type: manifest.Directory, Mode: 0o755})
		}
	}
	if _, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, Plan: plan, DryRun: true}); err != nil {
		t.Errorf("Prepare with a plan for converted copies of the images = %v, want it accepted", err)
	}
	// Idempotent with the plan too: a second run finds the paths the
	// first wrote as the plan wants them (files, parents, removed links),
	// and writes nothing.
	typed := *plan
	typed.Rewrite = nil
	for _, pe := range plan.Rewrite {
		e, ok := m.Lookup(pe.Path)
		if !ok {
			t.Fatalf("%s is not in the manifest", pe.Path)
		}
		typed.Rewrite = append(typed.Rewrite, revert.PlanEntry{Path: pe.Path, Type: e.Type, Mode: e.Mode, UID: e.UID, GID: e.GID, Digest: e.Digest, Target: e.Target})
	}
	for run := 1; run <= 2; run++ {
		rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, Plan: &typed})
		if err != nil {
			t.Fatalf("Prepare with the plan, run %d: %v", run, err)
		}
		if n := len(rec.Written()); run == 2 && n != 0 {
			t.Errorf("Prepare with the plan, run 2 wrote %d paths, want none", n)
		}
	}
	other := *plan
	other.Base = imageRef("B manifest", "another config", "another layer")
	_, err = node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs, Plan: &other, DryRun: true})
	if err == nil || !strings.Contains(err.Error(), "but the staged deployment is "+digest.FromString("B manifest").String()) {
		t.Errorf("Prepare with a plan for another base = %v, want a refusal naming the staged image", err)
	}

	// Rewrite on the deployment: the same check against its base.
	root, err := node.Open(st.Staged)
	if err != nil {
		t.Fatal(err)
	}
	defer root.Close()
	other.Rewrite = nil
	if _, err := node.Rewrite(context.Background(), root, &other, mcs, node.RewriteOptions{DryRun: true}); err == nil || !strings.Contains(err.Error(), "plan: made for base") {
		t.Errorf("Rewrite with a plan for another base = %v, want a refusal", err)
	}
	plan.Rewrite = nil
	if _, err := node.Rewrite(context.Background(), root, plan, mcs, node.RewriteOptions{DryRun: true}); err != nil {
		t.Errorf("Rewrite with a plan for a converted copy of the base = %v, want it accepted", err)
	}
}
