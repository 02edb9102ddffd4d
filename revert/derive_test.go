package revert_test

import (
	"archive/tar"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
)

// TestDerive: for an image built by others that already has a
// MachineConfig's directory and lacks the enablement link of the unit it
// disables, the daemon writes the file on the node, and the directory the
// base lacks and the link the base has are owned only on the base.
func TestDerive(t *testing.T) {
	base := compareIndex(t, testbase.Options{})
	layered := compareIndex(t, testbase.Options{ExtraLayers: []testbase.Layer{{
		Files: []testbase.File{
			{Path: "etc/mcbake", Type: tar.TypeDir, Mode: 0o755},
			{Path: "etc/mcbake/a.conf", Mode: 0o600, Content: []byte("a\n")},
		},
		Whiteouts: []string{"etc/systemd/system/multi-user.target.wants/openvswitch.service"},
	}}})
	mc := filepath.Join(t.TempDir(), "50-a.yaml")
	if err := os.WriteFile(mc, []byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 50-a}
spec:
  config:
    ignition: {version: 3.5.0}
    storage:
      files: [{path: /etc/mcbake/a.conf, mode: 420, contents: {source: "data:,a%0A"}}]
    systemd:
      units: [{name: openvswitch.service, enabled: false}]
`), 0o644); err != nil {
		t.Fatal(err)
	}
	mcs, err := machineconfig.Load([]string{mc}, nil)
	if err != nil {
		t.Fatal(err)
	}
	owned, err := revert.Derive(context.Background(), machineconfig.Merge(mcs), layered, base)
	if err != nil {
		t.Fatalf("Derive: %v", err)
	}
	const link = "/etc/systemd/system/multi-user.target.wants/openvswitch.service"
	var baseOnly []string
	for p := range owned.BaseOnly {
		baseOnly = append(baseOnly, p)
	}
	slices.Sort(baseOnly)
	if want := []string{"/etc/mcbake", link}; !slices.Equal(baseOnly, want) {
		t.Errorf("Derive: owned only on the base %q, want %q", baseOnly, want)
	}
	for p, typ := range map[string]manifest.Type{"/etc/mcbake/a.conf": manifest.File, "/etc/mcbake": manifest.Directory, link: manifest.Absent} {
		e, ok := owned.Manifest.Lookup(p)
		if !ok || e.Type != typ || e.Source.MachineConfig != "50-a" {
			t.Errorf("Derive: %s = %+v (found %v), want a %s owned by 50-a", p, e, ok, typ)
		}
	}
	if owned.Manifest.Base != nil {
		t.Errorf("Derive: the manifest records a base %+v", owned.Manifest.Base)
	}

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := revert.Derive(ctx, machineconfig.Merge(mcs), layered, base); !errors.Is(err, context.Canceled) {
		t.Errorf("Derive(cancelled) = %v, want context.Canceled", err)
	}
	if _, err := revert.PredictDerived(ctx, owned, layered, base); !errors.Is(err, context.Canceled) {
		t.Errorf("PredictDerived(cancelled) = %v, want context.Canceled", err)
	}
	if _, err := revert.Predict(ctx, owned.Manifest, base); !errors.Is(err, context.Canceled) {
		t.Errorf("Predict(cancelled) = %v, want context.Canceled", err)
	}
}
