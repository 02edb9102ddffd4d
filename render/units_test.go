package render

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/manifest"
)

// unitJSON returns a unit object; enabled is "true", "false" or "" (unset).
func unitJSON(name, enabled, contents string) string {
	u := map[string]any{"name": name}
	switch enabled {
	case "true":
		u["enabled"] = true
	case "false":
		u["enabled"] = false
	}
	if contents != "" {
		u["contents"] = contents
	}
	b, err := json.Marshal(u)
	if err != nil {
		panic(err)
	}
	return string(b)
}

func unitsDoc(name string, units ...string) string {
	list := ""
	for i, u := range units {
		if i > 0 {
			list += ","
		}
		list += u
	}
	return mcDoc(name, `"systemd":{"units":[`+list+`]}`)
}

func link(p, target string, s manifest.Source) manifest.Entry {
	return manifest.Entry{Path: p, Type: manifest.Symlink, Mode: 0o777, Target: target, Source: s}
}

func unitState(name, state, field string) manifest.Unit {
	return manifest.Unit{Name: name, Enablement: state, Source: src("00-u", field)}
}

// TestRenderUnitsNoRoot renders units without a root: every unit file the
// enablement needs is in the MachineConfig, and unset enablement is left to
// `systemctl preset` on the node.
func TestRenderUnitsNoRoot(t *testing.T) {
	const dropin = "[Service]\nEnvironment=A=1\n"
	const aUnit = "[Unit]\nDescription=a\n[Service]\nExecStart=/bin/true\n[Install]\n" +
		"WantedBy=multi-user.target default.target\nRequiredBy=foo.target\nAlias=a-alias.service\nAlso=also.service\n"
	doc := unitsDoc("00-u",
		unitJSON("a.service", "true", aUnit),
		unitJSON("also.service", "", "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=sockets.target\n"),
		`{"name":"m.service","mask":true,"contents":"[Service]\nExecStart=/bin/false\n"}`,
		`{"name":"crio.service","dropins":[{"name":"10-x.conf","contents":"[Service]\nEnvironment=A=1\n"}]}`,
		unitJSON("t@.service", "true", installMulti+"DefaultInstance=def\n"),
		unitJSON("i@.service", "", installMulti),
		// No file by its name: the MCD skips the enable (OCPBUGS-70259).
		unitJSON("i@inst.service", "true", ""),
		unitJSON("off.service", "false", installMulti),
		// No unit file anywhere: the MCD skips it too.
		unitJSON("ghost.service", "true", ""),
	)
	res, err := renderDocs(t, nil, doc)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	const sys = "/etc/systemd/system/"
	aEnabled := src("00-u", "spec.config.systemd.units[a.service].enabled")
	want := map[string]manifest.Entry{
		sys + "a.service": {Path: sys + "a.service", Type: manifest.File, Mode: 0o644, Size: int64(len(aUnit)), Digest: sha(aUnit),
			Source: src("00-u", "spec.config.systemd.units[a.service].contents")},
		sys + "multi-user.target.wants/a.service": link(sys+"multi-user.target.wants/a.service", sys+"a.service", aEnabled),
		sys + "default.target.wants/a.service":    link(sys+"default.target.wants/a.service", sys+"a.service", aEnabled),
		sys + "foo.target.requires/a.service":     link(sys+"foo.target.requires/a.service", sys+"a.service", aEnabled),
		sys + "a-alias.service":                   link(sys+"a-alias.service", sys+"a.service", aEnabled),
		sys + "sockets.target.wants/also.service": link(sys+"sockets.target.wants/also.service", sys+"also.service", aEnabled),
		sys + "m.service":                         link(sys+"m.service", "/dev/null", src("00-u", "spec.config.systemd.units[m.service].mask")),
		sys + "crio.service.d/10-x.conf": {Path: sys + "crio.service.d/10-x.conf", Type: manifest.File, Mode: 0o644, Size: int64(len(dropin)),
			Digest: sha(dropin), Source: src("00-u", "spec.config.systemd.units[crio.service].dropins[10-x.conf]")},
		sys + "multi-user.target.wants/t@def.service": link(sys+"multi-user.target.wants/t@def.service", sys+"t@.service",
			src("00-u", "spec.config.systemd.units[t@.service].enabled")),
		sys + "multi-user.target.wants": {Path: sys + "multi-user.target.wants", Type: manifest.Directory, Mode: 0o755, Source: aEnabled},
	}
	if diff := cmp.Diff(want, pick(res, keys(want)...)); diff != "" {
		t.Errorf("Render() entries mismatch (-want +got):\n%s", diff)
	}
	missing := []string{
		sys + "crio.service", sys + "i@inst.service", sys + "ghost.service", sys + "multi-user.target.wants/i@inst.service",
		sys + "multi-user.target.wants/off.service",
		sys + "multi-user.target.wants/i@.service", sys + "multi-user.target.wants/also.service",
	}
	if got := present(res, missing...); got != nil {
		t.Errorf("Render() has entries for %q, want none", got)
	}
	wantUnits := []manifest.Unit{
		unitState("a.service", "enabled", "spec.config.systemd.units[a.service].enabled"),
		unitState("also.service", "preset", "spec.config.systemd.units[also.service].enabled"),
		unitState("crio.service", "preset", "spec.config.systemd.units[crio.service].enabled"),
		unitState("ghost.service", "enabled", "spec.config.systemd.units[ghost.service].enabled"),
		unitState("i@.service", "preset", "spec.config.systemd.units[i@.service].enabled"),
		unitState("i@inst.service", "enabled", "spec.config.systemd.units[i@inst.service].enabled"),
		unitState("m.service", "masked", "spec.config.systemd.units[m.service].mask"),
		unitState("off.service", "disabled", "spec.config.systemd.units[off.service].enabled"),
		unitState("t@.service", "enabled", "spec.config.systemd.units[t@.service].enabled"),
	}
	man := res.Manifest(nil)
	if diff := cmp.Diff(wantUnits, man.Units); diff != "" {
		t.Errorf("Result.Manifest().Units mismatch (-want +got):\n%s", diff)
	}
}

// TestRenderUnitsRoot renders units against a root with its own unit
// files, enablement links and presets.
func TestRenderUnitsRoot(t *testing.T) {
	doc := unitsDoc("00-u",
		unitJSON("rootonly.service", "true", ""),
		unitJSON("rootenabled.service", "false", ""),
		unitJSON("p-on.service", "", installMulti),
		unitJSON("p-off.service", "", installMulti),
		unitJSON("p-masked.service", "", installMulti),
		unitJSON("q.service", "", installMulti),
	)
	res, err := renderDocs(t, makeRoot(t, rhcosSpec()), doc)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	const wants = "/etc/systemd/system/multi-user.target.wants/"
	disabled := src("00-u", "spec.config.systemd.units[rootenabled.service].enabled")
	want := map[string]manifest.Entry{
		wants + "rootonly.service": link(wants+"rootonly.service", "/usr/lib/systemd/system/rootonly.service",
			src("00-u", "spec.config.systemd.units[rootonly.service].enabled")),
		wants + "rootenabled.service":          {Path: wants + "rootenabled.service", Type: manifest.Absent, Source: disabled},
		"/etc/systemd/system/re-alias.service": {Path: "/etc/systemd/system/re-alias.service", Type: manifest.Absent, Source: disabled},
		wants + "p-on.service":                 link(wants+"p-on.service", "/etc/systemd/system/p-on.service", src("00-u", "spec.config.systemd.units[p-on.service].enabled")),
		wants + "q.service":                    link(wants+"q.service", "/etc/systemd/system/q.service", src("00-u", "spec.config.systemd.units[q.service].enabled")),
	}
	if diff := cmp.Diff(want, pick(res, keys(want)...)); diff != "" {
		t.Errorf("Render() entries mismatch (-want +got):\n%s", diff)
	}
	missing := []string{wants + "p-off.service", wants + "p-masked.service", "/etc/systemd/system/multi-user.target.wants", "/etc/systemd/system/rootonly.service"}
	if got := present(res, missing...); got != nil {
		t.Errorf("Render() has entries for %q, want none", got)
	}
	wantUnits := []manifest.Unit{
		unitState("p-masked.service", "disabled", "spec.config.systemd.units[p-masked.service].enabled"),
		unitState("p-off.service", "disabled", "spec.config.systemd.units[p-off.service].enabled"),
		unitState("p-on.service", "enabled", "spec.config.systemd.units[p-on.service].enabled"),
		unitState("q.service", "enabled", "spec.config.systemd.units[q.service].enabled"),
		unitState("rootenabled.service", "disabled", "spec.config.systemd.units[rootenabled.service].enabled"),
		unitState("rootonly.service", "enabled", "spec.config.systemd.units[rootonly.service].enabled"),
	}
	if diff := cmp.Diff(wantUnits, res.Manifest(nil).Units); diff != "" {
		t.Errorf("Result.Manifest().Units mismatch (-want +got):\n%s", diff)
	}
}

func TestTemplateOf(t *testing.T) {
	tests := []struct {
		name, tmpl, inst string
		ok               bool
	}{
		{"foo@.service", "foo@.service", "", true},
		{"foo@bar.service", "foo@.service", "bar", true},
		{"foo@bar.baz.timer", "foo@.timer", "bar.baz", true},
		{"foo.service", "", "", false},
		{"foo@", "", "", false},
	}
	for _, tt := range tests {
		tmpl, inst, ok := templateOf(tt.name)
		if tmpl != tt.tmpl || inst != tt.inst || ok != tt.ok {
			t.Errorf("templateOf(%q) = %q, %q, %v, want %q, %q, %v", tt.name, tmpl, inst, ok, tt.tmpl, tt.inst, tt.ok)
		}
	}
}

// TestEnableRefusesToReplaceAMask: crio.service's Alias=cri-o.service would
// replace the MachineConfig's mask of cri-o.service; systemctl enable
// refuses, and so does the renderer, naming the unit's enabled field.
func TestEnableRefusesToReplaceAMask(t *testing.T) {
	root := makeRoot(t, map[string]string{
		"usr/lib/systemd/system/crio.service": "[Service]\nExecStart=/usr/bin/crio\n[Install]\nWantedBy=multi-user.target\nAlias=cri-o.service\n",
	})
	_, err := renderDocs(t, root, mcDoc("99-mask-alias", `"systemd":{"units":[{"name":"crio.service","enabled":true},{"name":"cri-o.service","mask":true}]}`))
	want := `mc0.yaml: 99-mask-alias: spec.config.systemd.units[crio.service].enabled: systemctl enable crio.service: ` +
		`failed to enable unit, file "/etc/systemd/system/cri-o.service" already exists and is a symlink to "/dev/null"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Render = %v, want an error containing %q", err, want)
	}
}

// TestEmptyContentsAreNotWritten: the MCD skips drop-ins and unit files
// whose contents are empty (and deletes such a drop-in when it exists), so
// the rendering must too; an empty unit keeps the root's unit file for
// enablement. A masked unit with enabled: false keeps its links:
// systemctl disable skips a masked unit.
func TestEmptyContentsAreNotWritten(t *testing.T) {
	root := makeRoot(t, map[string]string{
		"usr/lib/systemd/system/crio.service":                    "[Service]\nExecStart=/usr/bin/crio\n[Install]\nWantedBy=multi-user.target\n",
		"usr/lib/systemd/system/foo.service":                     "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
		"etc/systemd/system/crio.service.d/10-old.conf":          "[Service]\nEnvironment=OLD=1\n",
		"etc/systemd/system/multi-user.target.wants/foo.service": "-> /usr/lib/systemd/system/foo.service",
	})
	res, err := renderDocs(t, root, mcDoc("99-empty", `"systemd":{"units":[`+
		`{"name":"crio.service","enabled":true,"contents":"","dropins":[{"name":"10-old.conf","contents":""},{"name":"20-none.conf"},{"name":"30-new.conf","contents":"[Service]\n"}]},`+
		`{"name":"foo.service","mask":true,"enabled":false}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]manifest.Type{}
	for _, e := range res.Entries {
		got[e.Path] = e.Type
	}
	want := map[string]manifest.Type{
		"/etc/systemd/system/crio.service.d/10-old.conf":           manifest.Absent,
		"/etc/systemd/system/crio.service.d/30-new.conf":           manifest.File,
		"/etc/systemd/system/multi-user.target.wants/crio.service": manifest.Symlink,
		"/etc/systemd/system/foo.service":                          manifest.Symlink,
	}
	for p, typ := range want {
		if got[p] != typ {
			t.Errorf("entry %s = %q, want %q", p, got[p], typ)
		}
	}
	for _, p := range []string{"/etc/systemd/system/crio.service", "/etc/systemd/system/crio.service.d/20-none.conf",
		"/etc/systemd/system/multi-user.target.wants/foo.service"} {
		if _, ok := got[p]; ok {
			t.Errorf("entry %s rendered; the MCD does not write empty contents", p)
		}
	}
	if e := pick(res, "/etc/systemd/system/multi-user.target.wants/crio.service")["/etc/systemd/system/multi-user.target.wants/crio.service"]; e.Target != "/usr/lib/systemd/system/crio.service" {
		t.Errorf("crio.service enablement target = %q, want the root's unit file", e.Target)
	}
}

// TestForceFileThroughVarRun: /var/run/machine-config-daemon-force lands
// on the force file on RHCOS (var/run -> ../run) and is refused there.
func TestForceFileThroughVarRun(t *testing.T) {
	root := makeRoot(t, map[string]string{"var/run": "-> ../run", "run/": ""})
	_, err := renderDocs(t, root, mcDoc("99-force", `"storage":{"files":[{"path":"/var/run/machine-config-daemon-force","contents":{"source":"data:,"}}]}`))
	if err == nil || !strings.Contains(err.Error(), "lands at /run/machine-config-daemon-force") {
		t.Fatalf("Render = %v, want the force-file refusal", err)
	}
}

// TestPresetWithoutPresetFiles: with a root that has no preset files,
// systemctl preset enables (systemd.preset(5)); with no root at all the
// decision is left as "preset".
func TestPresetWithoutPresetFiles(t *testing.T) {
	doc := mcDoc("99-p", `"systemd":{"units":[{"name":"p.service","contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}`)
	res, err := renderDocs(t, makeRoot(t, map[string]string{"etc/": ""}), doc)
	if err != nil {
		t.Fatal(err)
	}
	link := "/etc/systemd/system/multi-user.target.wants/p.service"
	if got := present(res, link); len(got) != 1 || res.Units[0].Enablement != Enabled {
		t.Errorf("with a root and no presets: links %v, enablement %q; want %s and enabled", got, res.Units[0].Enablement, link)
	}
	res, err = renderDocs(t, nil, doc)
	if err != nil {
		t.Fatal(err)
	}
	if got := present(res, link); len(got) != 0 || res.Units[0].Enablement != Preset {
		t.Errorf("without a root: links %v, enablement %q; want none and preset", got, res.Units[0].Enablement)
	}
}

// TestRewrittenUnitIsDisabledFirst: the MCD disables an enabled unit before
// rewriting its file (OCPBUGS-33694), so links only the old [Install] made
// are removed and the new contents' links are created.
func TestRewrittenUnitIsDisabledFirst(t *testing.T) {
	root := makeRoot(t, map[string]string{
		"usr/lib/systemd/system/foo.service":                     "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
		"etc/systemd/system/multi-user.target.wants/foo.service": "-> /usr/lib/systemd/system/foo.service",
	})
	res, err := renderDocs(t, root, mcDoc("99-rewrite", `"systemd":{"units":[{"name":"foo.service","enabled":true,`+
		`"contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=basic.target\n"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := pick(res, "/etc/systemd/system/multi-user.target.wants/foo.service", "/etc/systemd/system/basic.target.wants/foo.service")
	if e := got["/etc/systemd/system/multi-user.target.wants/foo.service"]; e.Type != manifest.Absent {
		t.Errorf("old link = %+v, want absent", e)
	}
	if e := got["/etc/systemd/system/basic.target.wants/foo.service"]; e.Type != manifest.Symlink || e.Target != "/etc/systemd/system/foo.service" {
		t.Errorf("new link = %+v, want a symlink to /etc/systemd/system/foo.service", e)
	}
}

// TestUnitWriteFailureNamesThePath: when the MCD's write of a unit fails
// in the root (here a symlink loop where /etc/systemd/system should be),
// the error names the path it wrote, not only the field.
func TestUnitWriteFailureNamesThePath(t *testing.T) {
	root := makeRoot(t, map[string]string{"etc/systemd/system": "-> system"})
	_, err := renderDocs(t, root, mcDoc("99-u", `"systemd":{"units":[{"name":"a.service","contents":"[Unit]\n"}]}`))
	want := "mc0.yaml: 99-u: spec.config.systemd.units[a.service].contents: writing /etc/systemd/system/a.service: too many levels of symbolic links"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("Render = %v, want an error containing %q", err, want)
	}
}
