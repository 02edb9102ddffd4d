package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/ignitiontest"
)

// appliedConfig is what the image built by ignition-apply bakes: files
// (one owned by id), a directory, a link, a unit with contents and an
// [Install], a drop-in for a base unit, and a base unit disabled.
const appliedConfig = `{
  "storage": {
    "files": [
      {"path": "/etc/mcbake/a.conf", "mode": 420, "contents": {"source": "data:,a%0A"}},
      {"path": "/etc/mcbake/owned.conf", "mode": 384, "user": {"id": 1000}, "group": {"id": 1000}, "contents": {"source": "data:,owned%0A"}}
    ],
    "directories": [{"path": "/etc/mcbake/d", "mode": 488}],
    "links": [{"path": "/etc/mcbake/link", "target": "a.conf"}]
  },
  "systemd": {"units": [
    {"name": "mcbake.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
    {"name": "crio.service", "dropins": [{"name": "10-mcbake.conf", "contents": "[Service]\nEnvironment=A=1\n"}]},
    {"name": "openvswitch.service", "enabled": false}
  ]}
}`

// otherConfig differs from appliedConfig in a file's content, a
// directory's mode, a link's target, a unit's contents and a drop-in's,
// and has a file the image lacks.
const otherConfig = `{
  "storage": {
    "files": [
      {"path": "/etc/mcbake/a.conf", "mode": 420, "contents": {"source": "data:,b%0A"}},
      {"path": "/etc/mcbake/owned.conf", "mode": 384, "user": {"id": 1000}, "group": {"id": 1000}, "contents": {"source": "data:,owned%0A"}},
      {"path": "/etc/mcbake/new.conf", "mode": 420, "contents": {"source": "data:,new%0A"}}
    ],
    "directories": [{"path": "/etc/mcbake/d", "mode": 448}],
    "links": [{"path": "/etc/mcbake/link", "target": "new.conf"}]
  },
  "systemd": {"units": [
    {"name": "mcbake.service", "enabled": true, "contents": "[Service]\nExecStart=/bin/false\n[Install]\nWantedBy=multi-user.target\n"},
    {"name": "crio.service", "dropins": [{"name": "10-mcbake.conf", "contents": "[Service]\nEnvironment=A=2\n"}]},
    {"name": "openvswitch.service", "enabled": false}
  ]}
}`

// TestContentMismatchIgnitionImage: an image built by the real
// ignition-apply from MachineConfigs passes MCB026 with them (what
// ignition-apply writes otherwise than the daemon by design is not
// compared), and other MachineConfigs are reported at each path where the
// image has something else, or nothing.
func TestContentMismatchIgnitionImage(t *testing.T) {
	if ok, why := ignitiontest.Available(); !ok {
		t.Skip("ignitiontest: " + why)
	}
	e := newEnv(t)
	applied := e.MC("50-a", appliedConfig)
	raw, err := os.ReadFile(applied)
	if err != nil {
		t.Fatal(err)
	}
	layout := filepath.Join(e.Dir, "applied")
	ignitiontest.Image(t, filepath.Join(e.Dir, "base"), "latest", raw, layout, "latest")
	img := "oci:" + layout + ":latest"

	for _, tt := range []struct {
		name string
		mc   string
		want []string
	}{
		{"the MachineConfig applied", applied, nil},
		{"another MachineConfig", e.MC("50-b", otherConfig), []string{
			"50-b spec.config.storage.directories[0] /etc/mcbake/d",
			"50-b spec.config.storage.files[0] /etc/mcbake/a.conf",
			"50-b spec.config.storage.files[2] /etc/mcbake/new.conf",
			"50-b spec.config.storage.links[0] /etc/mcbake/link",
			"50-b spec.config.systemd.units[mcbake.service].contents /etc/systemd/system/mcbake.service",
			"50-b spec.config.systemd.units[crio.service].dropins[10-mcbake.conf] /etc/systemd/system/crio.service.d/10-mcbake.conf",
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for _, base := range []string{"", e.Base} {
				r := e.run(Options{MachineConfigs: []string{tt.mc}, Base: base, Image: img})
				got := r.ByRule(RuleContentMismatch)
				if diff := cmp.Diff(tt.want, fieldsOf(got)); diff != "" {
					t.Errorf("--base %q: %s findings (-want +got):\n%s\n%+v", base, RuleContentMismatch, diff, got)
				}
				if r.notRunReason(RuleContentMismatch) != "" {
					t.Errorf("--base %q: %s not run: %s", base, RuleContentMismatch, r.notRunReason(RuleContentMismatch))
				}
				if r.Failed != (len(tt.want) > 0) {
					t.Errorf("--base %q: failed %v, want %v", base, r.Failed, len(tt.want) > 0)
				}
			}
		})
	}
}
