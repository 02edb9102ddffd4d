package main

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
)

func TestMain(m *testing.M) {
	if image.InitReexec() {
		return
	}
	// The node script test runs this test binary as mcbake.
	if os.Getenv("MCBAKE_TEST_AS_CLI") == "1" {
		code := run() // with main's signal handling
		if f := os.Getenv("MCBAKE_TEST_PEAK_FILE"); f != "" {
			writePeak(f)
		}
		os.Exit(code)
	}
	os.Exit(m.Run())
}

const workerMC = "../../../testdata/machineconfigs/rendered-worker-aws.json"

// env is one test's isolated world: a generated base, a cache and TMPDIR.
type env struct {
	t     *testing.T
	dir   string
	cache string
	base  string // oci:DIR:latest
	// extra flags for every command that takes image flags
	extra []string
	// policy is the signature policy file ("" = testdata/policy.json)
	policy string
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	t.Setenv("TMPDIR", filepath.Join(dir, "tmp"))
	t.Setenv("HOME", filepath.Join(dir, "home"))
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "xdg"))
	for _, d := range []string{"tmp", "home"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := testbase.Write(filepath.Join(dir, "base"), testbase.Options{}); err != nil {
		t.Fatal(err)
	}
	return &env{t: t, dir: dir, cache: filepath.Join(dir, "cache"), base: "oci:" + filepath.Join(dir, "base") + ":latest"}
}

// run runs mcbake with args (plus the test policy and cache for commands
// that take them) and returns the exit code, stdout and stderr.
func (e *env) run(args ...string) (int, string, string) {
	e.t.Helper()
	var out, errb bytes.Buffer
	code := execute(context.Background(), args, strings.NewReader(""), &out, &errb)
	return code, out.String(), errb.String()
}

func (e *env) imageArgs() []string {
	policy := e.policy
	if policy == "" {
		policy = "testdata/policy.json"
	}
	return append([]string{"--signature-policy", policy, "--cache-dir", e.cache}, e.extra...)
}

func (e *env) build(base, out string, mcs ...string) (int, string, string) {
	args := append([]string{"build", "--quiet", "--base", base, "-o", out}, e.imageArgs()...)
	for _, mc := range mcs {
		args = append(args, "-f", mc)
	}
	return e.run(args...)
}

func (e *env) mustBuild(t *testing.T, base, out string, mcs ...string) string {
	t.Helper()
	code, stdout, stderr := e.build(base, out, mcs...)
	if code != 0 {
		t.Fatalf("build %s -> %s: exit %d\n%s", base, out, code, stderr)
	}
	return strings.TrimSpace(stdout)
}

func TestBuildIsReproducibleAndReadable(t *testing.T) {
	e := newEnv(t)
	mcs := []string{workerMC, "testdata/owners-and-links.yaml"}
	a := e.mustBuild(t, e.base, "oci:"+filepath.Join(e.dir, "a")+":latest", mcs...)
	b := e.mustBuild(t, e.base, "oci:"+filepath.Join(e.dir, "b")+":x", mcs...)
	// Into the base's own layout, with a cold cache: still the same digest.
	os.RemoveAll(e.cache)
	c := e.mustBuild(t, e.base, "oci:"+filepath.Join(e.dir, "base")+":layered", mcs...)
	// The same base spelled as a relative path: still the same digest.
	wd, _ := os.Getwd()
	relBase, err := filepath.Rel(wd, filepath.Join(e.dir, "base"))
	if err != nil {
		t.Fatal(err)
	}
	d := e.mustBuild(t, "oci:"+relBase+":latest", "oci:"+filepath.Join(e.dir, "d")+":latest", mcs...)
	if a != b || a != c || a != d {
		t.Fatalf("digests differ: %s, %s, %s, %s", a, b, c, d)
	}
	code, out, stderr := e.run(append([]string{"manifest", "oci:" + filepath.Join(e.dir, "a") + ":latest"}, e.imageArgs()...)...)
	if code != 0 {
		t.Fatalf("manifest: exit %d: %s", code, stderr)
	}
	schematest.Validate(t, "manifest", []byte(out))
	m, err := manifest.Unmarshal([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Entries) < 100 || m.Base == nil || m.Base.Digest == "" {
		t.Fatalf("manifest has %d entries, base %v", len(m.Entries), m.Base)
	}
	checkLayerMatchesManifest(t, filepath.Join(e.dir, "a"), m)
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Skip("skopeo not installed (make test installs it): skipping skopeo inspect/copy")
	}
	for _, args := range [][]string{
		{"inspect", "oci:" + filepath.Join(e.dir, "a") + ":latest"},
		{"copy", "--insecure-policy", "oci:" + filepath.Join(e.dir, "a") + ":latest", "oci:" + filepath.Join(e.dir, "skopeo-copy") + ":latest"},
	} {
		if out, err := exec.Command("skopeo", args...).CombinedOutput(); err != nil {
			t.Fatalf("skopeo %v: %v\n%s", args, err, out)
		}
	}
}

// checkLayerMatchesManifest reads the image's top layer and checks that
// every owned entry is there with the manifest's type, mode, owners,
// content digest and link target, and absent entries are whiteouts.
func checkLayerMatchesManifest(t *testing.T, layout string, m *manifest.Manifest) {
	t.Helper()
	im, err := image.Open(context.Background(), "oci:"+layout+":latest", image.Options{InsecurePolicy: true, CacheDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if got, want := im.Labels()[image.LabelMachineConfigs], "60-owners-and-links,rendered-worker-aws-fixture"; got != want {
		t.Errorf("label %s = %q, want %q", image.LabelMachineConfigs, got, want)
	}
	rc, err := im.TopLayer(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	got := readLayer(t, rc)
	for _, e := range m.Entries {
		name := strings.TrimPrefix(e.Where(), "/")
		want := layerEntry{Type: string(e.Type), Mode: uint32(e.Mode), UID: e.UID, GID: e.GID, Digest: string(e.Digest), Target: e.Target}
		switch e.Type {
		case manifest.Absent:
			name, want = filepath.Join(filepath.Dir(name), ".wh."+filepath.Base(name)), layerEntry{Type: "file"}
		case manifest.Hardlink:
			want = layerEntry{Type: "hardlink", Target: strings.TrimPrefix(e.Target, "/")}
		}
		if diff := cmp.Diff(want, got[name]); diff != "" {
			t.Errorf("layer entry %s (-want +got):\n%s", name, diff)
		}
	}
	if _, ok := got["usr/share/mcbake/manifest.json"]; !ok {
		t.Errorf("layer lacks usr/share/mcbake/manifest.json")
	}
}

type layerEntry struct {
	Type     string
	Mode     uint32
	UID, GID int
	Digest   string
	Target   string
}

func readLayer(t *testing.T, r io.Reader) map[string]layerEntry {
	t.Helper()
	dr, err := decompress.Reader(r)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]layerEntry{}
	tr := tar.NewReader(dr)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		// Without SOURCE_DATE_EPOCH, every mtime is the base's creation.
		if h.Uname != "" || h.Gname != "" || !h.ModTime.Equal(testbase.Created) {
			t.Errorf("%s: uname %q gname %q mtime %v: want numeric owners only and the base's creation time %v", h.Name, h.Uname, h.Gname, h.ModTime, testbase.Created)
		}
		name := strings.TrimSuffix(h.Name, "/")
		le := layerEntry{Mode: uint32(h.Mode), UID: h.Uid, GID: h.Gid}
		switch h.Typeflag {
		case tar.TypeReg:
			le.Type = "file"
			b, _ := io.ReadAll(tr)
			if strings.Contains(name, ".wh.") {
				le = layerEntry{Type: "file"}
			} else {
				le.Digest = digest.FromBytes(b).String()
			}
		case tar.TypeDir:
			le.Type = "directory"
		case tar.TypeSymlink:
			le.Type, le.Target = "symlink", h.Linkname
		case tar.TypeLink:
			le = layerEntry{Type: "hardlink", Target: h.Linkname}
		}
		out[name] = le
	}
}

// TestBuildFromEveryTransport writes the layered image to each offline
// transport, then uses each result as the base of another build and reads
// that back.
func TestBuildFromEveryTransport(t *testing.T) {
	e := newEnv(t)
	refs := map[string]string{
		"oci-archive":    "oci-archive:" + filepath.Join(e.dir, "img.oci.tar") + ":latest",
		"docker-archive": "docker-archive:" + filepath.Join(e.dir, "img.docker.tar"),
		"dir":            "dir:" + filepath.Join(e.dir, "img.dir"),
	}
	if os.Geteuid() == 0 {
		store := filepath.Join(e.dir, "store")
		refs["containers-storage"] = "containers-storage:localhost/mcbake-test:latest"
		e.extra = []string{"--storage-root", store + "/root", "--storage-runroot", store + "/run", "--storage-driver", "vfs"}
	} else {
		t.Log("not root: skipping containers-storage (needs root)")
	}
	for name, ref := range refs {
		t.Run(name, func(t *testing.T) {
			baseDigest := e.mustBuild(t, e.base, ref, "testdata/owners-and-links.yaml")
			out := "oci:" + filepath.Join(e.dir, "from-"+name) + ":latest"
			e.mustBuild(t, ref, out, workerMC)
			code, stdout, stderr := e.run(append([]string{"manifest", out}, e.imageArgs()...)...)
			if code != 0 {
				t.Fatalf("manifest: exit %d: %s", code, stderr)
			}
			m, err := manifest.Unmarshal([]byte(stdout))
			if err != nil {
				t.Fatal(err)
			}
			// Only names that mean the same on any machine are recorded.
			wantName := map[string]string{"containers-storage": "localhost/mcbake-test:latest"}[name]
			if m.Base.Reference != wantName {
				t.Errorf("manifest base = %q, want %q", m.Base.Reference, wantName)
			}
			if name != "docker-archive" && m.Base.Digest.String() != baseDigest {
				t.Errorf("manifest base digest = %s, want %s", m.Base.Digest, baseDigest)
			}
		})
	}
}

func TestBuildBadInput(t *testing.T) {
	e := newEnv(t)
	corrupt := filepath.Join(e.dir, "corrupt")
	truncated := filepath.Join(e.dir, "truncated")
	for _, d := range []string{corrupt, truncated} {
		if out, err := exec.Command("cp", "-a", filepath.Join(e.dir, "base"), d).CombinedOutput(); err != nil {
			t.Fatalf("cp: %v %s", err, out)
		}
	}
	damageLargestLayer(t, corrupt, func(b []byte) []byte { b[len(b)/2] ^= 0xff; return b })
	damageLargestLayer(t, truncated, func(b []byte) []byte { return b[:len(b)/2] })
	tests := []struct {
		name, base, mc, want string
	}{
		{"missing base", "oci:" + filepath.Join(e.dir, "nope") + ":latest", workerMC, "nope"},
		{"unknown transport", "quay.io/openshift/rhcos:4.18", workerMC, "missing transport (use one of oci:"},
		{"corrupt base blob", "oci:" + corrupt + ":latest", workerMC, "corrupt:latest: layer sha256:"},
		{"truncated base blob", "oci:" + truncated + ":latest", workerMC, "truncated:latest: layer sha256:"},
		{"file where the base has a directory", e.base, "testdata/file-over-dir.yaml", "testdata/file-over-dir.yaml: 50-file-over-dir: spec.config.storage.files[0]"},
		{"unknown owner names", e.base, "testdata/unknown-owner.yaml", `unknown user "nosuchuser"`},
		{"refused field", e.base, "testdata/refused.yaml", "testdata/refused.yaml: 50-refused: spec.config.storage.files[0].append: appending is not supported"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dest := filepath.Join(e.dir, "out-"+strings.ReplaceAll(tc.name, " ", "-"))
			code, _, stderr := e.build(tc.base, "oci:"+dest+":latest", tc.mc)
			if code != exitInput {
				t.Errorf("exit = %d, want %d; stderr:\n%s", code, exitInput, stderr)
			}
			if !strings.Contains(stderr, tc.want) {
				t.Errorf("stderr = %q, want it to contain %q", stderr, tc.want)
			}
			if _, err := os.Stat(dest); !os.IsNotExist(err) {
				t.Errorf("destination %s exists after a failed build (err %v)", dest, err)
			}
			leftovers, _ := filepath.Glob(filepath.Join(e.dir, ".out-*"))
			if len(leftovers) > 0 {
				t.Errorf("temporary files left: %v", leftovers)
			}
		})
	}
}

// damageLargestLayer rewrites the largest blob of an OCI layout in place.
func damageLargestLayer(t *testing.T, layout string, damage func([]byte) []byte) {
	t.Helper()
	blobs, _ := filepath.Glob(filepath.Join(layout, "blobs", "sha256", "*"))
	var biggest string
	var size int64
	for _, b := range blobs {
		fi, err := os.Stat(b)
		if err == nil && fi.Size() > size {
			biggest, size = b, fi.Size()
		}
	}
	data, err := os.ReadFile(biggest)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(biggest, damage(data), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestDiffPlanRewriteOnDisk(t *testing.T) {
	e := newEnv(t)
	img := "oci:" + filepath.Join(e.dir, "layered") + ":latest"
	e.mustBuild(t, e.base, img, workerMC, "testdata/owners-and-links.yaml")
	code, out, stderr := e.run(append([]string{"diff", "--quiet", "--format", "json", "--base", e.base, "--image", img}, e.imageArgs()...)...)
	if code != 0 {
		t.Fatalf("diff: exit %d: %s", code, stderr)
	}
	schematest.Validate(t, "diff", []byte(out))
	var rep struct {
		Entries []struct {
			Path      string `json:"path"`
			Clobbered bool   `json:"clobbered"`
			Outcome   string `json:"outcome"`
		} `json:"entries"`
		Summary struct {
			Clobbered int `json:"clobbered"`
		} `json:"summary"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	checkVersioned(t, "diff --format json", out)
	outcomes := map[string]string{}
	for _, en := range rep.Entries {
		outcomes[en.Path] = en.Outcome
	}
	for path, want := range map[string]string{
		"/etc/kubernetes/kubelet.conf":                                    "removed",
		"/etc/systemd/system/multi-user.target.wants/openvswitch.service": "restored",
		"/var/usrlocal/bin/hello":                                         "untouched",
		"/etc/modules-load.d/iptables.conf":                               "kept",
	} {
		if outcomes[path] != want {
			t.Errorf("diff outcome of %s = %q, want %q", path, outcomes[path], want)
		}
	}
	// -f for an image with a manifest: the MachineConfigs it was built
	// from pass quietly; for others each difference is a warning that
	// names the MachineConfig, and the prediction follows the manifest; a
	// file that does not load is an input error.
	withMCs := append([]string{"diff", "--quiet", "--base", e.base, "--image", img, "-f", workerMC, "-f", "testdata/owners-and-links.yaml"}, e.imageArgs()...)
	if code, _, stderr := e.run(withMCs...); code != 0 || stderr != "" {
		t.Errorf("diff -f with the MachineConfigs baked: exit %d, stderr %q; want 0 and nothing", code, stderr)
	}
	for _, args := range [][]string{
		{"diff", "--quiet", "--base", e.base, "--image", img, "-f", workerMC},
		{"plan", "--quiet", "--base", e.base, "--image", img, "-f", "testdata/owners-and-links.yaml", "-f", "../../../testdata/machineconfigs/rendered-master-aws.json", "-o", filepath.Join(e.dir, "other-plan.json")},
	} {
		code, _, stderr := e.run(append(args, e.imageArgs()...)...)
		if code != 0 || !strings.Contains(stderr, "level=WARN") || !strings.Contains(stderr, "MachineConfig ") || !strings.Contains(stderr, "which the prediction follows") {
			t.Errorf("%s -f with other MachineConfigs: exit %d, stderr %q; want 0 and a warning naming the MachineConfig", args[0], code, stderr)
		}
	}
	if code, _, stderr := e.run(append([]string{"diff", "--quiet", "--base", e.base, "--image", img, "-f", filepath.Join(e.dir, "missing.yaml")}, e.imageArgs()...)...); code != 2 {
		t.Errorf("diff -f with a missing file: exit %d, stderr %q; want 2", code, stderr)
	}
	if code, _, stderr := e.run(append([]string{"plan", "--quiet", "--base", e.base, "--image", img, "-o", e.dir}, e.imageArgs()...)...); code != 2 || strings.TrimSpace(stderr) != "mcbake: -o "+e.dir+": is a directory" {
		t.Errorf("plan -o DIR: exit %d, stderr %q; want 2 and the directory named", code, stderr)
	}
	plan := filepath.Join(e.dir, "plan.json")
	if code, _, stderr := e.run(append([]string{"plan", "--quiet", "--base", e.base, "--image", img, "-o", plan}, e.imageArgs()...)...); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	// -o - is stdout: the plan, byte for byte, and the summary on stderr.
	code, stdout, stderr := e.run(append([]string{"plan", "--quiet", "--base", e.base, "--image", img, "-o", "-"}, e.imageArgs()...)...)
	if want, err := os.ReadFile(plan); err != nil || code != 0 || stdout != string(want) || !strings.Contains(stderr, "path(s) to rewrite") {
		t.Errorf("plan -o -: exit %d, stdout %d bytes (want the plan's %d), stderr %q", code, len(stdout), len(want), stderr)
	}
	schematest.Validate(t, "plan", []byte(stdout))
	if _, err := os.Lstat("-"); err == nil {
		t.Errorf("plan -o - wrote a file named -")
	}
	root := filepath.Join(e.dir, "node")
	unpacked, err := testbase.Unpack(filepath.Join(e.dir, "base"))
	if err != nil {
		t.Fatal(err)
	}
	writeTree(t, root, unpacked)
	mcs := []string{"-f", workerMC, "-f", "testdata/owners-and-links.yaml"}
	if code, out, _ := e.run(append([]string{"ondisk", "--root", root}, mcs...)...); code != exitFindings {
		t.Fatalf("ondisk on the bare base: exit %d, want %d\n%s", code, exitFindings, out)
	}
	// What it would do, as JSON: the planned paths with what differs.
	code, out, _ = e.run(append([]string{"rewrite", "--plan", plan, "--root", root, "--dry-run", "--format", "json"}, mcs...)...)
	if code != 0 {
		t.Fatalf("rewrite --dry-run --format json on the bare base: exit %d\n%s", code, out)
	}
	schematest.Validate(t, "rewrite", []byte(out))
	action := func(v any) map[string]any { return schematest.Object(v, "actions", 0) }
	schematest.Invalid(t, "rewrite", []byte(out), "an unknown op", func(v any) { action(v)["op"] = "rewrote" })
	schematest.Invalid(t, "rewrite", []byte(out), "an action without its path", func(v any) { delete(action(v), "path") })
	schematest.Invalid(t, "rewrite", []byte(out), "no schemaVersion", func(v any) { delete(schematest.Object(v), "schemaVersion") })
	if code, out, stderr := e.run(append([]string{"rewrite", "--plan", plan, "--root", root}, mcs...)...); code != 0 || !strings.Contains(out, "rewrote") {
		t.Fatalf("rewrite: exit %d\n%s%s", code, out, stderr)
	}
	code, out, _ = e.run(append([]string{"rewrite", "--plan", plan, "--root", root}, mcs...)...)
	if code != 0 || !strings.Contains(out, "nothing to do") {
		t.Fatalf("second rewrite: exit %d, want 0 and nothing to do\n%s", code, out)
	}
	code, out, _ = e.run(append([]string{"rewrite", "--plan", plan, "--root", root, "--dry-run", "--format", "json"}, mcs...)...)
	var rw struct {
		DryRun  bool `json:"dryRun"`
		Actions []struct {
			Path string `json:"path"`
			Op   string `json:"op"`
		} `json:"actions"`
	}
	if err := json.Unmarshal([]byte(out), &rw); err != nil || code != 0 || !rw.DryRun || len(rw.Actions) == 0 {
		t.Fatalf("rewrite --dry-run --format json: exit %d, %v\n%s", code, err, out)
	}
	for _, a := range rw.Actions {
		if a.Op != "unchanged" {
			t.Errorf("rewrite --format json after a rewrite: %s is %q, want unchanged", a.Path, a.Op)
		}
	}
	checkVersioned(t, "rewrite --format json", out)
	schematest.Validate(t, "rewrite", []byte(out))
	code, out, _ = e.run(append([]string{"ondisk", "--root", root, "--format", "json"}, mcs...)...)
	schematest.Validate(t, "ondisk", []byte(out))
	var od struct {
		Mismatches []struct {
			Path string `json:"path"`
		} `json:"mismatches"`
	}
	if err := json.Unmarshal([]byte(out), &od); err != nil {
		t.Fatalf("ondisk json: %v\n%s", err, out)
	}
	checkVersioned(t, "ondisk --format json", out)
	for _, m := range od.Mismatches {
		if !strings.HasPrefix(m.Path, "/var/") {
			t.Errorf("after rewrite, ondisk still reports %s (only /var paths, which a revert never touches, may remain)", m.Path)
		}
	}
	_ = code
}

// checkVersioned fails unless out, a command's JSON output, is an object
// with a positive integer schemaVersion (docs/usage.md, Output formats).
func checkVersioned(t *testing.T, what, out string) {
	t.Helper()
	var v struct {
		SchemaVersion *int `json:"schemaVersion"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || v.SchemaVersion == nil || *v.SchemaVersion < 1 {
		t.Errorf("%s: no schemaVersion (%v):\n%.300s", what, err, out)
	}
}

// writeTree materialises an unpacked image under dir (as root: with owners).
func writeTree(t *testing.T, dir string, files map[string]testbase.File) {
	t.Helper()
	var hard []testbase.File
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	sort.Strings(paths)
	for _, p := range paths {
		f := files[p]
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		var err error
		switch f.Type {
		case tar.TypeDir:
			err = os.MkdirAll(full, 0o755)
		case tar.TypeSymlink:
			err = os.Symlink(f.Target, full)
		case tar.TypeLink:
			hard = append(hard, f)
			continue
		default:
			err = os.WriteFile(full, f.Content, 0o600)
		}
		if err != nil {
			t.Fatal(err)
		}
		if os.Geteuid() == 0 {
			_ = os.Lchown(full, f.UID, f.GID)
		}
		if f.Type != tar.TypeSymlink {
			_ = os.Chmod(full, os.FileMode(f.Mode)&os.ModePerm)
		}
	}
	for _, f := range hard {
		_ = os.Link(filepath.Join(dir, f.Target), filepath.Join(dir, f.Path))
	}
}

// neutralGuard writes a stand-in for the revert guard's binary that runs
// on every architecture (a script), for builds of several platforms.
func neutralGuard(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "guard.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n# a stand-in for mcbake-node on every architecture\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestBuildFromDockerAndMultiPlatformBases builds on a Docker schema2 base
// and on each platform of a two-platform index.
func TestBuildFromDockerAndMultiPlatformBases(t *testing.T) {
	e := newEnv(t)
	docker := filepath.Join(e.dir, "docker")
	if _, err := testbase.Write(docker, testbase.Options{Format: "docker"}); err != nil {
		t.Fatal(err)
	}
	multi := filepath.Join(e.dir, "multi")
	if _, err := testbase.Write(multi, testbase.Options{Platforms: []string{"linux/amd64", "linux/arm64"}}); err != nil {
		t.Fatal(err)
	}
	e.mustBuild(t, "oci:"+docker+":latest", "oci:"+filepath.Join(e.dir, "from-docker")+":latest", workerMC)
	// The guard's binary must be each image's architecture: without one
	// for arm64 built in, the arm64 build is refused, saying how to get
	// one; the platforms then get an architecture-neutral stand-in.
	if _, err := guard.Binary("arm64"); err != nil {
		e.extra = []string{"--platform", "linux/arm64"}
		code, _, stderr := e.build("oci:"+multi+":latest", "oci:"+filepath.Join(e.dir, "no-guard")+":latest", workerMC)
		if code != exitInput || !strings.Contains(stderr, "GUARD_ARCHES=arm64") {
			t.Errorf("arm64 with no arm64 guard: exit %d, %q; want 2 and how to get one", code, stderr)
		}
	}
	stand := neutralGuard(t, e.dir)
	digests := map[string]string{}
	for _, platform := range []string{"linux/amd64", "linux/arm64"} {
		e.extra = []string{"--platform", platform, "--guard-binary", stand}
		digests[platform] = e.mustBuild(t, "oci:"+multi+":latest", "oci:"+filepath.Join(e.dir, "from-multi-"+strings.ReplaceAll(platform, "/", "-"))+":latest", workerMC)
	}
	if digests["linux/amd64"] == digests["linux/arm64"] {
		t.Errorf("both platforms built the same image %s", digests["linux/amd64"])
	}
	e.extra = []string{"--platform", "linux/s390x"}
	code, _, stderr := e.build("oci:"+multi+":latest", "oci:"+filepath.Join(e.dir, "from-s390x")+":latest", workerMC)
	if code != exitInput || !strings.Contains(stderr, "linux/arm64") {
		t.Errorf("build for a missing platform: exit %d, stderr %q; want exit 2 naming the available platforms", code, stderr)
	}
}

// TestDiffImageBuiltByOthers: an image without an mcbake manifest needs
// the MachineConfigs (-f); with them the owned paths are derived and
// compared with the image's own defaults.
func TestDiffImageBuiltByOthers(t *testing.T) {
	e := newEnv(t)
	others := filepath.Join(e.dir, "others")
	layer := testbase.Layer{Files: []testbase.File{
		{Path: "etc/mcbake/same.conf", Mode: 0o644, Content: []byte("same\n")},
		{Path: "etc/mcbake/mode.conf", Mode: 0o600, Content: []byte("mode\n")},
	}}
	if _, err := testbase.Write(others, testbase.Options{ExtraLayers: []testbase.Layer{layer}}); err != nil {
		t.Fatal(err)
	}
	mc := filepath.Join(e.dir, "others.yaml")
	if err := os.WriteFile(mc, []byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-others
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - path: /etc/mcbake/same.conf
          contents:
            source: data:,same%0A
        - path: /etc/mcbake/mode.conf
          contents:
            source: data:,mode%0A
`), 0o644); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"diff", "--quiet", "--format", "json", "--base", e.base, "--image", "oci:" + others + ":latest"}, e.imageArgs()...)
	code, _, stderr := e.run(args...)
	if code != 2 || !strings.Contains(stderr, "not an mcbake layered image") || !strings.Contains(stderr, "with -f") {
		t.Errorf("diff --image (built by others) without -f: exit %d, stderr %q; want 2 and a hint at -f", code, stderr)
	}
	code, out, stderr := e.run(append(args, "-f", mc)...)
	if code != 0 {
		t.Fatalf("diff --image (built by others) -f: exit %d: %s", code, stderr)
	}
	schematest.Validate(t, "diff", []byte(out))
	var rep struct {
		Owned   string `json:"owned"`
		Entries []struct {
			Path    string `json:"path"`
			Outcome string `json:"outcome"`
			Image   struct {
				State string `json:"state"`
			} `json:"image"`
		} `json:"entries"`
	}
	if err := json.Unmarshal([]byte(out), &rep); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, en := range rep.Entries {
		got[en.Path] = en.Outcome + " " + en.Image.State
	}
	want := map[string]string{"/etc/mcbake/same.conf": "removed same", "/etc/mcbake/mode.conf": "kept differs"}
	for p, w := range want {
		if got[p] != w {
			t.Errorf("diff: %s = %q, want %q", p, got[p], w)
		}
	}
	if rep.Owned != "derived" {
		t.Errorf("diff: owned = %q, want derived", rep.Owned)
	}
	// --pool merges them for that pool, which must merge their roles.
	if code, _, stderr := e.run(append(args, "-f", mc, "--pool", "infra")...); code != 0 {
		t.Errorf("diff -f --pool infra: exit %d: %s", code, stderr)
	}
	labelled := filepath.Join(e.dir, "labelled.yaml")
	if err := os.WriteFile(labelled, []byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-worker-others
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  config:
    ignition:
      version: 3.4.0
`), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr = e.run(append(args, "-f", labelled, "--pool", "master")...)
	if code != 2 || !strings.Contains(stderr, `is not merged by pool "master"`) {
		t.Errorf("diff -f (a worker MachineConfig) --pool master: exit %d, stderr %q; want 2 and the pool refusal", code, stderr)
	}
}

// TestDamagedCachedView: a damaged block of the cached view, which is
// only found once a warm build looks a path up in it, has the index built
// again there and then, with a warning: the build succeeds with the same
// digest, and caches a good view for the next one.
func TestDamagedCachedView(t *testing.T) {
	e := newEnv(t)
	out := "oci:" + filepath.Join(e.dir, "out") + ":latest"
	want := e.mustBuild(t, e.base, out, workerMC)
	views, err := filepath.Glob(filepath.Join(e.cache, "views", "sha256", "*"))
	if err != nil || len(views) != 1 {
		t.Fatalf("cached views: %v, %v; want one", views, err)
	}
	good, err := os.ReadFile(views[0])
	if err != nil {
		t.Fatal(err)
	}
	// Past the head (header, fixed part, one checksum a block), a byte
	// of every block, so that the first lookup meets the damage.
	const header, fixed = 32, 48 // the block count ends the fixed part
	head := header + fixed + 4*int(binary.LittleEndian.Uint32(good[header+fixed-4:]))
	bad := bytes.Clone(good)
	for off := head + 100; off < len(bad); off += 4096 {
		bad[off] ^= 0xff
	}
	if err := os.WriteFile(views[0], bad, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := e.run(append([]string{"build", "--base", e.base, "-o", out, "-f", workerMC}, e.imageArgs()...)...)
	if code != 0 || strings.TrimSpace(stdout) != want {
		t.Fatalf("build over a damaged view: exit %d, %q (want %s)\n%s", code, stdout, want, stderr)
	}
	if !strings.Contains(stderr, "the cached index of the base is damaged; rebuilding it") || !strings.Contains(stderr, "does not match its checksum") {
		t.Errorf("stderr of a build over a damaged view lacks the warning:\n%s", stderr)
	}
	if b, err := os.ReadFile(views[0]); err != nil || !bytes.Equal(b, good) {
		t.Errorf("the view after the rebuild: %v; the same as the first: %v", err, bytes.Equal(b, good))
	}
}

// TestBuildDigestFile: --digestfile gets the digest build prints; one that
// cannot be written fails before the build writes anything, naming the
// flag, and a written one leaves no temporary file beside it.
func TestBuildDigestFile(t *testing.T) {
	e := newEnv(t)
	aDir := filepath.Join(e.dir, "adir")
	if err := os.Mkdir(aDir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, file := range map[string]string{"missing directory": filepath.Join(e.dir, "nodir", "d"), "a directory": aDir} {
		t.Run(name, func(t *testing.T) {
			dest := filepath.Join(e.dir, "out-"+strings.ReplaceAll(name, " ", "-"))
			code, _, stderr := e.run(append([]string{"build", "--quiet", "--base", e.base, "-o", "oci:" + dest + ":latest", "-f", workerMC, "--digestfile", file}, e.imageArgs()...)...)
			if code == 0 || !strings.Contains(stderr, "--digestfile "+file+": ") || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || strings.Contains(stderr, "/.") {
				t.Errorf("exit %d, stderr %q; want a failure naming --digestfile %s (and no temporary file) on one line", code, stderr, file)
			}
			if _, err := os.Stat(dest); !os.IsNotExist(err) {
				t.Errorf("destination %s exists after a build that could not write its digest file (err %v)", dest, err)
			}
		})
	}
	dir := filepath.Join(e.dir, "digests")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(dir, "layered.digest")
	code, stdout, stderr := e.run(append([]string{"build", "--quiet", "--base", e.base, "-o", "oci:" + filepath.Join(e.dir, "out-ok") + ":latest", "-f", workerMC, "--digestfile", file}, e.imageArgs()...)...)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	if b, err := os.ReadFile(file); err != nil || string(b) != strings.TrimSpace(stdout) {
		t.Errorf("digest file = %q, %v; want %q", b, err, strings.TrimSpace(stdout))
	}
	if names, _ := os.ReadDir(dir); len(names) != 1 {
		t.Errorf("%s holds %d files, want only the digest file", dir, len(names))
	}
}
