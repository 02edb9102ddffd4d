package verify

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/image"
)

// TestWorkerFixtures: on the shared rendered worker MachineConfigs and the
// generated base, verify reports no error, before and after the build, and
// its revert-clobber finding lists exactly the paths Compare (what
// mcbake diff prints) marks clobbered.
func TestWorkerFixtures(t *testing.T) {
	e := newEnv(t)
	b, err := image.OpenBase(context.Background(), e.Base, image.BaseOptions{Images: e.Opts})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	fixtures, err := filepath.Glob("../../testdata/machineconfigs/rendered-worker-*.json")
	if err != nil || len(fixtures) == 0 {
		t.Fatalf("no worker fixtures: %v", err)
	}
	for _, fx := range fixtures {
		t.Run(filepath.Base(fx), func(t *testing.T) {
			img, res := e.buildResult(e.Base, filepath.Base(fx)+"-image", fx)
			want := clobbered(t, res.Manifest, b)
			if len(want) == 0 {
				t.Fatal("the fixture clobbers nothing: the test would prove nothing")
			}
			for _, o := range []Options{
				{MachineConfigs: []string{fx}, Base: e.Base},
				{MachineConfigs: []string{fx}, Base: e.Base, Image: img},
			} {
				r := e.run(o)
				if r.Summary.Errors > 0 || r.Failed {
					t.Errorf("image %q: %d errors: %v", o.Image, r.Summary.Errors, r.Findings)
				}
				if len(r.NotRun) > 0 && o.Image != "" {
					t.Errorf("rules not run with --base and --image: %v", r.NotRun)
				}
				rc := r.ByRule(RuleRevertClobber)
				if len(rc) != 1 {
					t.Fatalf("image %q: %d revert-clobber findings, want 1", o.Image, len(rc))
				}
				if diff := cmp.Diff(want, rc[0].Paths); diff != "" {
					t.Errorf("image %q: revert-clobber paths (-Compare +verify):\n%s", o.Image, diff)
				}
			}
		})
	}
}

// clobbered lists the paths the diff of a manifest against a base marks
// clobbered.
func clobbered(t *testing.T, m *manifest.Manifest, b *image.Base) []string {
	t.Helper()
	r, err := revert.Diff(context.Background(), m, manifest.ImageRef{}, manifest.ImageRef{}, b.Tree())
	if err != nil {
		t.Fatalf("revert.Diff: %v", err)
	}
	return r.Clobbered()
}
