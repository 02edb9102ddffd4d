package verify

import (
	"context"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/internal/testing/builtbyothers"
)

func TestRunImageBuiltByOthers(t *testing.T) {
	e := newEnv(t)
	mc := e.MC("50-a", builtbyothers.Config)
	others := e.WriteBase("others", builtbyothers.Layer())
	r := e.run(Options{MachineConfigs: []string{mc}, Base: e.Base, Image: others})
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
	guarded := "oci:" + filepath.Join(e.Dir, "others-guarded") + ":latest"
	if _, err := build.Image(context.Background(), build.ImageOptions{Output: guarded, Options: build.Options{Base: others, Images: e.Opts, Guard: testGuard}}); err != nil {
		t.Fatalf("adding the guard: %v", err)
	}
	rg := e.run(Options{MachineConfigs: []string{mc}, Base: e.Base, Image: guarded})
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
	for p, o := range builtbyothers.Outcomes() {
		if o.Clobbers() {
			wantPaths = append(wantPaths, p)
		}
	}
	slices.Sort(wantPaths)
	if diff := cmp.Diff(wantPaths, paths); diff != "" {
		t.Errorf("%s paths (-want +got):\n%s", RuleRevertClobber, diff)
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
