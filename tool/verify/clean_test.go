package verify

import (
	"archive/tar"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// cleanConfig exercises most of what the rules look at without breaking
// any: files (one owned by core by name), a directory, a link, a unit
// with an [Install] section enabled, a drop-in for a unit the base ships,
// a base unit enabled, a base unit disabled, and core's SSH keys.
const cleanConfig = `{
  "storage": {
    "files": [
      {"path": "/etc/mcbake-clean/app.conf", "mode": 420, "contents": {"source": "data:,clean%0A"}},
      {"path": "/etc/mcbake-clean/core.conf", "mode": 384, "user": {"name": "core"}, "group": {"name": "core"}, "contents": {"source": "data:,core%0A"}}
    ],
    "directories": [{"path": "/etc/mcbake-clean/d", "mode": 493}],
    "links": [{"path": "/etc/mcbake-clean/link", "target": "app.conf"}]
  },
  "systemd": {"units": [
    {"name": "clean.service", "enabled": true, "contents": "[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
    {"name": "crio.service", "dropins": [{"name": "10-clean.conf", "contents": "[Service]\nEnvironment=CLEAN=1\n"}]},
    {"name": "chronyd.service", "enabled": true},
    {"name": "openvswitch.service", "enabled": false}
  ]},
  "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAAC3NzaC1lZDI1NTE5AAAAIClean clean@example.com"]}]}
}`

// baseHaving returns a testbase layer that gives the base exactly what
// rendered entries want, so that a revert to it clobbers nothing.
func baseHaving(entries []render.Entry) testbase.Layer {
	var l testbase.Layer
	for _, e := range entries {
		p := strings.TrimPrefix(e.Where(), "/")
		switch e.Type {
		case manifest.File:
			l.Files = append(l.Files, testbase.File{Path: p, Type: tar.TypeReg, Mode: int64(e.Mode), UID: e.UID, GID: e.GID, Content: e.Content})
		case manifest.Directory:
			l.Files = append(l.Files, testbase.File{Path: p, Type: tar.TypeDir, Mode: int64(e.Mode), UID: e.UID, GID: e.GID})
		case manifest.Symlink:
			l.Files = append(l.Files, testbase.File{Path: p, Type: tar.TypeSymlink, Mode: 0o777, UID: e.UID, GID: e.GID, Target: e.Target})
		case manifest.Absent:
			l.Whiteouts = append(l.Whiteouts, p)
		}
	}
	return l
}

// TestCleanInputIsSilent: a MachineConfig that breaks no rule, a base that
// already has what it wants (so a revert clobbers nothing), and the image
// built from both: every rule runs and none finds anything.
func TestCleanInputIsSilent(t *testing.T) {
	e := newEnv(t)
	mc := e.MC("50-clean", cleanConfig)
	cleanBase := e.WriteBase("clean-base", baseHaving(e.prepare(e.Base, mc).Rendered.Entries))
	img := e.build(cleanBase, "clean-image", mc)
	r := e.run(Options{MachineConfigs: []string{mc}, Base: cleanBase, Image: img, FailOn: FailOnInfo})
	if len(r.Findings) > 0 || len(r.NotRun) > 0 || r.Failed {
		t.Errorf("clean input: findings %v, not run %v, failed %v", r.Findings, r.NotRun, r.Failed)
	}
	// On the default base the same MachineConfig is clean except for what
	// a revert to that base clobbers.
	r = e.run(Options{MachineConfigs: []string{mc}, Base: e.Base})
	for _, f := range r.Findings {
		if f.Rule != RuleRevertClobber {
			t.Errorf("clean MachineConfig on the default base: %v", f)
		}
	}
}
