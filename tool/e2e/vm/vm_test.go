package vm

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/ostreevm"
	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/diff"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/imagestest"
	"github.com/mcbake/mcbake/tool/templates"
)

// workerMC looks like a real worker's MachineConfig, for the Debian guest:
// a kubelet-like unit with contents and enablement (it logs each boot it
// runs on), a drop-in on a base unit, a mask, a unit the base enables that
// it disables, files under /etc (one read early at boot by
// systemd-sysctl, one in a new nested directory, one the base has
// differently), and one under /usr/local (-> /var/usrlocal).
const workerMC = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 99-worker-vm}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/sysctl.d/99-mcbake.conf, mode: 420, contents: {source: "data:,vm.swappiness%20%3D%207%0A"}}
        - {path: /etc/mcbake-vm/kubelet/kubelet.conf, mode: 384, contents: {source: "data:,node-ip%3D10.0.0.7%0A"}}
        - {path: /etc/hostname, mode: 420, contents: {source: "data:,worker-vm%0A"}}
        - {path: /usr/local/bin/mcbake-hello, mode: 493, contents: {source: "data:,%23!/bin/sh%0Aecho%20hello%0A"}}
    systemd:
      units:
        - name: mcbake-kubelet.service
          enabled: true
          contents: |
            [Unit]
            Description=kubelet-like unit of the mcbake VM test
            [Service]
            Type=oneshot
            RemainAfterExit=yes
            ExecStart=/bin/sh -c 'mkdir -p /var/lib/mcbake-test && cat /proc/sys/kernel/random/boot_id >> /var/lib/mcbake-test/kubelet.log'
            [Install]
            WantedBy=multi-user.target
        - name: procps.service
          dropins:
            - name: 10-mcbake.conf
              contents: "[Service]\nEnvironment=MCBAKE_DROPIN=1\n"
        - name: systemd-hostnamed.service
          mask: true
        - name: remote-fs.target
          enabled: false
`

// The guest's paths.
const (
	testDir = "/var/lib/mcbake-test"
	nodeBin = "/usr/local/bin/mcbake-node"
)

// fixture is what every scenario boots: the base and the layered image as
// trees to commit, the commit metadata ostree-ext would record for them,
// and the files for the guest.
type fixture struct {
	bRoot, lRoot string
	bMeta, lMeta map[string]string
	plan         *revert.Plan
	files        map[string][]byte // stateroot /var relative -> content
	execs        map[string]bool   // which of files are executable
	// What made them, for scenarios that build more images: the build
	// options of L (its base, layout, images and cache), its
	// MachineConfigs, and the node binary (L's revert guard).
	opts build.ImageOptions
	mcs  []*machineconfig.MachineConfig
	node []byte
	dir  string
}

func TestRevertOnBootedNode(t *testing.T) {
	if ok, why := ostreevm.Available(); !ok {
		t.Skip(why)
	}
	start := time.Now()
	f := newFixture(t)
	t.Logf("fixture (base, layered image, plan, node binary) in %v", time.Since(start).Round(time.Second))

	// The scenarios boot two machines at a time, one virtual CPU each:
	// under TCG two one-CPU guests finish sooner than one two-CPU guest
	// after the other.
	one := ostreevm.Options{CPUs: 1}
	t.Run("the bug", func(t *testing.T) {
		t.Parallel()
		res := f.boot(t, one, mcdWrites+stage)
		if ran := kubeletRanOn(res); ran {
			t.Errorf("the kubelet-like unit ran on the first boot of the base without the fix: the harness did not reproduce the bug")
		}
		if rc := result(res, "ondisk.rc"); rc != "1" {
			t.Errorf("ondisk on the base without the fix: exit %s, want 1 (files lost)\n%s", rc, result(res, "ondisk.txt"))
		}
		for _, p := range []string{"/etc/mcbake-vm/kubelet/kubelet.conf", "/etc/systemd/system/mcbake-kubelet.service"} {
			if !strings.Contains(result(res, "ondisk.txt"), p) {
				t.Errorf("ondisk does not report %s lost:\n%s", p, result(res, "ondisk.txt"))
			}
		}
		if got := result(res, "swappiness"); got == "7" {
			t.Errorf("vm.swappiness = 7 without the fix: the sysctl.d file survived?")
		}
	})

	t.Run("the fix", func(t *testing.T) {
		t.Parallel()
		res := f.boot(t, one, mcdWrites+units+stage+prepare)
		f.checkFixed(t, res)
		f.checkAgreement(t, res)
	})

	t.Run("a re-stage after prepare", func(t *testing.T) {
		t.Parallel()
		res := f.boot(t, one, mcdWrites+units+stage+prepare+restage)
		f.checkFixed(t, res)
		// Its report, kept beside the record (the journal may lose what a
		// unit prints late in a shutdown) and retired by the first-boot
		// check.
		rep := result(res, "finalized.json")
		if !strings.Contains(rep, "/etc/systemd/system/mcbake-kubelet.service") || !strings.Contains(rep, `"restaged": true`) {
			t.Errorf("the safety net did not repair the re-staged deployment; its report:\n%s\nits log:\n%s", rep, result(res, "finalized.log"))
		}
		schematest.Validate(t, "finalized", []byte(rep))
	})

	t.Run("read-only sysroot with the CI plan", func(t *testing.T) {
		t.Parallel()
		res := f.boot(t, ostreevm.Options{CPUs: 1, ReadOnlySysroot: true}, mcdWrites+units+checkReadOnly+stage+prepareWithPlan)
		f.checkFixed(t, res)
	})
}

// Guest steps. Step 1 runs on the layered image.
const (
	// mcdWrites is what the machine-config-daemon wrote on the node: the
	// MachineConfigs' files, exactly as the image baked them.
	mcdWrites = `set -eu
tar --numeric-owner -xpf ` + testDir + `/mcd.tar -C /
while read -r p; do rm -f "$p"; done < ` + testDir + `/absent
systemctl daemon-reload
`
	// units installs the node flow's units.
	units = `cp ` + testDir + `/units/*.service /etc/systemd/system/
systemctl daemon-reload
systemctl enable mcbake-revert-check.service
systemctl enable --now mcbake-revert-finalized.service
`
	// stage stages the base, as rpm-ostree rebase does, and stores the
	// new config as the MCD does after staging.
	stage = `ostree admin deploy --stage os/base
mkdir -p /etc/machine-config-daemon
echo '{"kind":"MachineConfig","metadata":{"name":"rendered-worker-base"}}' > /etc/machine-config-daemon/currentconfig
`
	prepare = nodeBin + ` prepare-revert -f ` + testDir + `/mc.json --format json > "$VMTEST_RESULTS/prepare.json"
`
	prepareWithPlan = nodeBin + ` prepare-revert -f ` + testDir + `/mc.json --plan ` + testDir + `/plan.json --format json > "$VMTEST_RESULTS/prepare.json"
`
	// restage stages the base again after prepare-revert (a kernel
	// argument change does): the new staged deployment lacks its writes.
	restage = `ostree admin deploy --stage os/base --karg-append=mcbake.restaged=1
`
	checkReadOnly = `awk '$2 == "/sysroot" {print $4}' /proc/mounts | grep -q '^ro'
`
	// observe runs on the first boot of the base and records its state.
	observe = `R=$VMTEST_RESULTS
cat /proc/sys/kernel/random/boot_id > $R/boot_id
cp ` + testDir + `/kubelet.log $R/kubelet.log 2>/dev/null || touch $R/kubelet.log
cat /proc/sys/vm/swappiness > $R/swappiness
systemctl is-enabled remote-fs.target > $R/remotefs.enabled || true
systemctl is-enabled systemd-hostnamed.service > $R/hostnamed.enabled || true
systemctl show -p Environment procps.service > $R/procps.env
rc=0; ` + nodeBin + ` ondisk -f ` + testDir + `/mc.json --root / > $R/ondisk.txt 2>&1 || rc=$?; echo $rc > $R/ondisk.rc
journalctl -b -1 -o cat -u mcbake-revert-finalized.service > $R/finalized.log || true
cat /var/lib/mcbake/revert/finalized-*.json > $R/finalized.json 2>/dev/null || true
systemctl is-active mcbake-revert-check.service > $R/check.active || true
ls /var/lib/mcbake/revert > $R/revert.ls 2>/dev/null || true
`
)

// boot runs one scenario on a fresh machine: step1 on the layered image,
// a reboot, the observation on the base.
func (f *fixture) boot(t *testing.T, opts ostreevm.Options, step1 string) map[string]string {
	t.Helper()
	return f.run(t, scenario{opts: opts, steps: []ostreevm.Step{{Script: step1, Reboot: true}, {Script: observe}}})
}

// scenario is what run boots: the fixture's layered image (or layered)
// deployed, the base and more committed, the fixture's files and more
// in /var, the steps, and the results to read besides observe's.
type scenario struct {
	opts    ostreevm.Options
	kargs   []string             // kernel arguments of L's deployment, besides ostreevm's
	layered *committed           // nil: the fixture's
	commits map[string]committed // ref -> tree, committed besides os/base and os/layered
	files   map[string][]byte    // stateroot /var relative -> content, besides the fixture's
	steps   []ostreevm.Step
	results []string
}

// committed is an image as a tree to commit, with the metadata ostree-ext
// records for it.
type committed struct {
	root string
	meta map[string]string
}

// observed are the results observe writes.
var observed = []string{"boot_id", "kubelet.log", "swappiness", "remotefs.enabled", "hostnamed.enabled", "procps.env",
	"ondisk.txt", "ondisk.rc", "finalized.log", "finalized.json", "check.active", "revert.ls"}

// run runs a scenario on a fresh machine and returns the results, by
// name, and the first boot's step log as boot1.log.
func (f *fixture) run(t *testing.T, sc scenario) map[string]string {
	t.Helper()
	m := ostreevm.New(t, sc.opts)
	start := time.Now()
	layered := committed{f.lRoot, f.lMeta}
	if sc.layered != nil {
		layered = *sc.layered
	}
	commits := map[string]committed{"os/base": {f.bRoot, f.bMeta}, "os/layered": layered}
	maps.Copy(commits, sc.commits)
	for _, ref := range slices.Sorted(maps.Keys(commits)) {
		if _, err := m.CommitWithMetadata(commits[ref].root, ref, commits[ref].meta); err != nil {
			t.Fatal(err)
		}
	}
	if err := m.Deploy("os/layered", sc.kargs...); err != nil {
		t.Fatal(err)
	}
	files := maps.Clone(f.files)
	maps.Copy(files, sc.files)
	for rel, b := range files {
		perm := os.FileMode(0o644)
		if f.execs[rel] {
			perm = 0o755
		}
		if err := m.WriteVar(rel, b, perm); err != nil {
			t.Fatal(err)
		}
	}
	setup := time.Since(start)
	boots, err := m.Run(context.Background(), sc.steps...)
	for _, b := range boots {
		t.Logf("boot %d (%s): %v", b.Boot, b.Entry.Title, b.Wall.Round(time.Second))
	}
	if err != nil {
		for _, b := range boots {
			t.Logf("boot %d step log:\n%s", b.Boot, b.StepLog)
		}
		t.Fatalf("Run: %v", err)
	}
	t.Logf("scenario: setup %v, %d boots %v", setup.Round(time.Second), len(boots), time.Since(start).Round(time.Second)-setup.Round(time.Second))
	out := map[string]string{"boot1.log": boots[0].StepLog}
	for _, name := range append(slices.Clone(observed), sc.results...) {
		b, err := m.ReadResult(name)
		if err != nil {
			t.Fatalf("reading %s: %v", name, err)
		}
		out[name] = strings.TrimSpace(string(b))
	}
	if b, err := m.ReadResult("prepare.json"); err == nil {
		out["prepare.json"] = string(b)
	}
	return out
}

func result(res map[string]string, name string) string { return res[name] }

// kubeletRanOn reports whether the kubelet-like unit ran on the observed
// boot.
func kubeletRanOn(res map[string]string) bool {
	for _, id := range strings.Fields(res["kubelet.log"]) {
		if id == res["boot_id"] {
			return true
		}
	}
	return false
}

// checkFixed checks the first boot of the base after a revert prepared
// by hand (checkFiles), and that the first-boot check ran.
func (f *fixture) checkFixed(t *testing.T, res map[string]string) {
	t.Helper()
	checkFiles(t, res)
	if !strings.Contains(res["revert.ls"], "check-") {
		t.Errorf("the first-boot check left no report in /var/lib/mcbake/revert: %q", res["revert.ls"])
	}
}

// checkFiles checks the first boot after a revert: the kubelet-like unit
// ran, the early-boot sysctl applied, enablement, mask and drop-in as the
// MachineConfig says, and ondisk passes for every owned path.
func checkFiles(t *testing.T, res map[string]string) {
	t.Helper()
	if !kubeletRanOn(res) {
		t.Errorf("the kubelet-like unit did not run on the first boot of the base (boot %s, log %q)", res["boot_id"], res["kubelet.log"])
	}
	if rc := res["ondisk.rc"]; rc != "0" {
		t.Errorf("ondisk on the first boot of the base: exit %s, want 0:\n%s", rc, res["ondisk.txt"])
	}
	want := map[string]string{"swappiness": "7", "remotefs.enabled": "disabled", "hostnamed.enabled": "masked", "procps.env": "Environment=MCBAKE_DROPIN=1"}
	for k, v := range want {
		if res[k] != v {
			t.Errorf("%s = %q, want %q", k, res[k], v)
		}
	}
}

// checkAgreement: the paths prepare-revert wrote are the plan CI made
// from mcbake diff of the same images and MachineConfigs.
func (f *fixture) checkAgreement(t *testing.T, res map[string]string) {
	t.Helper()
	var rec node.Record
	if err := json.Unmarshal([]byte(res["prepare.json"]), &rec); err != nil {
		t.Fatalf("prepare-revert's record: %v\n%s", err, res["boot1.log"])
	}
	var written, planned []string
	for _, c := range rec.Written() {
		if !c.ConfigDir {
			written = append(written, c.Path)
		}
	}
	for _, pe := range f.plan.Rewrite {
		planned = append(planned, pe.Path)
	}
	sort.Strings(written)
	sort.Strings(planned)
	if diff := cmp.Diff(planned, written, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("prepare-revert on the node and mcbake diff in CI disagree (-plan +prepare-revert):\n%s", diff)
	}
	if len(written) == 0 {
		t.Error("prepare-revert wrote nothing")
	}
}

// newFixture builds the base tree (the harness's Debian ostree OS with
// RHCOS's /usr/local -> ../var/usrlocal), packs it as an OCI image, builds
// the layered image with mcbake, unpacks it, makes the plan CI would
// make, and prepares the guest's files.
func newFixture(t *testing.T) *fixture {
	t.Helper()
	vmBase, err := ostreevm.BaseRootfs(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return newFixtureFrom(t, vmBase)
}

// newFixtureFrom is newFixture on the root filesystem vmBase (one of
// ostreevm's).
func newFixtureFrom(t *testing.T, vmBase string) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	f := &fixture{bRoot: filepath.Join(dir, "base"), lRoot: filepath.Join(dir, "layered"), files: map[string][]byte{}, execs: map[string]bool{}}
	mustRun(t, "cp", "-a", vmBase, f.bRoot)
	must(t, os.RemoveAll(filepath.Join(f.bRoot, "usr", "local")))
	must(t, os.Symlink("../var/usrlocal", filepath.Join(f.bRoot, "usr", "local")))
	must(t, os.MkdirAll(filepath.Join(f.bRoot, "var", "usrlocal", "bin"), 0o755))

	layout := filepath.Join(dir, "oci")
	must(t, ostreevm.PackOCI(f.bRoot, layout, "base"))
	imgs := imagestest.Isolate(t, dir)
	mcFile := filepath.Join(dir, "mc.yaml")
	must(t, os.WriteFile(mcFile, []byte(workerMC), 0o644))
	mcs, err := machineconfig.Load([]string{mcFile}, nil)
	must(t, err)
	// L carries the revert guard, as every image mcbake build makes.
	f.node = nodeBinary(t, dir)
	opts := build.ImageOptions{Output: "oci:" + layout + ":layered", Options: build.Options{Base: "oci:" + layout + ":base", MachineConfigs: mcs,
		Images: imgs, CacheDir: filepath.Join(dir, "cache"), Guard: f.node}}
	f.opts, f.mcs, f.dir = opts, mcs, dir
	if _, err := build.Image(ctx, opts); err != nil {
		t.Fatalf("mcbake build: %v", err)
	}
	ostreetest.Unpack(t, layout, "layered", f.lRoot)

	rep, err := diff.Run(ctx, diff.Options{Base: opts.Base, Image: opts.Output, Images: imgs, CacheDir: opts.CacheDir})
	must(t, err)
	f.plan, err = revert.NewPlan(rep)
	must(t, err)
	planJSON, err := revert.MarshalPlan(f.plan)
	must(t, err)
	f.bMeta, f.lMeta = imageMeta(t, layout, "base"), imageMeta(t, layout, "layered")

	f.files["lib/mcbake-test/plan.json"] = planJSON
	f.files["lib/mcbake-test/mc.json"] = mcJSON(t, mcs)
	f.files["lib/mcbake-test/mcd.tar"], f.files["lib/mcbake-test/absent"] = mcdPayload(t, ctx, opts)
	f.files["usrlocal/bin/mcbake-node"] = f.node
	f.execs["usrlocal/bin/mcbake-node"] = true
	unitFiles, err := templates.NodeUnits.ReadDir("node")
	must(t, err)
	for _, u := range unitFiles {
		b, err := templates.NodeUnits.ReadFile("node/" + u.Name())
		must(t, err)
		f.files["lib/mcbake-test/units/"+u.Name()] = b
	}
	return f
}

// imageMeta is the commit metadata ostree-ext records when it imports the
// image tagged tag of the OCI layout: its manifest digest, the manifest
// and the config.
func imageMeta(t *testing.T, layout, tag string) map[string]string {
	t.Helper()
	var idx v1.Index
	readJSON(t, filepath.Join(layout, "index.json"), &idx)
	for _, d := range idx.Manifests {
		if d.Annotations[v1.AnnotationRefName] != tag {
			continue
		}
		man := readBlob(t, layout, d.Digest)
		var m v1.Manifest
		must(t, json.Unmarshal(man, &m))
		return map[string]string{
			"ostree.manifest-digest":        d.Digest.String(),
			"ostree.manifest":               string(man),
			"ostree.container.image-config": string(readBlob(t, layout, m.Config.Digest)),
		}
	}
	t.Fatalf("no image tagged %s in %s", tag, layout)
	return nil
}

// mcdPayload is what the MCD writes on a node running the layered image:
// the rendering the image baked, as a tar of its /etc and /var paths, and
// the paths it removes.
func mcdPayload(t *testing.T, ctx context.Context, opts build.ImageOptions) ([]byte, []byte) {
	t.Helper()
	b, err := image.OpenBase(ctx, opts.Base, image.BaseOptions{Images: opts.Images, CacheDir: opts.CacheDir})
	must(t, err)
	defer b.Close()
	p, err := build.Prepare(context.Background(), b, opts.Options)
	must(t, err)
	entries := append([]render.Entry(nil), p.Rendered.Entries...)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Where() < entries[j].Where() })
	var buf bytes.Buffer
	var absent strings.Builder
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		where := e.Where()
		if zone := revert.ZoneOf(where); zone != revert.ZoneEtc && zone != revert.ZoneVar {
			continue
		}
		h := &tar.Header{Name: strings.TrimPrefix(where, "/"), Mode: int64(e.Mode), Uid: e.UID, Gid: e.GID, ModTime: time.Unix(0, 0)}
		switch e.Type {
		case manifest.Absent:
			fmt.Fprintln(&absent, where)
			continue
		case manifest.File:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Content))
		case manifest.Directory:
			h.Typeflag, h.Name = tar.TypeDir, h.Name+"/"
		case manifest.Symlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
		default:
			t.Fatalf("%s: the VM MachineConfig has no %s entries", where, e.Type)
		}
		must(t, tw.WriteHeader(h))
		if e.Type == manifest.File {
			_, err := tw.Write(e.Content)
			must(t, err)
		}
	}
	must(t, tw.Close())
	return buf.Bytes(), []byte(absent.String())
}

// mcJSON is the MachineConfigs as the node gets them.
func mcJSON(t *testing.T, mcs []*machineconfig.MachineConfig) []byte {
	t.Helper()
	b, err := mcs[0].JSON()
	must(t, err)
	return b
}

// nodeBinary builds the static node binary, as make node does.
func nodeBinary(t *testing.T, dir string) []byte {
	t.Helper()
	out := filepath.Join(dir, "mcbake-node")
	cmd := exec.Command("go", "build", "-trimpath", "-o", out, "./cmd/mcbake-node")
	cmd.Dir = "../../.." // the library's module, as make node builds it
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building mcbake-node: %v\n%s", err, b)
	}
	b, err := os.ReadFile(out)
	must(t, err)
	return b
}

func readBlob(t *testing.T, layout string, d digest.Digest) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout, "blobs", d.Algorithm().String(), d.Encoded()))
	must(t, err)
	return b
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	must(t, err)
	must(t, json.Unmarshal(b, v))
}

func mustRun(t *testing.T, name string, args ...string) {
	t.Helper()
	if out, err := exec.Command(name, args...).CombinedOutput(); err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
