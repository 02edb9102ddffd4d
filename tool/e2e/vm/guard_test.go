package vm

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/mcbake/mcbake/internal/testing/ignitiontest"
	"github.com/mcbake/mcbake/internal/testing/nodetest"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/ostreevm"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
)

// Guard steps. Nobody calls mcbake on the node: the guard baked into the
// layered image runs at shutdown by itself.
const (
	// storeConfig stores the config as the machine-config-daemon does
	// after staging: currentconfig (json.Marshal of the object, no kind)
	// and currentimage (empty: the pool runs a plain image).
	storeConfig = `mkdir -p /etc/machine-config-daemon
cp ` + testDir + `/stored.json /etc/machine-config-daemon/currentconfig
: > /etc/machine-config-daemon/currentimage
`
	stageBase = "ostree admin deploy --stage os/base\n"
	// guardObserve records, on the next boot, what the guard did at the
	// shutdown before it.
	guardObserve = `R=$VMTEST_RESULTS
journalctl -b -1 -o cat -u ` + guard.UnitName + ` > $R/guard.log || true
cp /var/lib/mcbake/guard.json $R/guard.json 2>/dev/null || echo '{}' > $R/guard.json
`
)

var guardResults = []string{"guard.log", "guard.json"}

// TestRevertGuardOnBootedNode boots the scenarios of the revert guard:
// each reboots for real, with zero mcbake calls on the node.
func TestRevertGuardOnBootedNode(t *testing.T) {
	if ok, why := ostreevm.Available(); !ok {
		t.Skip(why)
	}
	start := time.Now()
	f := newFixture(t)
	t.Logf("fixture in %v", time.Since(start).Round(time.Second))
	one := ostreevm.Options{CPUs: 1}
	bImage := "quay.example/ocp/rhcos@" + f.bMeta["ostree.manifest-digest"]

	t.Run("the bug report's steps, after a reboot with nothing staged", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		res := f.run(t, scenario{opts: one,
			files: map[string][]byte{"lib/mcbake-test/stored.json": nodetest.StoredByDaemon(t, f.mcs[0], bImage)},
			steps: []ostreevm.Step{
				{Script: mcdWrites + storeConfig, Reboot: true},
				{Script: `R=$VMTEST_RESULTS
journalctl -b -1 -o cat -u ` + guard.UnitName + ` > $R/guard0.log || true
test -e /var/lib/mcbake/guard.json && echo yes > $R/guard0.exists || echo no > $R/guard0.exists
systemctl is-enabled ` + guard.UnitName + ` > $R/guard.enabled || true
systemctl is-active ` + guard.UnitName + ` > $R/guard.active || true
` + stageBase, Reboot: true},
				{Script: observe + guardObserve},
			},
			results: append([]string{"guard0.log", "guard0.exists", "guard.enabled", "guard.active"}, guardResults...)})
		t.Logf("scenario in %v", time.Since(start).Round(time.Second))
		if !strings.Contains(res["guard0.log"], "nothing staged: nothing to do") || res["guard0.exists"] != "no" {
			t.Errorf("a reboot with nothing staged: the guard logged %q and wrote a report: %s", res["guard0.log"], res["guard0.exists"])
		}
		if res["guard.enabled"] != "static" || res["guard.active"] != "active" {
			t.Errorf("the guard is %s and %s on the layered image, want static (enabled from /usr) and active", res["guard.enabled"], res["guard.active"])
		}
		checkFiles(t, res)
		rep := guardReport(t, res)
		if rep.Action != node.GuardPrepared || rep.Written == 0 || rep.MachineConfig != f.mcs[0].Name || rep.Target != bImage {
			t.Errorf("the guard's report: %+v, want the staged base prepared for %s", rep, f.mcs[0].Name)
		}
		if !strings.Contains(res["guard.log"], "prepared the staged deployment") {
			t.Errorf("the guard's journal: %q", res["guard.log"])
		}
	})

	t.Run("an image built by ignition-apply, with the guard added", func(t *testing.T) {
		t.Parallel()
		if ok, why := ignitiontest.Available(); !ok {
			t.Skip(why)
		}
		start := time.Now()
		lRoot, lMeta := f.guardedIgnitionImage(t)
		t.Logf("image built by ignition-apply, guard added, in %v", time.Since(start).Round(time.Second))
		res := f.run(t, scenario{opts: one, layered: &committed{lRoot, lMeta},
			files:   map[string][]byte{"lib/mcbake-test/stored.json": nodetest.StoredByDaemon(t, f.mcs[0], bImage)},
			steps:   []ostreevm.Step{{Script: mcdWrites + stageBase + storeConfig, Reboot: true}, {Script: observe + guardObserve}},
			results: guardResults})
		checkFiles(t, res)
		if rep := guardReport(t, res); rep.Action != node.GuardPrepared || rep.Written == 0 {
			t.Errorf("the guard's report: %+v, want the staged base prepared", rep)
		}
	})

	t.Run("from one layered image to another", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		l2, mc2, payload := f.secondImage(t)
		t.Logf("L2 built in %v", time.Since(start).Round(time.Second))
		l2Image := "quay.example/ocp/worker-l2@" + l2.meta["ostree.manifest-digest"]
		res := f.run(t, scenario{opts: one, commits: map[string]committed{"os/l2": l2},
			files: map[string][]byte{
				"lib/mcbake-test/stored.json": nodetest.StoredByDaemon(t, mc2, l2Image),
				// The MachineConfig the node runs once on L2: what observe
				// checks on its first boot (the fixture's mc.json is L1's,
				// which step 1 does not read).
				"lib/mcbake-test/mc.json":  mcJSON(t, []*machineconfig.MachineConfig{mc2}),
				"lib/mcbake-test/mcd2.tar": payload.tar,
				"lib/mcbake-test/stale2":   payload.remove,
			},
			steps: []ostreevm.Step{{Script: mcdWrites + mcdUpdate + "ostree admin deploy --stage os/l2\n" + storeConfig, Reboot: true},
				{Script: observe + guardObserve + `cat /etc/mcbake-vm/kubelet/kubelet.conf > $R/kubelet.conf
test -e /etc/mcbake-vm/l2-only.conf && echo yes > $R/l2only.exists || echo no > $R/l2only.exists
`}},
			results: append([]string{"kubelet.conf", "l2only.exists"}, guardResults...)})
		// The first boot of L2 as after any change of image: the
		// kubelet-like unit ran, ondisk of L2's MachineConfig passes, the
		// early sysctl, enablement, mask and drop-in.
		checkFiles(t, res)
		if res["kubelet.conf"] != "node-ip=10.0.0.8" || res["l2only.exists"] != "yes" {
			t.Errorf("kubelet.conf %q (want L2's), L2's own file there: %s", res["kubelet.conf"], res["l2only.exists"])
		}
		rep := guardReport(t, res)
		if rep.Action != node.GuardPrepared || rep.MachineConfig != mc2.Name {
			t.Errorf("the guard's report: %+v, want L2 prepared for %s", rep, mc2.Name)
		}
	})

	t.Run("a guard that fails", func(t *testing.T) {
		t.Parallel()
		stored := string(nodetest.StoredByDaemon(t, f.mcs[0], bImage))
		refused := strings.Replace(stored, `"storage":`, `"passwd":{"groups":[{"name":"wheel2"}]},"storage":`, 1)
		if refused == stored {
			t.Fatalf("no storage in the stored config: %s", stored)
		}
		res := f.run(t, scenario{opts: one,
			files:   map[string][]byte{"lib/mcbake-test/stored.json": []byte(refused)},
			steps:   []ostreevm.Step{{Script: mcdWrites + stageBase + storeConfig, Reboot: true}, {Script: observe + guardObserve}},
			results: guardResults})
		// The shutdown completed (the base booted), nothing was written:
		// the base has the bug's outcome.
		rep := guardReport(t, res)
		if rep.Action != node.GuardFailed || !strings.Contains(rep.Error, "passwd.groups") || rep.Written != 0 {
			t.Errorf("the guard's report: %+v, want a failure naming passwd.groups", rep)
		}
		if !strings.Contains(res["guard.log"], "FAILED, nothing written") {
			t.Errorf("the guard's journal: %q", res["guard.log"])
		}
		if kubeletRanOn(res) {
			t.Errorf("the kubelet-like unit ran on the base after a guard that failed: something was written")
		}
	})
}

// mcdUpdate is the machine-config-daemon's update from L1's
// MachineConfig to L2's: L2's files, and L1's that L2 has not removed.
const mcdUpdate = `tar --numeric-owner -xpf ` + testDir + `/mcd2.tar -C /
while read -r p; do rm -f "$p"; done < ` + testDir + `/stale2
systemctl daemon-reload
`

func guardReport(t *testing.T, res map[string]string) node.GuardReport {
	t.Helper()
	var rep node.GuardReport
	if err := json.Unmarshal([]byte(res["guard.json"]), &rep); err != nil {
		t.Fatalf("the guard's report: %v\n%s", err, res["guard.json"])
	}
	return rep
}

// guardedIgnitionImage builds L the way the MCO's on-cluster build does
// (ignition-apply of the fixture's MachineConfig on the base), adds the
// guard with mcbake build (no MachineConfigs) and unpacks it.
func (f *fixture) guardedIgnitionImage(t *testing.T) (string, map[string]string) {
	t.Helper()
	layout := filepath.Join(t.TempDir(), "oci")
	baseLayout := strings.TrimSuffix(strings.TrimPrefix(f.opts.Base, "oci:"), ":base")
	ignitiontest.Image(t, baseLayout, "base", mcoRendered(t, mcJSON(t, f.mcs)), layout, "ign")
	opts := f.opts
	opts.Base, opts.Output, opts.MachineConfigs = "oci:"+layout+":ign", "oci:"+layout+":guarded", nil
	if _, err := build.Image(context.Background(), opts); err != nil {
		t.Fatalf("adding the guard: %v", err)
	}
	root := filepath.Join(t.TempDir(), "root")
	ostreetest.Unpack(t, layout, "guarded", root)
	return root, imageMeta(t, layout, "guarded")
}

// mcoRendered is the MachineConfig mc (JSON) as the MCO renders it for
// the on-cluster build: its merge sets overwrite: true on every file
// that does not set it (the fixture's /etc/hostname replaces the base's).
func mcoRendered(t *testing.T, mc []byte) []byte {
	t.Helper()
	var obj map[string]any
	must(t, json.Unmarshal(mc, &obj))
	spec, _ := obj["spec"].(map[string]any)
	cfg, _ := spec["config"].(map[string]any)
	storage, _ := cfg["storage"].(map[string]any)
	files, _ := storage["files"].([]any)
	for _, f := range files {
		if f, ok := f.(map[string]any); ok && f["overwrite"] == nil {
			f["overwrite"] = true
		}
	}
	b, err := json.Marshal(obj)
	must(t, err)
	return b
}

// mc2Edits make L2's MachineConfig: the fixture's with kubelet.conf changed,
// /etc/hostname gone (L1's file, which the daemon deletes), one new file.
var mc2Edits = strings.NewReplacer(
	"node-ip%3D10.0.0.7", "node-ip%3D10.0.0.8",
	"name: 99-worker-vm", "name: 99-worker-vm-l2",
	"        - {path: /etc/hostname, mode: 420, contents: {source: \"data:,worker-vm%0A\"}}\n",
	"        - {path: /etc/mcbake-vm/l2-only.conf, mode: 420, contents: {source: \"data:,l2%0A\"}}\n")

type mcdPayloadFiles struct{ tar, remove []byte }

// secondImage builds L2 from the base with mc2 and the guard, unpacks it,
// and returns what the daemon writes updating from L1's MachineConfig to
// it: its payload, and the paths of L1's it removes (the stale files,
// then L2's own removals).
func (f *fixture) secondImage(t *testing.T) (committed, *machineconfig.MachineConfig, mcdPayloadFiles) {
	t.Helper()
	ctx := context.Background()
	src := mc2Edits.Replace(workerMC)
	if !strings.Contains(src, "l2-only") || strings.Contains(src, "/etc/hostname") {
		t.Fatalf("mc2's edits did not apply:\n%s", src)
	}
	mcs, err := machineconfig.Parse("mc2.yaml", []byte(src))
	must(t, err)
	layout := filepath.Join(t.TempDir(), "oci")
	opts := f.opts
	opts.Output, opts.MachineConfigs = "oci:"+layout+":l2", mcs
	if _, err := build.Image(ctx, opts); err != nil {
		t.Fatalf("building L2: %v", err)
	}
	root := filepath.Join(t.TempDir(), "root")
	ostreetest.Unpack(t, layout, "l2", root)
	tarball, absent := mcdPayload(t, ctx, opts)
	stale := staleFiles(t, ctx, f.opts, opts)
	return committed{root, imageMeta(t, layout, "l2")}, mcs[0], mcdPayloadFiles{tarball, append(stale, absent...)}
}

// staleFiles are the /etc files of from's rendering that to's does not
// have, one per line: what the daemon deletes on the update.
func staleFiles(t *testing.T, ctx context.Context, from, to build.ImageOptions) []byte {
	t.Helper()
	paths := func(o build.ImageOptions) map[string]bool {
		b, err := image.OpenBase(ctx, o.Base, image.BaseOptions{Images: o.Images, CacheDir: o.CacheDir})
		must(t, err)
		defer b.Close()
		p, err := build.Prepare(context.Background(), b, o.Options)
		must(t, err)
		out := map[string]bool{}
		for _, e := range p.Rendered.Entries {
			if e.Type == manifest.File && revert.ZoneOf(e.Where()) == revert.ZoneEtc && e.Path != node.CurrentConfigFile {
				out[e.Where()] = true
			}
		}
		return out
	}
	keep := paths(to)
	var b strings.Builder
	for p := range paths(from) {
		if !keep[p] {
			b.WriteString(p + "\n")
		}
	}
	return []byte(b.String())
}
