package revert_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
)

func TestNewPlan(t *testing.T) {
	ix := compareIndex(t, testbase.Options{})
	link := linkEntry("/etc/systemd/system/multi-user.target.wants/kubelet.service", "/etc/systemd/system/kubelet.service")
	dir := dirEntry("/etc/kubernetes/manifests", 0o750)
	owned := fileEntry("/etc/openvswitch/custom.conf", "x\n", 0o640, 800, 801)
	m := &manifest.Manifest{Entries: []manifest.Entry{
		fileEntry("/etc/containers/registries.conf", "mine\n", 0o644, 0, 0),
		owned, dir, link,
		fileEntry("/etc/modules-load.d/iptables.conf", "# Force-load legacy iptables so it is usable from pod network namespaces\nip_tables\n", 0o644, 0, 0),
		resolved(fileEntry("/usr/local/bin/tool", "x", 0o755, 0, 0), "/var/usrlocal/bin/tool"),
		fileEntry("/usr/lib/mcbake/x", "x", 0o644, 0, 0),
		absentEntry("/etc/systemd/system/multi-user.target.wants/openvswitch.service"),
	}}
	m.Sort()
	image, b := manifest.ImageRef{Reference: "oci:/l:latest", Digest: sha("l")}, manifest.ImageRef{Reference: "oci:/b:latest", Digest: sha("b")}
	p, err := revert.NewPlan(diff(t, m, image, b, ix))
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	entry := func(e manifest.Entry, o revert.Outcome) revert.PlanEntry {
		return revert.PlanEntry{Path: e.Path, Outcome: o, Type: e.Type, Mode: e.Mode, UID: e.UID, GID: e.GID, Size: e.Size,
			Digest: e.Digest, Target: e.Target, Source: e.Source}
	}
	want := &revert.Plan{
		SchemaVersion: revert.PlanSchemaVersion, Image: image, Base: b,
		Rewrite: []revert.PlanEntry{
			entry(fileEntry("/etc/containers/registries.conf", "mine\n", 0o644, 0, 0), revert.Reverted),
			entry(dir, revert.Removed),
			entry(owned, revert.Removed),
			entry(link, revert.Removed),
			entry(absentEntry("/etc/systemd/system/multi-user.target.wants/openvswitch.service"), revert.Restored),
		},
		Lost: []revert.PlanEntry{entry(fileEntry("/usr/lib/mcbake/x", "x", 0o644, 0, 0), revert.Lost)},
	}
	if diff := cmp.Diff(want, p); diff != "" {
		t.Errorf("NewPlan (-want +got):\n%s", diff)
	}

	b2, err := revert.MarshalPlan(p)
	if err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, "plan", b2)
	rewrite := func(v any) map[string]any { return schematest.Object(v, "rewrite", 0) }
	schematest.Invalid(t, "plan", b2, "a gid as a string", func(v any) { rewrite(v)["gid"] = "0" })
	schematest.Invalid(t, "plan", b2, "a file without a digest", func(v any) { delete(rewrite(v), "digest") })
	schematest.Invalid(t, "plan", b2, "an image without a digest", func(v any) { delete(schematest.Object(v, "image"), "digest") })
	schematest.Invalid(t, "plan", b2, "an entry that is not clobbered", func(v any) { rewrite(v)["outcome"] = "kept" })
	file := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(file, b2, 0o644); err != nil {
		t.Fatal(err)
	}
	read, err := revert.ReadPlan(file)
	if err != nil {
		t.Fatalf("ReadPlan(MarshalPlan(plan)): %v", err)
	}
	if diff := cmp.Diff(p, read); diff != "" {
		t.Errorf("ReadPlan(MarshalPlan(plan)) (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(b2), `"mode": "0750"`) || !strings.HasSuffix(string(b2), "}\n") {
		t.Errorf("MarshalPlan: want octal modes and a trailing newline:\n%s", b2)
	}
}

func TestNewPlanNeedsDigests(t *testing.T) {
	for _, r := range []*revert.Report{
		{Image: manifest.ImageRef{Reference: "l"}, Base: manifest.ImageRef{Digest: sha("b")}},
		{Image: manifest.ImageRef{Digest: sha("l")}, Base: manifest.ImageRef{Reference: "b"}},
	} {
		if _, err := revert.NewPlan(r); err == nil {
			t.Errorf("NewPlan(image %q, base %q) = nil error, want one", r.Image.Digest, r.Base.Digest)
		}
	}
}

func TestReadPlanErrors(t *testing.T) {
	const head = `{"schemaVersion": 1, "image": {"digest": "sha256:aa"}, "base": {"digest": "sha256:bb"}, `
	tests := []struct {
		name, plan, want string
	}{
		{"not JSON", `{"schemaVersion": 1,`, "decoding plan"},
		{"unknown field", head + `"rewrite": [], "extra": 1}`, "unknown field"},
		{"trailing data", head + `"rewrite": []} {}`, "trailing data"},
		{"schema version", `{"schemaVersion": 2, "image": {"digest": "sha256:aa"}, "base": {"digest": "sha256:bb"}, "rewrite": []}`, "schemaVersion 2"},
		{"no image digest", `{"schemaVersion": 1, "base": {"digest": "sha256:bb"}, "rewrite": []}`, "digests are required"},
		{"no base digest", `{"schemaVersion": 1, "image": {"digest": "sha256:aa"}, "rewrite": []}`, "digests are required"},
		{"relative path", head + `"rewrite": [{"path": "etc/x", "type": "directory", "mode": "0755"}]}`, `path "etc/x" is not absolute and clean`},
		{"dot-dot path", head + `"rewrite": [{"path": "/etc/../usr/x", "type": "directory", "mode": "0755"}]}`, "not absolute and clean"},
		{"path climbing out", head + `"rewrite": [{"path": "/..", "type": "directory", "mode": "0755"}]}`, "not absolute and clean"},
		{"unclean requested path", head + `"rewrite": [{"path": "/etc/x", "requestedPath": "/etc//x", "type": "directory", "mode": "0755"}]}`, "requestedPath"},
		{"outside /etc", head + `"rewrite": [{"path": "/usr/bin/x", "type": "file", "mode": "0755", "digest": "sha256:cc"}]}`, "only paths below /etc"},
		{"/etc itself", head + `"rewrite": [{"path": "/etc", "type": "directory", "mode": "0755"}]}`, "only paths below /etc"},
		{"under /var", head + `"rewrite": [{"path": "/var/lib/x", "type": "directory", "mode": "0755"}]}`, "only paths below /etc"},
		{"file without digest", head + `"rewrite": [{"path": "/etc/x", "type": "file", "mode": "0644"}]}`, "needs a digest"},
		{"symlink without target", head + `"rewrite": [{"path": "/etc/x", "type": "symlink", "mode": "0777"}]}`, "needs a target"},
		{"unknown type", head + `"rewrite": [{"path": "/etc/x", "type": "fifo", "mode": "0644"}]}`, `unknown type "fifo"`},
		{"bad mode", head + `"rewrite": [{"path": "/etc/x", "type": "directory", "mode": "0789"}]}`, "not octal"},
		{"lost path", head + `"rewrite": [], "lost": [{"path": "usr/x", "type": "file"}]}`, "lost[0]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			file := filepath.Join(t.TempDir(), "plan.json")
			if err := os.WriteFile(file, []byte(tt.plan), 0o644); err != nil {
				t.Fatal(err)
			}
			_, err := revert.ReadPlan(file)
			if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), file) {
				t.Errorf("ReadPlan(%s) = %v, want an error naming the file and %q", tt.plan, err, tt.want)
			}
		})
	}
}

func TestReadPlanReportsEveryProblem(t *testing.T) {
	file := filepath.Join(t.TempDir(), "plan.json")
	plan := `{"schemaVersion": 1, "rewrite": [{"path": "/usr/x", "type": "directory", "mode": "0755"}, {"path": "/etc/x", "type": "file", "mode": "0644"}]}`
	if err := os.WriteFile(file, []byte(plan), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := revert.ReadPlan(file)
	for _, want := range []string{"digests are required", "rewrite[0]: /usr/x", "rewrite[1]: /etc/x: a file needs a digest"} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ReadPlan = %v, want it to report %q", err, want)
		}
	}
}

func TestReadPlanMissing(t *testing.T) {
	if _, err := revert.ReadPlan(filepath.Join(t.TempDir(), "none.json")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("ReadPlan(missing) = %v, want fs.ErrNotExist", err)
	}
}

func TestPlanEntryMachineConfigPath(t *testing.T) {
	if got := (revert.PlanEntry{Path: "/var/usrlocal/bin/x", RequestedPath: "/usr/local/bin/x"}).MachineConfigPath(); got != "/usr/local/bin/x" {
		t.Errorf("MachineConfigPath = %s, want the requested path", got)
	}
	if got := (revert.PlanEntry{Path: "/etc/x"}).MachineConfigPath(); got != "/etc/x" {
		t.Errorf("MachineConfigPath = %s, want the path", got)
	}
}
