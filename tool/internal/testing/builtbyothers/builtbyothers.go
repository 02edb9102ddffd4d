// Package builtbyothers is the image built by others that verify's and diff's tests share.
//
// It holds its MachineConfig, its layer and what a revert does.
package builtbyothers

import (
	"archive/tar"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/revert"
)

// Config is what the image built by others bakes: a file, a link, a
// directory and a disabled base unit.
const Config = `{
  "storage": {
    "files": [{"path": "/etc/mcbake/a.conf", "mode": 420, "contents": {"source": "data:,a%0A"}}],
    "links": [{"path": "/etc/mcbake/link", "target": "a.conf"}],
    "directories": [{"path": "/etc/mcbake/d", "mode": 488}]
  },
  "systemd": {"units": [{"name": "openvswitch.service", "enabled": false}]}
}`

// Layer is Config as another builder baked it (docs/design.md, "Images
// built by others"): the file with mode 0600 instead of the
// machine-config-daemon's 0644, the link and the directory as the daemon
// writes them, the unit's enablement link removed (systemctl disable ran
// in the build), and no mcbake label.
func Layer() testbase.Layer {
	return testbase.Layer{
		Files: []testbase.File{
			{Path: "etc/mcbake/a.conf", Mode: 0o600, Content: []byte("a\n")},
			{Path: "etc/mcbake/link", Type: tar.TypeSymlink, Mode: 0o777, Target: "a.conf"},
			{Path: "etc/mcbake/d", Type: tar.TypeDir, Mode: 0o750},
		},
		Whiteouts: []string{"etc/systemd/system/multi-user.target.wants/openvswitch.service"},
		Comment:   "an image built by others",
	}
}

// Outcomes is what a revert of the image built by others to the default
// base does: the path baked otherwise than the daemon writes it is
// modified on the node and kept, and so is its directory, which the merge
// recreates from the node's copy; the rest is the image's unmodified
// default: removed, or, for the link the build already removed, restored.
func Outcomes() map[string]revert.Outcome {
	return map[string]revert.Outcome{
		"/etc/mcbake":        revert.Kept,
		"/etc/mcbake/a.conf": revert.Kept,
		"/etc/mcbake/link":   revert.Removed,
		"/etc/mcbake/d":      revert.Removed,
		"/etc/systemd/system/multi-user.target.wants/openvswitch.service": revert.Restored,
		"/etc/machine-config-daemon":                                      revert.Kept,
		"/etc/machine-config-daemon/currentconfig":                        revert.Kept,
	}
}
