package revert_test

import (
	"archive/tar"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/testing/nodetest"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/image"
)

// The end-to-end proof (issue 4, "Done when"): a layered image L built by
// build.Image on a generated base, a node on L whose /etc the
// machine-config-daemon wrote, and a revert to a base with real ostree's
// three-way /etc merge. The set of owned paths the reverted node has
// differently from what the MachineConfigs want must equal the set
// verify.Compare marks clobbered; then Rewrite repairs exactly those.

// same is the content of the e2e base's /etc/mcbake files and of the
// MachineConfig files that differ from them only in mode or owner.
const same = "same\n"

// e2eRegistries is what testdata/e2e-files.yaml writes to
// /etc/containers/registries.conf.
const e2eRegistries = "unqualified-search-registries = [\"registry.example.com\"]\nshort-name-mode = \"enforcing\"\n"

// e2eUnit is what testdata/e2e-units.yaml writes to
// /etc/systemd/system/mcbake-e2e.service.
const e2eUnit = "[Unit]\nDescription=mcbake e2e\n[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"

const workerFixture = "../../../testdata/machineconfigs/rendered-worker-aws.json"

// e2eBaseLayer adds to the default test base the files testdata's
// MachineConfigs differ from in mode only, in owner only, not at all, a
// directory they make 0750, the same link, one with another target and one
// with another owner, a unit file in /etc they mask, and symlinked parents:
// /etc/mcbake-alt -> mcbake and /etc/mcbake-usr -> ../usr/share/mcbake-e2e.
func e2eBaseLayer() testbase.Layer {
	return testbase.Layer{
		Files: []testbase.File{
			{Path: "etc/mcbake", Type: tar.TypeDir, Mode: 0o755},
			{Path: "etc/mcbake/mode-only.conf", Mode: 0o644, Content: []byte(same)},
			{Path: "etc/mcbake/owner-only.conf", Mode: 0o644, Content: []byte(same)},
			{Path: "etc/mcbake/group-only.conf", Mode: 0o644, Content: []byte(same)},
			{Path: "etc/mcbake/identical.conf", Mode: 0o644, Content: []byte(same)},
			{Path: "etc/mcbake/link-same", Type: tar.TypeSymlink, Mode: 0o777, Target: "/etc/mcbake/identical.conf"},
			{Path: "etc/mcbake/link-target", Type: tar.TypeSymlink, Mode: 0o777, Target: "/etc/mcbake/old-target"},
			{Path: "etc/mcbake/link-owner", Type: tar.TypeSymlink, Mode: 0o777, Target: "/etc/mcbake/identical.conf"},
			{Path: "etc/mcbake-alt", Type: tar.TypeSymlink, Mode: 0o777, Target: "mcbake"},
			{Path: "etc/mcbake-usr", Type: tar.TypeSymlink, Mode: 0o777, Target: "../usr/share/mcbake-e2e"},
			{Path: "etc/mcbake-dir", Type: tar.TypeDir, Mode: 0o755},
			{Path: "usr/share/mcbake-e2e/kept.conf", Mode: 0o644, Content: []byte(same)},
			{Path: "etc/systemd/system/mcbake-base.service", Mode: 0o644, Content: []byte("[Service]\nExecStart=/usr/bin/true\n")},
			// Masked by the base; e2e-inputs.yaml unmasks it.
			{Path: "usr/lib/systemd/system/mcbake-masked.service", Mode: 0o644, Content: []byte("[Service]\nExecStart=/usr/bin/true\n")},
			{Path: "etc/systemd/system/mcbake-masked.service", Type: tar.TypeSymlink, Mode: 0o777, Target: "/dev/null"},
		},
		Comment: "verify e2e: files the MachineConfigs change in mode or owner only, or not at all",
	}
}

// bumpLayer turns the e2e base B1 into the newer base B2: it changes some
// paths the hand-written L owns to what L has (registries.conf, the mode
// of mode-only.conf, the nested directories and deep.conf, the new unit,
// lost.conf), removes one L keeps identical (identical.conf) and the
// openvswitch link L removes, and changes /usr/local content and the
// metadata of /etc/machine-config-daemon, which L creates.
func bumpLayer() testbase.Layer {
	return testbase.Layer{
		Files: []testbase.File{
			{Path: "etc/containers/registries.conf", Mode: 0o644, Content: []byte(e2eRegistries)},
			{Path: "etc/mcbake/mode-only.conf", Mode: 0o600, Content: []byte(same)},
			{Path: "etc/mcbake-new/a/b/c/deep.conf", Mode: 0o644, Content: []byte("deep\n")},
			{Path: "etc/systemd/system/mcbake-e2e.service", Mode: 0o644, Content: []byte(e2eUnit)},
			{Path: "usr/share/mcbake-e2e/lost.conf", Mode: 0o644, Content: []byte(same)},
			{Path: "var/usrlocal/bin/mcbake-tool", Mode: 0o755, Content: []byte("#!/bin/sh\necho newer base\n")},
			{Path: "etc/machine-config-daemon", Type: tar.TypeDir, Mode: 0o700, GID: 1000},
		},
		Whiteouts: []string{"etc/mcbake/identical.conf", "etc/systemd/system/multi-user.target.wants/openvswitch.service"},
		Comment:   "verify e2e: the newer base",
	}
}

// e2eImage is a built layered image and what its node needs.
type e2eImage struct {
	ref    string
	result *build.Result
	// rendered is the rendering the image baked, with contents: what
	// the machine-config-daemon writes on the node.
	rendered []render.Entry
	root     string // unpacked root filesystem
	mcs      []*machineconfig.MachineConfig
}

// e2eBase is a generated base image, indexed and unpacked.
type e2eBase struct {
	ref    string
	layout string // the OCI layout directory, tagged latest
	img    *image.Base
	root   string
}

// TestRevertEndToEnd builds two layered images on a generated base B1 (the
// rendered worker fixture, and testdata's hand-written MachineConfigs),
// and reverts a node on each to B1, and the hand-written one also to the
// newer base B2 (base bump), with real ostree; see the comment at the top
// of the file.
func TestRevertEndToEnd(t *testing.T) {
	if ok, why := ostreetest.Available(); !ok {
		t.Skip("ostreetest: " + why)
	}
	start := time.Now()
	e := newEnv(t)
	b1 := e.e2eBase(t, "b1", e2eBaseLayer())
	b2 := e.e2eBase(t, "b2", e2eBaseLayer(), bumpLayer())
	worker := e.e2eBuild(t, "worker", b1, workerFixture)
	hand := e.e2eBuild(t, "hand", b1, "testdata/e2e-files.yaml", "testdata/e2e-units.yaml")
	inputs := e.e2eBuildMCs(t, "inputs", b1, loadPoolMCs(t, "infra", "testdata/e2e-inputs.yaml"))
	checkInputs(t, inputs)
	t.Logf("bases and images ready in %v", time.Since(start).Round(time.Millisecond))
	cases := []struct {
		name string
		l    *e2eImage
		b    *e2eBase
		// want pins the outcome of some paths (as requested), so that
		// the comparison with ostree cannot pass with both sides empty.
		want map[string]revert.Outcome
	}{
		{name: "rendered-worker-aws", l: worker, b: b1, want: map[string]revert.Outcome{
			"/etc/containers/registries.conf":                                 revert.Reverted,
			"/etc/kubernetes/kubelet.conf":                                    revert.Removed,
			"/etc/modules-load.d/iptables.conf":                               revert.Kept,
			"/etc/systemd/system/kubelet.service.d/20-logging.conf":           revert.Removed,
			"/etc/systemd/system/multi-user.target.wants/openvswitch.service": revert.Restored,
			"/etc/NetworkManager/dispatcher.d/pre-up.d/10-ofport-request.sh":  revert.Removed,
			"/etc/kubernetes/kubelet-plugins/volume/exec/.dummy":              revert.Removed,
			"/var/lib/kubelet/config.json":                                    revert.Untouched,
			"/usr/local/bin/kubenswrapper":                                    revert.Untouched,
			render.CurrentConfig:                                              revert.Kept,
			"/etc/machine-config-daemon":                                      revert.Kept,
		}},
		{name: "hand-written", l: hand, b: b1, want: map[string]revert.Outcome{
			"/etc/mcbake/mode-only.conf":                                      revert.Reverted,
			"/etc/mcbake/owner-only.conf":                                     revert.Reverted,
			"/etc/mcbake/group-only.conf":                                     revert.Reverted,
			"/etc/mcbake/identical.conf":                                      revert.Kept,
			"/etc/modules-load.d/iptables.conf":                               revert.Kept,
			"/etc/containers/registries.conf":                                 revert.Reverted,
			"/etc/mcbake-new":                                                 revert.Removed,
			"/etc/mcbake-new/a/b":                                             revert.Removed,
			"/etc/mcbake-new/a/b/c/deep.conf":                                 revert.Removed,
			"/etc/mcbake-dir":                                                 revert.Reverted,
			"/etc/mcbake/link-new":                                            revert.Removed,
			"/etc/mcbake/link-same":                                           revert.Kept,
			"/etc/mcbake/link-target":                                         revert.Reverted,
			"/etc/mcbake/link-owner":                                          revert.Reverted,
			"/etc/mcbake-alt/via-link.conf":                                   revert.Removed,
			"/etc/mcbake-usr/other.conf":                                      revert.Lost,
			render.CurrentConfig:                                              revert.Kept,
			"/usr/local/bin/mcbake-tool":                                      revert.Untouched,
			"/var/lib/mcbake/state.json":                                      revert.Untouched,
			"/opt/mcbake/opt.conf":                                            revert.Untouched,
			"/usr/share/mcbake-e2e/kept.conf":                                 revert.Kept,
			"/usr/share/mcbake-e2e/lost.conf":                                 revert.Lost,
			render.SSHKeysFile:                                                revert.Untouched,
			"/etc/systemd/system/crio.service.d":                              revert.Removed,
			"/etc/systemd/system/crio.service.d/10-e2e.conf":                  revert.Removed,
			"/etc/systemd/system/multi-user.target.wants/chronyd.service":     revert.Kept,
			"/etc/systemd/system/zincati.service":                             revert.Removed,
			"/etc/systemd/system/cri-o.service":                               revert.Kept,
			"/etc/systemd/system/mcbake-base.service":                         revert.Reverted,
			"/etc/systemd/system/multi-user.target.wants/openvswitch.service": revert.Restored,
			"/etc/systemd/system/sockets.target.wants":                        revert.Removed,
			"/etc/systemd/system/sockets.target.wants/docker.socket":          revert.Removed,
			"/etc/systemd/system/multi-user.target.wants/sshd.service":        revert.Kept,
			"/etc/systemd/system/mcbake-e2e.service":                          revert.Removed,
			"/etc/systemd/system/multi-user.target.wants/mcbake-e2e.service":  revert.Removed,
		}},
		{name: "custom pool, gzip override, unmask", l: inputs, b: b1, want: map[string]revert.Outcome{
			"/etc/mcbake-inputs/override.conf":          revert.Removed,
			"/etc/mcbake-inputs/gzip-only.conf":         revert.Removed,
			"/etc/mcbake-inputs/pool.conf":              revert.Removed,
			"/etc/systemd/system/mcbake-masked.service": revert.Restored,
			render.CurrentConfig:                        revert.Kept,
		}},
		{name: "base bump", l: hand, b: b2, want: map[string]revert.Outcome{
			"/etc/containers/registries.conf": revert.Kept,
			"/etc/mcbake/identical.conf":      revert.Removed,
			"/etc/mcbake/mode-only.conf":      revert.Kept,
			"/etc/mcbake/owner-only.conf":     revert.Reverted,
			"/etc/mcbake-new":                 revert.Kept,
			"/etc/mcbake-new/a":               revert.Kept,
			"/etc/mcbake-new/a/b":             revert.Reverted,
			"/etc/mcbake-new/a/b/c":           revert.Kept,
			"/etc/mcbake-new/a/b/c/deep.conf": revert.Kept,
			"/etc/mcbake-new/top.conf":        revert.Removed,
			"/etc/mcbake/link-same":           revert.Kept,
			"/etc/systemd/system/multi-user.target.wants/openvswitch.service": revert.Kept,
			"/etc/systemd/system/mcbake-e2e.service":                          revert.Kept,
			"/etc/systemd/system/multi-user.target.wants/mcbake-e2e.service":  revert.Removed,
			"/usr/share/mcbake-e2e/lost.conf":                                 revert.Kept,
			"/usr/local/bin/mcbake-tool":                                      revert.Untouched,
			"/etc/machine-config-daemon":                                      revert.Kept,
		}},
	}
	for _, tt := range cases {
		t.Run(tt.name, func(t *testing.T) {
			caseStart := time.Now()
			stored := storedConfig(t, tt.l.mcs, tt.b.ref)
			if baked, ok := tt.l.result.Manifest.Lookup(render.CurrentConfig); !ok || baked.Digest == digest.FromBytes(stored) {
				t.Fatalf("the image baked no %s, or the same one the MCD stores on the revert", render.CurrentConfig)
			}
			newRoot := ostreetest.Revert(t, tt.l.root, tt.b.root, mcdWrite(tt.l.rendered, stored))
			rep := diff(t, tt.l.result.Manifest, manifest.ImageRef{Reference: tt.l.ref, Digest: tt.l.result.Digest},
				manifest.ImageRef{Reference: tt.b.ref, Digest: tt.b.img.Digest()}, tt.b.img.Tree())
			checkOutcomes(t, rep, tt.want)
			predicted := clobberedRequested(rep)
			onNode := clobberedOnNode(t, newRoot, wantOnNode(tt.l.result.Manifest, stored))
			if diff := cmp.Diff(onNode, predicted); diff != "" {
				t.Errorf("owned paths ostree left different from the MachineConfigs (-ostree +verify.Compare):\n%s\nostree: %q\nverify: %q",
					diff, onNode, predicted)
			}
			e2eRewrite(t, newRoot, rep, tt.l, tt.l.result.Manifest, stored)
			e2ePrepare(t, rep, tt.l, tt.b, stored)
			t.Logf("%s: %d owned paths, %d clobbered by ostree and predicted; revert, diff and rewrite in %v",
				tt.name, len(rep.Entries), len(predicted), time.Since(caseStart).Round(time.Millisecond))
		})
	}
}

// e2ePrepare stages the base on a node that runs L, whose /etc the MCD
// wrote, and checks that node.Prepare writes exactly the paths the plan
// made from CI's prediction lists (the agreement of the node's local
// computation with mcbake diff).
func e2ePrepare(t *testing.T, rep *revert.Report, l *e2eImage, b *e2eBase, stored []byte) {
	t.Helper()
	st := ostreetest.Stage(t, l.root, b.root, mcdWrite(l.rendered, stored))
	s, err := node.OpenSysroot(st.Sysroot)
	if err != nil {
		t.Fatal(err)
	}
	booted, err := s.Deployment(st.Booted)
	if err != nil {
		t.Fatal(err)
	}
	staged, err := s.Deployment(st.Staged)
	if err != nil {
		t.Fatal(err)
	}
	rec, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: l.mcs})
	if err != nil {
		t.Fatalf("node.Prepare: %v", err)
	}
	plan, err := revert.NewPlan(rep)
	if err != nil {
		t.Fatal(err)
	}
	var planned, written []string
	for _, pe := range plan.Rewrite {
		planned = append(planned, pe.Path)
	}
	for _, c := range rec.Written() {
		if !c.ConfigDir {
			written = append(written, c.Path)
		}
	}
	written = slices.DeleteFunc(written, func(p string) bool { return parentOfWrites(rep, p, written) })
	sort.Strings(planned)
	sort.Strings(written)
	if diff := cmp.Diff(planned, written, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("node.Prepare's writes and the plan from CI's prediction differ (-plan +prepare):\n%s", diff)
	}
}

// parentOfWrites reports whether p is a directory that node.Prepare writes
// only to hold its other writes, where the prediction says kept because
// the merge recreates it from the node's copy (a path below it that the
// node changed): the staged /etc needs it before finalization, the
// reverted node has it either way. The config directory is the one case
// for mcbake's own images; images built by others have more.
func parentOfWrites(rep *revert.Report, p string, written []string) bool {
	below := slices.ContainsFunc(written, func(w string) bool { return strings.HasPrefix(w, p+"/") })
	for _, e := range rep.Entries {
		if e.Path == p {
			return below && e.Type == manifest.Directory && e.Outcome == revert.Kept
		}
	}
	return false
}

// e2eBase writes a base with extra layers, indexes and unpacks it.
func (e *env) e2eBase(t *testing.T, name string, extra ...testbase.Layer) *e2eBase {
	t.Helper()
	ref := e.writeBase(t, name, testbase.Options{ExtraLayers: extra})
	root := filepath.Join(e.dir, name+"-root")
	ostreetest.Unpack(t, filepath.Join(e.dir, name), "latest", root)
	return &e2eBase{ref: ref, layout: filepath.Join(e.dir, name), img: e.openBase(t, ref), root: root}
}

// e2eBuild builds the layered image of the MachineConfig files on b and
// unpacks it.
func (e *env) e2eBuild(t *testing.T, name string, b *e2eBase, files ...string) *e2eImage {
	t.Helper()
	return e.e2eBuildMCs(t, name, b, loadMCs(t, files...))
}

// e2eBuildMCs builds the layered image of mcs on b and unpacks it.
func (e *env) e2eBuildMCs(t *testing.T, name string, b *e2eBase, mcs []*machineconfig.MachineConfig) *e2eImage {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	opts := build.ImageOptions{Output: "oci:" + dir + ":latest", Options: build.Options{Base: b.ref, MachineConfigs: mcs, Images: e.images,
		CacheDir: e.cache, Timestamp: time.Unix(1700000000, 0)}}
	res, err := build.Image(context.Background(), opts)
	if err != nil {
		t.Fatalf("build.Image(%s): %v", name, err)
	}
	p, err := build.Prepare(context.Background(), b.img, opts.Options)
	if err != nil {
		t.Fatalf("build.Prepare(%s): %v", name, err)
	}
	root := filepath.Join(e.dir, name+"-root")
	ostreetest.Unpack(t, dir, "latest", root)
	return &e2eImage{ref: opts.Output, result: res, rendered: p.Rendered.Entries, root: root, mcs: mcs}
}

// checkOutcomes checks the outcome Compare gave each path of want.
func checkOutcomes(t *testing.T, rep *revert.Report, want map[string]revert.Outcome) {
	t.Helper()
	got := map[string]revert.Outcome{}
	for _, e := range rep.Entries {
		if _, ok := want[e.Want.Path]; ok {
			got[e.Want.Path] = e.Outcome
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Compare outcomes (-want +got):\n%s", diff)
	}
}

// clobberedRequested returns the requested paths the report marks
// clobbered, sorted.
func clobberedRequested(rep *revert.Report) []string {
	out := []string{}
	for _, e := range rep.Entries {
		if e.Clobbered {
			out = append(out, e.Want.Path)
		}
	}
	sort.Strings(out)
	return out
}

// storedConfig is what the machine-config-daemon stores at
// render.CurrentConfig when it reverts the node to the base ref: the same
// MachineConfigs with osImageURL naming the base, so never what L baked.
func storedConfig(t *testing.T, mcs []*machineconfig.MachineConfig, ref string) []byte {
	t.Helper()
	m := machineconfig.Merge(mcs)
	m.OSImageURL = ref
	b, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// wantOnNode is the manifest with the stored config's digest at
// render.CurrentConfig: what the node must have after the revert.
func wantOnNode(m *manifest.Manifest, stored []byte) *manifest.Manifest {
	out := *m
	out.Entries = append([]manifest.Entry(nil), m.Entries...)
	for i := range out.Entries {
		if out.Entries[i].Path == render.CurrentConfig {
			out.Entries[i].Digest = digest.FromBytes(stored)
			out.Entries[i].Size = int64(len(stored))
		}
	}
	return &out
}

// mcdWrite writes the rendered entries into a node on L as the
// machine-config-daemon does when it reverts the node to the base: /etc
// entries into the deployment's /etc, with stored (the new config) at
// render.CurrentConfig,
// /var entries (after /usr/local, /home, /opt... resolved into /var) into
// the stateroot's /var; files replaced atomically (a new inode), with
// their content, mode and owners; directories created or chmod/chowned;
// symlinks replaced; absent entries removed. It skips what a node cannot
// write (/usr, and paths ostree never deploys).
func mcdWrite(entries []render.Entry, stored []byte) func(etc string) error {
	sorted := append([]render.Entry(nil), entries...)
	for i := range sorted {
		if sorted[i].Path == render.CurrentConfig {
			sorted[i].Content = stored
		}
	}
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Where() < sorted[j].Where() })
	return func(etc string) error {
		varDir := ostreetest.VarDir(filepath.Dir(etc))
		for _, e := range sorted {
			host, ok := nodePath(e.Where(), etc, varDir)
			if !ok {
				continue
			}
			if err := writeAsMCD(host, e); err != nil {
				return fmt.Errorf("%s: %w", e.Where(), err)
			}
		}
		return nil
	}
}

// nodePath maps a resolved image path to the host path of the node's /etc
// or /var; ok is false elsewhere.
func nodePath(p, etc, varDir string) (string, bool) {
	for _, z := range []struct{ dir, host string }{{"/etc", etc}, {"/var", varDir}} {
		if p == z.dir || strings.HasPrefix(p, z.dir+"/") {
			return filepath.Join(z.host, strings.TrimPrefix(p, z.dir)), true
		}
	}
	return "", false
}

func writeAsMCD(host string, e render.Entry) error {
	if e.Type != manifest.Absent {
		if err := os.MkdirAll(filepath.Dir(host), 0o755); err != nil {
			return err
		}
	}
	switch e.Type {
	case manifest.File:
		return replaceFile(host, e)
	case manifest.Directory:
		if err := os.Mkdir(host, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return err
		}
		if err := os.Lchown(host, e.UID, e.GID); err != nil {
			return err
		}
		return unix.Chmod(host, uint32(e.Mode))
	case manifest.Symlink:
		if err := os.Remove(host); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Symlink(e.Target, host); err != nil {
			return err
		}
		return os.Lchown(host, e.UID, e.GID)
	case manifest.Absent:
		if err := os.Remove(host); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		return nil
	}
	return fmt.Errorf("the e2e node cannot write a %s", e.Type)
}

// replaceFile writes a new file next to host and renames it over host.
func replaceFile(host string, e render.Entry) (err error) {
	tmp := filepath.Join(filepath.Dir(host), ".mcd-"+filepath.Base(host))
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if err := os.WriteFile(tmp, e.Content, 0o600); err != nil {
		return err
	}
	if err := os.Chown(tmp, e.UID, e.GID); err != nil {
		return err
	}
	// unix.Chmod keeps setuid, setgid and sticky bits as the MCD does.
	if err := unix.Chmod(tmp, uint32(e.Mode)); err != nil {
		return err
	}
	return os.Rename(tmp, host)
}

// clobberedOnNode returns the requested paths of the manifest's entries
// that the reverted node (deployment root newRoot, /var at its VarDir) has
// differently from the entry, sorted. Each path is resolved through the
// new deployment's own symlinks; /etc and /usr are read in the deployment,
// /var in the stateroot's /var. Paths ostree never deploys are skipped.
func clobberedOnNode(t *testing.T, newRoot string, m *manifest.Manifest) []string {
	t.Helper()
	deploy, varFS := nodetest.OpenRoot(t, newRoot), nodetest.OpenRoot(t, ostreetest.VarDir(newRoot))
	out := []string{}
	for _, me := range m.Entries {
		rp := nodetest.Resolve(t, newRoot, me)
		fsys, p := deploy, rp
		switch {
		case isDropped(rp):
			continue
		case rp == "/var" || strings.HasPrefix(rp, "/var/"):
			fsys, p = varFS, "/"+strings.TrimPrefix(strings.TrimPrefix(rp, "/var"), "/")
		}
		in, ok, err := fsys.Lstat(p)
		if err != nil {
			t.Fatalf("lstat %s on the reverted node: %v", rp, err)
		}
		if !nodeMatches(t, me, in, ok) {
			out = append(out, me.Path)
		}
	}
	sort.Strings(out)
	return out
}

func isDropped(p string) bool {
	for _, d := range []string{"/run", "/tmp", "/proc", "/sys", "/dev"} {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}

// nodeMatches reports whether the on-node entry is what me wants: type,
// content or target, mode (not for symlinks) and owners.
func nodeMatches(t *testing.T, me manifest.Entry, in manifest.Entry, ok bool) bool {
	t.Helper()
	if me.Type == manifest.Absent {
		return !ok
	}
	if !ok {
		return false
	}
	owners := in.UID == me.UID && in.GID == me.GID
	switch me.Type {
	case manifest.File:
		return in.Type == manifest.File && in.Digest == me.Digest && in.Mode == me.Mode && owners
	case manifest.Directory:
		return in.Type == manifest.Directory && in.Mode == me.Mode && owners
	case manifest.Symlink:
		return in.Type == manifest.Symlink && in.Target == me.Target && owners
	}
	t.Fatalf("%s: the e2e test has no %s entries", me.Path, me.Type)
	return false
}

// e2eRewrite applies the revert plan to the reverted deployment as
// `mcbake rewrite` does (rendering against the node's root), then checks
// that OnDisk finds no /etc mismatch, that ostree's clobbers of the owned
// paths are all gone but the lost ones, and that a second run changes
// nothing.
func e2eRewrite(t *testing.T, newRoot string, rep *revert.Report, l *e2eImage, owned *manifest.Manifest, stored []byte) {
	t.Helper()
	plan, err := revert.NewPlan(rep)
	if err != nil {
		t.Fatalf("NewPlan: %v", err)
	}
	root := nodetest.OpenRoot(t, newRoot)
	acts, err := node.Rewrite(context.Background(), root, plan, l.mcs, node.RewriteOptions{})
	if err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	if len(acts) != len(plan.Rewrite) {
		t.Errorf("Rewrite returned %d actions for %d planned paths", len(acts), len(plan.Rewrite))
	}
	for _, a := range acts {
		if a.Op == node.Unchanged {
			t.Errorf("Rewrite left %s unchanged, but ostree clobbered it", a.Path)
		}
	}
	od, err := node.Validate(context.Background(), root, l.mcs)
	if err != nil {
		t.Fatalf("Validate: %v", err)
	}
	for _, m := range od.Mismatches {
		if strings.HasPrefix(m.Path, "/etc/") {
			t.Errorf("OnDisk after Rewrite: %s %v: want %s, got %s", m.Path, m.Kinds, m.Want, m.Got)
		}
	}
	var lost []string
	for _, pe := range plan.Lost {
		lost = append(lost, pe.MachineConfigPath())
	}
	// The certificate writer's files are the node's to rewrite, never a
	// plan's.
	for _, e := range rep.Entries {
		if e.Managed && e.Clobbered {
			lost = append(lost, e.Want.Path)
		}
	}
	sort.Strings(lost)
	if diff := cmp.Diff(lost, clobberedOnNode(t, newRoot, wantOnNode(owned, stored)), cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("owned paths still different after Rewrite, want only the lost and the managed ones (-lost +got):\n%s", diff)
	}
	again, err := node.Rewrite(context.Background(), root, plan, l.mcs, node.RewriteOptions{})
	if err != nil {
		t.Fatalf("second Rewrite: %v", err)
	}
	for _, a := range again {
		if a.Op != node.Unchanged {
			t.Errorf("second Rewrite: %s: op %s %v, want %s", a.Path, a.Op, a.Kinds, node.Unchanged)
		}
	}
}

// loadPoolMCs loads the MachineConfigs of files for the pool.
func loadPoolMCs(t *testing.T, pool string, files ...string) []*machineconfig.MachineConfig {
	t.Helper()
	mcs, err := machineconfig.LoadForPool(files, nil, pool)
	if err != nil {
		t.Fatalf("machineconfig.LoadForPool(%v, %s): %v", files, pool, err)
	}
	return mcs
}

// checkInputs checks what the image of e2e-inputs.yaml baked: the infra
// pool's own file, the later plain file over the earlier gzip one, the
// gzip one decompressed, and no mask left.
func checkInputs(t *testing.T, l *e2eImage) {
	t.Helper()
	for p, want := range map[string]string{
		"etc/mcbake-inputs/pool.conf":      "infra\n",
		"etc/mcbake-inputs/override.conf":  "plain\n",
		"etc/mcbake-inputs/gzip-only.conf": "zipped\n",
	} {
		// The image's /etc is its /usr/etc once ostree deploys it; the
		// unpacked image has it at etc.
		got, err := os.ReadFile(filepath.Join(l.root, p))
		if err != nil || string(got) != want {
			t.Errorf("the image of e2e-inputs.yaml has %s = %q, %v; want %q", p, got, err, want)
		}
	}
	if _, err := os.Lstat(filepath.Join(l.root, "etc/systemd/system/mcbake-masked.service")); !os.IsNotExist(err) {
		t.Errorf("the image of e2e-inputs.yaml keeps the base's mask of mcbake-masked.service (lstat: %v)", err)
	}
}
