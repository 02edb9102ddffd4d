package ignitiontest

import (
	"archive/tar"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/ocilayout"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/roottest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
)

// testMC exercises what the package comment says ignition-apply does
// unlike the machine-config-daemon.
const testMC = `{
  "apiVersion": "machineconfiguration.openshift.io/v1",
  "kind": "MachineConfig",
  "metadata": {"name": "99-ignitiontest"},
  "spec": {"config": {
    "ignition": {"version": "3.4.0"},
    "passwd": {"users": [{"name": "core", "sshAuthorizedKeys": ["ssh-ed25519 AAAA"]}]},
    "storage": {
      "files": [
        {"path": "/etc/keep.conf", "mode": 384},
        {"path": "/etc/containers/registries.conf", "overwrite": true, "contents": {"source": "data:,new%0A"}}
      ],
      "directories": [{"path": "/etc/keep-mode"}],
      "links": [{"path": "/etc/ovs-link", "target": "openvswitch"}]
    },
    "systemd": {"units": [
      {"name": "new.service", "enabled": true, "contents": "[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
      {"name": "openvswitch.service", "enabled": false},
      {"name": "crio.service", "dropins": [{"name": "20-empty.conf", "contents": ""}]}
    ]}
  }}
}`

// TestImage builds an image with ignition-apply and checks that its new
// layer holds exactly the applied changes (the image unpacks to the
// applied root) and what ignition-apply did.
func TestImage(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	if ok, why := ostreetest.Available(); !ok {
		t.Skip(why)
	}
	dir := t.TempDir()
	base := filepath.Join(dir, "base")
	extra := testbase.Layer{Files: []testbase.File{
		{Path: "etc/keep.conf", Mode: 0o644, Content: []byte("keep\n")},
		{Path: "etc/keep-mode", Type: tar.TypeDir, Mode: 0o700},
	}}
	if _, err := testbase.Write(base, testbase.Options{ExtraLayers: []testbase.Layer{extra}}); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "layered")
	applied := Image(t, base, "latest", []byte(testMC), out, "latest")
	unpacked := filepath.Join(dir, "unpacked")
	ostreetest.Unpack(t, out, "latest", unpacked)
	tree := roottest.Tree(t, unpacked)
	if diff := cmp.Diff(roottest.Tree(t, applied), tree); diff != "" {
		t.Errorf("the image does not unpack to the applied root (-applied +image):\n%s", diff)
	}
	want := map[string]string{
		"etc/systemd/system-preset/20-ignition.preset":    "file 0644 0:0 enable new.service\ndisable openvswitch.service\n",
		"etc/systemd/system/new.service":                  "file 0644 0:0 [Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n",
		"etc/systemd/system/crio.service.d/20-empty.conf": "file 0644 0:0 ",
		"etc/keep.conf":                  "file 0600 0:0 keep\n",
		"etc/keep-mode":                  "dir 0700 0:0",
		"etc/ovs-link":                   "link openvswitch 800:801",
		"etc/containers/registries.conf": "file 0644 0:0 new\n",
		"etc/machine-config-daemon":      "dir 0755 0:0",
	}
	for p, w := range want {
		if got := tree[p]; got != w {
			t.Errorf("%s = %q, want %q", p, got, w)
		}
	}
	for _, p := range []string{
		"etc/systemd/system/multi-user.target.wants/new.service",
		"etc/systemd/system/multi-user.target.wants/openvswitch.service",
		"var/home/core/.ssh",
	} {
		if got, ok := tree[p]; ok {
			t.Errorf("%s = %q, want nothing", p, got)
		}
	}
	if !strings.HasPrefix(tree["etc/machine-config-daemon/currentconfig"], "file 0644 0:0 {") {
		t.Errorf("currentconfig = %q, want the MachineConfig", tree["etc/machine-config-daemon/currentconfig"])
	}
	man, err := readTagged(out, "latest")
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		Config struct{ Labels map[string]string }
		RootFS struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	if err := ocilayout.ReadJSON(ocilayout.BlobPath(out, man.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	if baseLayers := len(testbase.DefaultLayers()) + 1; len(cfg.RootFS.DiffIDs) != len(man.Layers) || len(man.Layers) != baseLayers+1 {
		t.Errorf("%d layers and %d diff IDs, want the base's %d and one more", len(man.Layers), len(cfg.RootFS.DiffIDs), baseLayers)
	}
	for k := range cfg.Config.Labels {
		if strings.HasPrefix(k, "io.mcbake.") {
			t.Errorf("the image has mcbake's label %s", k)
		}
	}
	if b, _ := json.Marshal(cfg.Config.Labels); !strings.Contains(string(b), "ostree.bootable") {
		t.Errorf("the image lost the base's labels: %s", b)
	}
}
