package revert_test

import (
	"archive/tar"
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/ignitiontest"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
	imagediff "github.com/mcbake/mcbake/tool/diff"
)

// The end-to-end proof for images built by others (issue 10, item 4): a
// layered image L built from the e2e base B by Ignition's own
// ignition-apply, as the MCO's on-cluster build does, which carries no
// mcbake manifest; a node on L whose /etc the machine-config-daemon wrote
// (the MachineConfigs rendered against L); a revert to B, and to a newer
// base, with real ostree's merge. The owned paths the node has differently from what the
// MachineConfigs want must be exactly those `mcbake diff --image L -f MC`
// (diff.Run) marks clobbered; the plan made from that prediction must
// be what node.Prepare writes before the reboot, and rewriting it repairs
// every /etc clobber.

// ignitionFixture is the MachineConfig the ignition-built image bakes.
const ignitionFixture = "testdata/e2e-ignition.yaml"

// ignitionBaseLayer adds to the e2e base the directory the fixture declares
// without a mode.
func ignitionBaseLayer() testbase.Layer {
	return testbase.Layer{
		Files:   []testbase.File{{Path: "etc/mcbake-ign-dir", Type: tar.TypeDir, Mode: 0o700}},
		Comment: "ignition e2e: a directory the MachineConfig declares without a mode",
	}
}

// TestRevertEndToEndIgnitionImage reverts a node on the ignition-built
// image to its base and, as a base bump, to a newer base; see the comment
// at the top of the file.
func TestRevertEndToEndIgnitionImage(t *testing.T) {
	if ok, why := ostreetest.Available(); !ok {
		t.Skip("ostreetest: " + why)
	}
	if ok, why := ignitiontest.Available(); !ok {
		t.Skip("ignitiontest: " + why)
	}
	start := time.Now()
	ignitiontest.Binary(t)
	t.Logf("ignition built in %v", time.Since(start).Round(time.Millisecond))
	e := newEnv(t)
	b1 := e.e2eBase(t, "b1", e2eBaseLayer(), ignitionBaseLayer())
	b2 := e.e2eBase(t, "b2", e2eBaseLayer(), ignitionBaseLayer(), bumpLayer())
	mcs := loadMCs(t, ignitionFixture)
	l := e.ignitionImage(t, "ocl", b1, mcs)
	cases := []struct {
		name string
		b    *e2eBase
		want map[string]revert.Outcome
	}{
		{name: "its base", b: b1, want: map[string]revert.Outcome{
			// The image has what the MCD writes: as for mcbake's images.
			"/etc/containers/registries.conf":                                 revert.Reverted,
			"/etc/mcbake-ign/new.conf":                                        revert.Removed,
			"/etc/mcbake-ign/owned.conf":                                      revert.Removed,
			"/etc/mcbake-ign/link":                                            revert.Removed,
			"/etc/systemd/system/mcbake-ign.service":                          revert.Removed,
			"/etc/systemd/system/zincati.service":                             revert.Removed,
			"/etc/systemd/system/crio.service.d":                              revert.Removed,
			"/etc/systemd/system/crio.service.d/10-ign.conf":                  revert.Removed,
			"/usr/share/mcbake-ign/lost.conf":                                 revert.Lost,
			"/usr/local/bin/mcbake-ign-tool":                                  revert.Untouched,
			render.SSHKeysFile:                                                revert.Untouched,
			render.CurrentConfig:                                              revert.Kept,
			"/etc/systemd/system/multi-user.target.wants/openvswitch.service": revert.Restored,
			// The image has it otherwise: the node's copy is modified or
			// added, and the merge keeps it (and its parent directory).
			"/etc/mcbake/identical.conf": revert.Kept,
			"/etc/mcbake-ign/ovs":        revert.Kept,
			"/etc/mcbake-ign":            revert.Kept,
			"/etc/systemd/system/multi-user.target.wants/mcbake-ign.service": revert.Kept,
			"/etc/systemd/system/sockets.target.wants":                       revert.Kept,
			"/etc/systemd/system/sockets.target.wants/docker.socket":         revert.Kept,
			"/etc/systemd/system/crio.service.d/20-empty.conf":               revert.Kept,
			// A modified directory the base has: the base's mode wins.
			"/etc/mcbake-ign-dir": revert.Reverted,
		}},
		// The newer base has the MachineConfig's registries.conf, and
		// lacks openvswitch's link, which is then owned by nobody.
		{name: "base bump", b: b2, want: map[string]revert.Outcome{
			"/etc/containers/registries.conf": revert.Kept,
			"/etc/mcbake/identical.conf":      revert.Kept,
			"/etc/mcbake-ign/new.conf":        revert.Removed,
		}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			rep, err := imagediff.Run(context.Background(), imagediff.Options{Base: tt.b.ref, Image: l.ref,
				MachineConfigs: []string{ignitionFixture}, Images: e.images, CacheDir: e.cache})
			if err != nil {
				t.Fatalf("diff.Run(--image %s -f %s): %v", l.ref, ignitionFixture, err)
			}
			if rep.Owned != revert.Derived || len(rep.MachineConfigs) != 1 || rep.MachineConfigs[0].Name != "99-e2e-ignition" {
				t.Errorf("diff.Run: owned %q from %v, want derived from 99-e2e-ignition", rep.Owned, rep.MachineConfigs)
			}
			checkOutcomes(t, rep, tt.want)
			stored := storedConfig(t, mcs, tt.b.ref)
			newRoot := ostreetest.Revert(t, l.root, tt.b.root, mcdWrite(l.rendered, stored))
			owned := ownedOf(rep)
			predicted := clobberedRequested(rep)
			onNode := clobberedOnNode(t, newRoot, wantOnNode(owned, stored))
			if diff := cmp.Diff(onNode, predicted); diff != "" {
				t.Errorf("owned paths ostree left different from the MachineConfigs (-ostree +diff.Run):\n%s\nostree: %q\nverify: %q",
					diff, onNode, predicted)
			}
			e2eRewrite(t, newRoot, rep, l, owned, stored)
			e2ePrepare(t, rep, l, tt.b, stored)
			t.Logf("%s: %d owned paths, %d clobbered by ostree and predicted", tt.name, len(rep.Entries), len(predicted))
		})
	}
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}

// ignitionImage builds the image of the MachineConfigs on b with
// ignition-apply (ignitiontest.Image), unpacks it as a node gets it, and
// renders what the machine-config-daemon writes on a node that runs it:
// the MachineConfigs against the image's tree.
func (e *env) ignitionImage(t *testing.T, name string, b *e2eBase, mcs []*machineconfig.MachineConfig) *e2eImage {
	t.Helper()
	mc, err := machineconfig.Merge(mcs).JSON()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, name)
	ignitiontest.Image(t, b.layout, "latest", mc, dir, "latest")
	root := filepath.Join(e.dir, name+"-root")
	ostreetest.Unpack(t, dir, "latest", root)
	ref := "oci:" + dir + ":latest"
	res, err := render.Render(context.Background(), machineconfig.Merge(mcs), e.openBase(t, ref).Tree())
	if err != nil {
		t.Fatalf("rendering against the ignition-built image: %v", err)
	}
	return &e2eImage{ref: ref, rendered: res.Entries, root: root, mcs: mcs}
}

// ownedOf is the manifest of a report's owned paths, as the MachineConfigs
// want them.
func ownedOf(rep *revert.Report) *manifest.Manifest {
	m := &manifest.Manifest{}
	for _, e := range rep.Entries {
		m.Entries = append(m.Entries, e.Want)
	}
	m.Sort()
	return m
}
