package verify

import (
	"archive/tar"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/testbase"
)

// TestBaseSpecificRules covers base rules that need a base other than the
// default: a unit's drop-in directory that is a file in the base, and a
// base without the core user for core's SSH keys.
func TestBaseSpecificRules(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		name   string
		layer  testbase.Layer
		config string
		rule   string
		want   []string
	}{
		{"drop-in directory is a file", testbase.Layer{Files: []testbase.File{{Path: "etc/systemd/system/x.service.d", Type: tar.TypeReg, Mode: 0o644, Content: []byte("x")}}},
			`{"systemd": {"units": [{"name": "x.service", "dropins": [{"name": "a.conf", "contents": "[Unit]\n"}]}]}}`,
			RuleFileDirClash, []string{"mc spec.config.systemd.units[x.service].dropins[a.conf] /etc/systemd/system/x.service.d/a.conf"}},
		{"mask where the base has a directory", testbase.Layer{Files: []testbase.File{{Path: "etc/systemd/system/y.service", Type: tar.TypeDir, Mode: 0o755}}},
			`{"systemd": {"units": [{"name": "y.service", "mask": true}]}}`,
			RuleFileDirClash, []string{"mc spec.config.systemd.units[y.service].mask /etc/systemd/system/y.service"}},
		{"no core user", testbase.Layer{Whiteouts: []string{"usr/lib/passwd"}},
			`{"passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA test"]}]}, "storage": {"files": [` + file("/etc/x", "x") + `]}}`,
			RuleUnknownOwner, []string{"mc spec.config.passwd.users[0].sshAuthorizedKeys[0] /home/core/.ssh/authorized_keys.d/ignition"}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			baseRef := e.WriteBase("base-"+string(rune('a'+i)), tt.layer)
			r := e.run(Options{MachineConfigs: []string{writeMC(t, t.TempDir(), "mc", tt.config)}, Base: baseRef})
			if diff := cmp.Diff(tt.want, fieldsOf(r.ByRule(tt.rule))); diff != "" {
				t.Errorf("%s findings (-want +got):\n%s\nall: %v", tt.rule, diff, r.Findings)
			}
			if got := r.ByRule(RuleRenderFailure); len(got) > 0 {
				t.Errorf("the item with the finding was rendered anyway: %v", got)
			}
			if got := r.ByRule(RuleRevertClobber); tt.rule == RuleUnknownOwner && len(got) != 1 {
				t.Errorf("revert analysis did not run after leaving the SSH keys out: %v", r.Findings)
			}
		})
	}
}
