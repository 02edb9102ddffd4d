package verify

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// file is a storage file with plain content.
func file(path, content string) string {
	return `{"path": "` + path + `", "mode": 420, "contents": {"source": "data:,` + content + `"}}`
}

// TestRulesFire crafts, for every MachineConfig and base rule, an input
// that fires it and a near miss that must not, and checks the findings of
// that rule exactly (MachineConfig, field, path). Image rules are tested
// in image_test.go.
func TestRulesFire(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name string
		rule string
		// configs are spec.config JSON of MachineConfigs named mc-0, mc-1…
		configs []string
		base    bool
		want    []string
	}{
		{"refused content", RuleUnsupportedIgnition, []string{`{
			"storage": {"files": [
				{"path": "/etc/a.conf", "append": [{"source": "data:,x"}]},
				{"path": "/etc/b.conf", "contents": {"source": "https://example.com/b"}},
				{"path": "/etc/c.conf", "mode": 2541, "contents": {"source": "data:,x"}}],
				"disks": [{"device": "/dev/vdb"}]},
			"passwd": {"users": [{"name": "alice"}], "groups": [{"name": "ops"}]}}`,
			`{"storage": {"files": [{"path": "/etc/d.conf", "contents": {"source": "data:,x", "compression": "bzip2"}}]}}`},
			false, []string{
				"mc-0 spec.config.passwd.groups[0] ",
				"mc-0 spec.config.passwd.users[0].name ",
				"mc-0 spec.config.storage.files[0].append /etc/a.conf",
				"mc-0 spec.config.storage.files[1].contents.source /etc/b.conf",
				"mc-0 spec.config.storage.files[2].mode /etc/c.conf",
				"mc-1 spec.config.storage.files[0].contents.compression ",
			}},
		{"content that does not decode", RuleUnsupportedIgnition, []string{`{"storage": {"files": [
				{"path": "/etc/a.conf", "contents": {"source": "data:,x", "compression": "gzip"}},
				{"path": "/etc/b.conf", "contents": {"source": "data:,x", "verification": {"hash": "sha256-0000000000000000000000000000000000000000000000000000000000000000"}}}]}}`},
			false, []string{"mc-0 spec.config.storage.files[0].contents /etc/a.conf", "mc-0 spec.config.storage.files[1].contents /etc/b.conf"}},
		// The MCO's merge sets overwrite: true on a file without it, and
		// Ignition refuses that with no source.
		{"file without source or overwrite", RuleUnsupportedIgnition, []string{`{"storage": {"files": [
				{"path": "/etc/a.conf", "mode": 420},
				{"path": "/etc/b.conf", "overwrite": false}]}}`},
			false, []string{"mc-0 spec.config.storage.files[0].overwrite /etc/a.conf"}},
		{"refusal-free content", RuleUnsupportedIgnition, []string{`{"storage": {"files": [` + file("/etc/a.conf", "x") + `]}}`}, true, nil},
		{"conflict", RuleConflict, []string{
			`{"storage": {"files": [` + file("/etc/a.conf", "one") + `]}, "systemd": {"units": [{"name": "a.service", "contents": "[Service]\nExecStart=/bin/true\n"}]}}`,
			`{"storage": {"files": [` + file("/etc/a.conf", "two") + `]}, "systemd": {"units": [{"name": "a.service", "contents": "[Service]\nExecStart=/bin/false\n"}]}}`},
			false, []string{"mc-1 spec.config.storage.files[0] /etc/a.conf", "mc-1 spec.config.systemd.units[a.service] /etc/systemd/system/a.service"}},
		{"identical definitions", RuleConflict, []string{
			`{"storage": {"files": [` + file("/etc/a.conf", "one") + `]}}`,
			`{"storage": {"files": [` + file("/etc/a.conf", "one") + `]}}`}, false, nil},
		{"usr", RuleUsrContent, []string{`{"storage": {
			"files": [` + file("/usr/lib/x.conf", "x") + `, ` + file("/boot/x", "x") + `, ` + file("/usr/local/bin/x", "x") + `],
			"directories": [{"path": "/usr/share/x"}]}}`},
			true, []string{"mc-0 spec.config.storage.directories[0] /usr/share/x", "mc-0 spec.config.storage.files[0] /usr/lib/x.conf", "mc-0 spec.config.storage.files[1] /boot/x"}},
		{"usr without base", RuleUsrContent, []string{`{"storage": {"files": [` + file("/usr/lib/x.conf", "x") + `, ` + file("/opt/x", "x") + `]}}`},
			false, []string{"mc-0 spec.config.storage.files[0] /usr/lib/x.conf"}},
		{"var", RuleVarContent, []string{`{"storage": {
			"files": [` + file("/var/lib/x", "x") + `, ` + file("/usr/local/bin/x", "x") + `, ` + file("/etc/x", "x") + `],
			"links": [{"path": "/opt/l", "target": "/etc/x"}],
			"directories": [{"path": "/home/core/d"}]},
			"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA test"]}]}}`},
			true, []string{"mc-0 spec.config.storage.directories[0] /home/core/d", "mc-0 spec.config.storage.files[0] /var/lib/x",
				"mc-0 spec.config.storage.files[1] /usr/local/bin/x", "mc-0 spec.config.storage.links[0] /opt/l"}},
		{"var without base", RuleVarContent, []string{`{"storage": {"files": [` + file("/usr/local/bin/x", "x") + `, ` + file("/etc/x", "x") + `]}}`},
			false, []string{"mc-0 spec.config.storage.files[0] /usr/local/bin/x"}},
		{"dropped", RuleDroppedContent, []string{`{"storage": {"files": [` + file("/run/x", "x") + `, ` + file("/tmp/x", "x") + `, ` + file("/var/tmp/x", "x") + `],
			"directories": [{"path": "/dev/x"}]}}`},
			true, []string{"mc-0 spec.config.storage.directories[0] /dev/x", "mc-0 spec.config.storage.files[0] /run/x", "mc-0 spec.config.storage.files[1] /tmp/x"}},
		{"file and directory", RuleFileDirClash, []string{`{"storage": {
			"files": [` + file("/etc/kubernetes", "x") + `, ` + file("/etc/chrony.conf/x", "x") + `, ` + file("/etc/sudoers.d/new", "x") + `],
			"directories": [{"path": "/etc/ssh/sshd_config"}, {"path": "/etc/crio"}, {"path": "/home"}],
			"links": [{"path": "/etc/systemd/system/getty.target.wants", "target": "/dev/null"}]}}`},
			true, []string{
				"mc-0 spec.config.storage.directories[0] /etc/ssh/sshd_config",
				"mc-0 spec.config.storage.files[0] /etc/kubernetes",
				"mc-0 spec.config.storage.files[1] /etc/chrony.conf/x",
				"mc-0 spec.config.storage.links[0] /etc/systemd/system/getty.target.wants",
			}},
		{"unit files where the base has none", RuleFileDirClash, []string{`{"systemd": {"units": [{"name": "x.service", "contents": "[Unit]\n", "dropins": [{"name": "a.conf", "contents": "[Unit]\n"}]}]}}`}, true, nil},
		{"clobbered", RuleRevertClobber, []string{`{"storage": {"files": [` + file("/etc/new.conf", "x") + `, ` + file("/etc/modules-load.d/iptables.conf", "ip_tables%0A") + `]}}`},
			true, []string{"mc-0  "}},
		{"unit without a unit file", RuleUnitNotFound, []string{`{"systemd": {"units": [
			{"name": "nope.service", "dropins": [{"name": "a.conf", "contents": "[Unit]\n"}]},
			{"name": "nada.service", "enabled": true},
			{"name": "crio.service", "dropins": [{"name": "a.conf", "contents": "[Unit]\n"}]},
			{"name": "getty@tty5.service", "enabled": true},
			{"name": "mine@x.service", "enabled": true}, {"name": "mine@.service", "contents": "[Install]\nWantedBy=multi-user.target\n"},
			{"name": "gone.service", "enabled": false}]}}`},
			true, []string{"mc-0 spec.config.systemd.units[nope.service] /etc/systemd/system/nope.service", "mc-0 spec.config.systemd.units[nada.service] /etc/systemd/system/nada.service",
				// Instances without contents: the MCD's listing does not
				// have them, so it skips their enablement.
				"mc-0 spec.config.systemd.units[getty@tty5.service].enabled /etc/systemd/system/getty@tty5.service",
				"mc-0 spec.config.systemd.units[mine@x.service].enabled /etc/systemd/system/mine@x.service"}},
		{"owners", RuleUnknownOwner, []string{`{"storage": {
			"files": [{"path": "/etc/a", "user": {"name": "nobody-here"}, "group": {"name": "core"}, "contents": {"source": "data:,x"}},
				{"path": "/etc/b", "user": {"id": 4242}, "contents": {"source": "data:,x"}}],
			"directories": [{"path": "/etc/d", "group": {"name": "nogroup-here"}}],
			"links": [{"path": "/etc/l", "target": "a", "user": {"name": "chrony"}, "group": {"name": "chrony"}}]}}`},
			true, []string{"mc-0 spec.config.storage.directories[0].group.name /etc/d", "mc-0 spec.config.storage.files[0].user.name /etc/a"}},
		{"enabled without [Install]", RuleEnabledNoInstall, []string{`{"systemd": {"units": [
			{"name": "a.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n"},
			{"name": "b.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[Install]\n"},
			{"name": "c.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
			{"name": "e.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n", "dropins": [{"name": "i.conf", "contents": "[Install]\nWantedBy=multi-user.target\n"}]},
			{"name": "rpm-ostreed.service", "enabled": true},
			{"name": "chronyd.service", "enabled": true},
			{"name": "d.service", "enabled": false, "contents": "[Service]\n"}]}}`},
			true, []string{"mc-0 spec.config.systemd.units[a.service].enabled /etc/systemd/system/a.service",
				"mc-0 spec.config.systemd.units[b.service].enabled /etc/systemd/system/b.service",
				"mc-0 spec.config.systemd.units[rpm-ostreed.service].enabled /etc/systemd/system/rpm-ostreed.service"}},
		{"enabled without [Install], no base", RuleEnabledNoInstall, []string{`{"systemd": {"units": [
			{"name": "a.service", "enabled": true, "contents": "[Service]\n"}, {"name": "rpm-ostreed.service", "enabled": true}]}}`},
			false, []string{"mc-0 spec.config.systemd.units[a.service].enabled /etc/systemd/system/a.service"}},
		{"render failure", RuleRenderFailure, []string{
			`{"storage": {"files": [` + file("/etc/x", "x") + `, ` + file("/etc/p", "x") + `, ` + file("/etc/p/child", "x") + `]}}`,
			`{"storage": {"links": [{"path": "/etc/x", "target": "y"}]}}`},
			true, []string{"mc-0 spec.config.storage.files[2] /etc/p/child", "mc-1 spec.config.storage.links[0].path /etc/x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			o := Options{}
			for i, cfg := range tt.configs {
				o.MachineConfigs = append(o.MachineConfigs, writeMC(t, dir, "mc-"+string(rune('0'+i)), cfg))
			}
			if tt.base {
				o.Base = e.Base
			}
			r := e.run(o)
			got := r.ByRule(tt.rule)
			if diff := cmp.Diff(tt.want, fieldsOf(got)); diff != "" {
				t.Errorf("%s findings (-want +got):\n%s\nall findings: %v", tt.rule, diff, r.Findings)
			}
			for _, f := range got {
				if f.Line == 0 && f.Field != "" {
					t.Errorf("finding %s %s has no line", f.Rule, f.Field)
				}
				if f.File == "" {
					t.Errorf("finding %s %s has no file", f.Rule, f.Field)
				}
			}
		})
	}
}
