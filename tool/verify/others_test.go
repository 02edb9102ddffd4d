package verify

import (
	"archive/tar"
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
)

// othersConfig is what the image built by others bakes: a file, a link, a
// directory and a disabled base unit.
const othersConfig = `{
  "storage": {
    "files": [{"path": "/etc/mcbake/a.conf", "mode": 420, "contents": {"source": "data:,a%0A"}}],
    "links": [{"path": "/etc/mcbake/link", "target": "a.conf"}],
    "directories": [{"path": "/etc/mcbake/d", "mode": 488}]
  },
  "systemd": {"units": [{"name": "openvswitch.service", "enabled": false}]}
}`

// othersLayer is othersConfig as another builder baked it (docs/design.md,
// "Images built by others"): the file with mode 0600 instead of the
// machine-config-daemon's 0644, the link and the directory as the daemon
// writes them, the unit's enablement link removed (systemctl disable ran
// in the build), and no mcbake label.
func othersLayer() testbase.Layer {
	return testbase.Layer{
		Files: []testbase.File{
			{Path: "etc/mcbake/a.conf", Mode: 0o600, Content: []byte("a\n")},
			{Path: "etc/mcbake/link", Type: tar.TypeSymlink, Mode: 0o777, Target: "a.conf"},
			{Path: "etc/mcbake/d", Type: tar.TypeDir, Mode: 0o750},
		},
		Whiteouts: []string{"etc/systemd/system/multi-user.target.wants/openvswitch.service"},
		Comment:   "an image built by others",
	}
}

// othersOutcomes is what a revert of the image built by others to the
// default base does: the path baked otherwise than the daemon writes it is
// modified on the node and kept, and so is its directory, which the merge
// recreates from the node's copy; the rest is the image's unmodified
// default: removed, or, for the link the build already removed, restored.
var othersOutcomes = map[string]revert.Outcome{
	"/etc/mcbake":        revert.Kept,
	"/etc/mcbake/a.conf": revert.Kept,
	"/etc/mcbake/link":   revert.Removed,
	"/etc/mcbake/d":      revert.Removed,
	"/etc/systemd/system/multi-user.target.wants/openvswitch.service": revert.Restored,
	"/etc/machine-config-daemon":                                      revert.Kept,
	"/etc/machine-config-daemon/currentconfig":                        revert.Kept,
}

func TestDiffImageBuiltByOthers(t *testing.T) {
	e := newEnv(t)
	mc := e.mc("50-a", othersConfig)
	others := e.writeBase("others", othersLayer())
	o := DiffOptions{Base: e.base, Image: others, MachineConfigs: []string{mc}, Images: e.opts}
	r, err := Diff(context.Background(), o)
	if err != nil {
		t.Fatalf("Diff(--image built by others -f): %v", err)
	}
	if r.Owned != revert.Derived || len(r.MachineConfigs) != 1 || r.MachineConfigs[0].Name != "50-a" || r.Image.Digest == "" {
		t.Errorf("Diff: owned %q from %v, image %v; want derived from 50-a, with the image's digest", r.Owned, r.MachineConfigs, r.Image)
	}
	got := map[string]revert.Outcome{}
	for _, en := range r.Entries {
		got[en.Want.Path] = en.Outcome
		if en.Image == nil {
			t.Errorf("Diff: %s has no image state", en.Path)
		}
	}
	if diff := cmp.Diff(othersOutcomes, got); diff != "" {
		t.Errorf("Diff outcomes (-want +got):\n%s", diff)
	}

	o.MachineConfigs = nil
	if _, err := Diff(context.Background(), o); !errors.Is(err, image.ErrNotLayered) {
		t.Errorf("Diff(--image built by others, no MachineConfigs) = %v, want ErrNotLayered", err)
	}
}

func TestRunImageBuiltByOthers(t *testing.T) {
	e := newEnv(t)
	mc := e.mc("50-a", othersConfig)
	others := e.writeBase("others", othersLayer())
	r := e.run(Options{MachineConfigs: []string{mc}, Base: e.base, Image: others})
	// The one image finding: the file baked 0600 where the MachineConfig
	// says 0644.
	wantFound := []string{RuleContentMismatch + " 50-a spec.config.storage.files[0] /etc/mcbake/a.conf"}
	if got, msgs := imageFindings(r); !slices.Equal(got, wantFound) {
		t.Errorf("image findings for an image built by others: %q (%q), want %q", got, msgs, wantFound)
	}
	if got := findingsOf(r, RuleRevertGuard); len(got) != 1 || !strings.Contains(got[0].Message, guard.UnitPath) {
		t.Errorf("%s findings for an image built by others without the guard: %v, want one naming %s", RuleRevertGuard, got, guard.UnitPath)
	}
	// The same image with the guard added by mcbake build (no
	// MachineConfigs) is still one built by others, and guarded.
	guarded := "oci:" + filepath.Join(e.dir, "others-guarded") + ":latest"
	if _, err := build.Image(context.Background(), build.Options{Base: others, Output: guarded, Images: e.opts, Guard: testGuard}); err != nil {
		t.Fatalf("adding the guard: %v", err)
	}
	rg := e.run(Options{MachineConfigs: []string{mc}, Base: e.base, Image: guarded})
	if got := findingsOf(rg, RuleRevertGuard); len(got) != 0 {
		t.Errorf("%s findings for the guarded image: %v", RuleRevertGuard, got)
	}
	if diff := cmp.Diff(r.NotRun, rg.NotRun); diff != "" {
		t.Errorf("the guard changed which rules run (-without +with):\n%s", diff)
	}
	notRun := map[string]string{}
	for _, n := range r.NotRun {
		notRun[n.Rule] = n.Reason
	}
	const why = "the image has no mcbake manifest (built by others)"
	want := map[string]string{RuleManifestDrift: why, RuleStaleImage: why, RuleBaseMismatch: why}
	if diff := cmp.Diff(want, notRun); diff != "" {
		t.Errorf("rules not run (-want +got):\n%s", diff)
	}
	var paths []string
	for _, f := range r.Findings {
		if f.Rule == RuleRevertClobber {
			paths = f.Paths
		}
	}
	var wantPaths []string
	for p, o := range othersOutcomes {
		if o.Clobbers() {
			wantPaths = append(wantPaths, p)
		}
	}
	slices.Sort(wantPaths)
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("%s paths (-want +got):\n%s", RuleRevertClobber, diff)
	}
}

// TestDiffErrorsInOrder: the base opens while the image's manifest is
// read, and an error of the image (or of its manifest file) is the one
// reported when both fail, as when they ran one after the other; then
// the base's.
func TestDiffErrorsInOrder(t *testing.T) {
	e := newEnv(t)
	missing := "oci:" + filepath.Join(e.dir, "no-such-base") + ":latest"
	layered := e.build(e.base, "layered", e.mc("50-a", othersConfig))
	others := e.writeBase("others", othersLayer())
	for _, tt := range []struct {
		name string
		o    DiffOptions
		want func(error) bool
	}{
		{"an image without a manifest", DiffOptions{Base: missing, Image: others},
			func(err error) bool { return errors.Is(err, image.ErrNotLayered) }},
		{"a manifest file missing", DiffOptions{Base: missing, ManifestFile: filepath.Join(e.dir, "no-such.json")},
			func(err error) bool {
				return errors.Is(err, fs.ErrNotExist) && strings.Contains(err.Error(), "no-such.json")
			}},
		{"a base missing", DiffOptions{Base: missing, Image: layered},
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "no-such-base") }},
	} {
		tt.o.Images = e.opts
		if _, err := Diff(context.Background(), tt.o); !tt.want(err) {
			t.Errorf("Diff with %s: %v", tt.name, err)
		}
	}
	r, err := Diff(context.Background(), DiffOptions{Base: e.base, Image: layered, Images: e.opts})
	if err != nil || r.Image.Reference != layered || len(r.Entries) == 0 {
		t.Fatalf("Diff of the layered image = %+v, %v", r, err)
	}
}

// findingsOf returns r's findings of rule.
func findingsOf(r *Report, rule string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Rule == rule {
			out = append(out, f)
		}
	}
	return out
}

// TestDiffBaseDropinsOfEnabledUnit: diff --image L -f MC renders the
// MachineConfigs against L, whose drop-ins (under /usr and /etc) for a
// unit they enable systemctl enable reads.
func TestDiffBaseDropinsOfEnabledUnit(t *testing.T) {
	e := newEnv(t)
	mc := e.mc("50-crio", `{"systemd": {"units": [{"name": "crio.service", "enabled": true}]}}`)
	img := e.writeBase("dropins", testbase.Layer{Files: []testbase.File{
		{Path: "usr/lib/systemd/system/crio.service.d/05-base.conf", Mode: 0o644, Content: []byte("[Install]\nWantedBy=sockets.target\n")},
		{Path: "etc/systemd/system/crio.service.d/06-etc.conf", Mode: 0o644, Content: []byte("[Service]\nEnvironment=X=1\n")},
	}})
	r, err := Diff(context.Background(), DiffOptions{Base: e.base, Image: img, MachineConfigs: []string{mc}, Images: e.opts})
	if err != nil {
		t.Fatalf("Diff(--image with crio.service drop-ins -f crio.service enabled): %v", err)
	}
	const link = "/etc/systemd/system/sockets.target.wants/crio.service"
	if !slices.ContainsFunc(r.Entries, func(en revert.Entry) bool { return en.Want.Path == link }) {
		t.Errorf("Diff: no entry for %s, the link the drop-in's [Install] makes", link)
	}
}
