package manifest_test

import (
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/manifest"
)

// TestSchema: a manifest with every kind of field follows
// docs/schema/manifest.schema.json, survives Unmarshal, and the schema
// refuses a wrong type, a missing required field and a link without a
// target. The golden manifests are checked where they are rendered
// (render's TestFixtures).
func TestSchema(t *testing.T) {
	src := manifest.Source{MachineConfig: "99-worker", Field: "spec.config.storage.files[0]"}
	content := digest.FromString("content\n")
	m := &manifest.Manifest{
		MachineConfigs: []manifest.MachineConfig{{Name: "99-worker", Digest: digest.FromString("{}")}},
		Base:           &manifest.ImageRef{Reference: "oci:base:latest", Digest: digest.FromString("base")},
		Entries: []manifest.Entry{
			{Path: "/etc", Type: manifest.Directory, Mode: 0o755, Source: src, Base: &manifest.BaseState{State: manifest.StateSame}},
			{Path: "/etc/a.conf", Type: manifest.File, Mode: 0o644, Size: 8, Digest: content, Source: src,
				Base: &manifest.BaseState{State: manifest.StateDiffers, Differs: []manifest.Attr{manifest.AttrContent, manifest.AttrMode}}},
			{Path: "/etc/link", Type: manifest.Symlink, Mode: 0o777, Target: "a.conf", Source: src, Base: &manifest.BaseState{State: manifest.StateAbsent}},
			{Path: "/etc/pki/ca.crt", Type: manifest.File, Mode: 0o600, UID: 0, GID: 0, Digest: content, Source: src, Managed: manifest.ManagedByCertificateWriter},
			{Path: "/etc/systemd/system/multi-user.target.wants/a.service", Type: manifest.Absent, Source: src},
			{Path: "/var/lib/x", ResolvedPath: "/usr/lib/x", Type: manifest.Hardlink, Mode: 0o644, UID: 1000, GID: 1000, Target: "/etc/a.conf", Source: src},
		},
		Units: []manifest.Unit{{Name: "a.service", Enablement: "disabled", Source: manifest.Source{MachineConfig: "99-worker", Field: "spec.config.systemd.units[0]"}}},
		Own:   []manifest.Entry{{Path: "/usr/libexec/mcbake-node", Type: manifest.File, Mode: 0o755, Digest: content, Source: manifest.Source{Field: "mcbake revert guard"}}},
	}
	b, err := manifest.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, "manifest", b)
	if _, err := manifest.Unmarshal(b); err != nil {
		t.Errorf("Unmarshal(Marshal(m)) = %v", err)
	}
	entry := func(v any, i int) map[string]any { return schematest.Object(v, "entries", i) }
	schematest.Invalid(t, "manifest", b, "a uid as a string", func(v any) { entry(v, 1)["uid"] = "0" })
	schematest.Invalid(t, "manifest", b, "a mode as a number", func(v any) { entry(v, 1)["mode"] = 420 })
	schematest.Invalid(t, "manifest", b, "an entry without a source", func(v any) { delete(entry(v, 1), "source") })
	schematest.Invalid(t, "manifest", b, "a symlink without a target", func(v any) { delete(entry(v, 2), "target") })
	schematest.Invalid(t, "manifest", b, "no schemaVersion", func(v any) { delete(schematest.Object(v), "schemaVersion") })
	schematest.Invalid(t, "manifest", b, "an unknown field", func(v any) { entry(v, 0)["owner"] = "root" })
}
