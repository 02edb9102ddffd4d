package revert_test

import (
	"archive/tar"
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
)

// derivedBase is what the base B of TestPredictDerived has on top of the
// default test base: a directory to which the image and the MachineConfigs
// give other modes, and a directory where they want a file.
func derivedBase() testbase.Layer {
	return testbase.Layer{Files: []testbase.File{
		{Path: "etc/bdir", Type: tar.TypeDir, Mode: 0o755},
		{Path: "etc/overdir", Type: tar.TypeDir, Mode: 0o755},
		{Path: "etc/overdir/f", Mode: 0o644, Content: []byte("b\n")},
	}}
}

// derivedImage is what the image L of TestPredictDerived bakes on top of
// B, as a builder other than mcbake could: some paths as the
// machine-config-daemon writes them, some otherwise.
func derivedImage() testbase.Layer {
	return testbase.Layer{
		Files: []testbase.File{
			{Path: "etc/same.conf", Mode: 0o644, Content: []byte("x\n")},
			{Path: "etc/mode.conf", Mode: 0o600, Content: []byte("x\n")},
			{Path: "etc/bdir", Type: tar.TypeDir, Mode: 0o700},
			{Path: "etc/newdir", Type: tar.TypeDir, Mode: 0o700},
			{Path: "etc/newdir/f", Mode: 0o644, Content: []byte("x\n")},
			{Path: "etc/recreated", Type: tar.TypeDir, Mode: 0o755},
			{Path: "etc/recreated/m.conf", Mode: 0o600, Content: []byte("x\n")},
			{Path: "etc/recreated/u.conf", Mode: 0o644, Content: []byte("x\n")},
			{Path: "etc/bo", Type: tar.TypeDir, Mode: 0o700},
			{Path: "etc/bo/m.conf", Mode: 0o600, Content: []byte("x\n")},
			{Path: "usr/share/mcbake/x", Mode: 0o644, Content: []byte("x\n")},
		},
		Whiteouts: []string{"etc/overdir", "etc/systemd/system/multi-user.target.wants/zincati.service"},
	}
}

// TestPredictDerived checks each rule of PredictDerived for an image
// without a manifest, whose defaults are compared with what the
// machine-config-daemon writes (the merge rules are pinned against real
// ostree by internal/testing/ostreetest's TestMerge; the whole against ostree by
// TestRevertEndToEndIgnitionImage).
func TestPredictDerived(t *testing.T) {
	b := compareIndex(t, testbase.Options{ExtraLayers: []testbase.Layer{derivedBase()}})
	l := compareIndex(t, testbase.Options{ExtraLayers: []testbase.Layer{derivedBase(), derivedImage()}})
	m := &manifest.Manifest{Entries: []manifest.Entry{
		fileEntry("/etc/same.conf", "x\n", 0o644, 0, 0),
		fileEntry("/etc/mode.conf", "x\n", 0o644, 0, 0),
		linkEntry("/etc/added.link", "same.conf"),
		absentEntry("/etc/systemd/system/multi-user.target.wants/openvswitch.service"),
		absentEntry("/etc/systemd/system/multi-user.target.wants/zincati.service"),
		dirEntry("/etc/bdir", 0o750),
		dirEntry("/etc/newdir", 0o750),
		fileEntry("/etc/newdir/f", "x\n", 0o644, 0, 0),
		dirEntry("/etc/recreated", 0o755),
		fileEntry("/etc/recreated/m.conf", "x\n", 0o644, 0, 0),
		fileEntry("/etc/recreated/u.conf", "x\n", 0o644, 0, 0),
		dirEntry("/etc/bo", 0o755),
		fileEntry("/etc/bo/m.conf", "x\n", 0o644, 0, 0),
		fileEntry("/etc/overdir", "l\n", 0o644, 0, 0),
		fileEntry("/usr/share/mcbake/x", "x\n", 0o644, 0, 0),
	}}
	m.Sort()
	baseOnly := map[string]bool{"/etc/bo": true, "/etc/systemd/system/multi-user.target.wants/zincati.service": true}
	entries, err := revert.PredictDerived(context.Background(), revert.Ownership{Manifest: m, BaseOnly: baseOnly}, l, b)
	if err != nil {
		t.Fatalf("PredictDerived: %v", err)
	}
	type outcome struct {
		Image   manifest.State
		Outcome revert.Outcome
		Reason  string // a part of it
	}
	want := map[string]outcome{
		"/etc/same.conf":  {manifest.StateSame, revert.Removed, "unmodified default"},
		"/etc/mode.conf":  {manifest.StateDiffers, revert.Kept, "differs from what the machine-config-daemon writes (mode)"},
		"/etc/added.link": {manifest.StateAbsent, revert.Kept, "counts as added"},
		// The image has the link the MachineConfig removes: the node
		// removed it, and the removal stays.
		"/etc/systemd/system/multi-user.target.wants/openvswitch.service": {manifest.StateDiffers, revert.Kept, "keeps the removal"},
		// The image already lacks it: nothing changes on the node, and
		// the base's link comes back.
		"/etc/systemd/system/multi-user.target.wants/zincati.service": {manifest.StateAbsent, revert.Restored, "comes back"},
		"/etc/bdir":             {manifest.StateDiffers, revert.Reverted, "keeps the base's directory"},
		"/etc/newdir":           {manifest.StateDiffers, revert.Kept, "copies the node's whole"},
		"/etc/newdir/f":         {manifest.StateSame, revert.Kept, "copies that directory whole"},
		"/etc/recreated":        {manifest.StateSame, revert.Kept, "recreates it from the node's copy"},
		"/etc/recreated/m.conf": {manifest.StateDiffers, revert.Kept, "counts as modified"},
		"/etc/recreated/u.conf": {manifest.StateSame, revert.Removed, "unmodified default"},
		// Recreated from the node's copy, which is the image's 0700.
		"/etc/bo":             {manifest.StateDiffers, revert.Reverted, "which is the image's default and differs (mode)"},
		"/etc/bo/m.conf":      {manifest.StateDiffers, revert.Kept, "counts as modified"},
		"/etc/overdir":        {manifest.StateAbsent, revert.Reverted, "ostree refuses to finalize"},
		"/usr/share/mcbake/x": {manifest.StateSame, revert.Lost, "replaced by the base"},
	}
	got := map[string]outcome{}
	for _, e := range entries {
		w := want[e.Path]
		o := outcome{Image: e.Image.State, Outcome: e.Outcome, Reason: w.Reason}
		if !strings.Contains(e.Reason, w.Reason) {
			o.Reason = e.Reason
		}
		got[e.Path] = o
		if e.Clobbered != e.Outcome.Clobbers() {
			t.Errorf("%s: clobbered %v, outcome %s", e.Path, e.Clobbered, e.Outcome)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("PredictDerived (-want +got):\n%s", diff)
	}
}

// TestDiffDerivedReport: the report says where its owned paths come from,
// and the text names the image's state of each path.
func TestDiffDerivedReport(t *testing.T) {
	b := compareIndex(t, testbase.Options{})
	l := compareIndex(t, testbase.Options{ExtraLayers: []testbase.Layer{{Files: []testbase.File{{Path: "etc/mode.conf", Mode: 0o600, Content: []byte("x\n")}}}}})
	m := &manifest.Manifest{MachineConfigs: []manifest.MachineConfig{{Name: "99-test", Digest: sha("mc")}},
		Entries: []manifest.Entry{fileEntry("/etc/mode.conf", "x\n", 0o644, 0, 0)}}
	r, err := revert.DiffDerived(context.Background(), revert.Ownership{Manifest: m}, manifest.ImageRef{Reference: "oci:/l"}, manifest.ImageRef{Reference: "oci:/b"}, l, b)
	if err != nil {
		t.Fatalf("DiffDerived: %v", err)
	}
	if r.Owned != revert.Derived || !cmp.Equal(r.MachineConfigs, m.MachineConfigs) {
		t.Errorf("DiffDerived: owned %q from %v, want derived from %v", r.Owned, r.MachineConfigs, m.MachineConfigs)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, revert.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"the image has no mcbake manifest", "base absent, image differs [mode]"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("WriteText output lacks %q:\n%s", s, text.String())
		}
	}
	if rec, err := revert.Diff(context.Background(), m, manifest.ImageRef{}, manifest.ImageRef{}, b); err != nil || rec.Owned != revert.Recorded {
		t.Errorf("Diff: owned %q (%v), want %q", rec.Owned, err, revert.Recorded)
	}
}
