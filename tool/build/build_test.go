package build_test

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/build/buildah"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/imagestest"
)

// parityUnits are the systemd units of the parity MachineConfig: a unit
// with contents enabled, a drop-in, a mask.
const parityUnits = `[
  {"name": "mcbake-test.service", "enabled": true,
   "contents": "[Unit]\nDescription=mcbake test\n[Service]\nExecStart=/usr/bin/true\n[Install]\nWantedBy=multi-user.target\n"},
  {"name": "crio.service", "dropins": [{"name": "10-mcbake.conf", "contents": "[Service]\nEnvironment=MCBAKE=1\n"}]},
  {"name": "zincati.service", "mask": true}%s
]`

// parityStorage has files with owners by name, a file under a base
// directory that is not root's (/var/lib/chrony, 994:991 0750), a
// directory owned by core holding a root file, a path that needs quoting
// in a Containerfile, a file under /usr/local (-> /var/usrlocal), and
// soft, core-owned and hard links (the hard link sorts before its target).
const parityStorage = `{
  "files": [
    {"path": "/etc/mcbake-test/plain.conf", "mode": 420, "contents": {"source": "data:,plain%0A"}},
    {"path": "/etc/mcbake-test/core.conf", "mode": 384, "user": {"name": "core"}, "group": {"name": "core"},
     "contents": {"source": "data:,core%0A"}},
    {"path": "/etc/mcbake test/it's \\x2d.conf", "mode": 416, "user": {"name": "core"}, "contents": {"source": "data:,quoted%0A"}},
    {"path": "/var/lib/chrony/mcbake.conf", "mode": 420, "contents": {"source": "data:,chrony%0A"}},
    {"path": "/home/core/mcbake-dir/root.conf", "mode": 420, "contents": {"source": "data:,root%0A"}},
    {"path": "/usr/local/bin/mcbake-hello", "mode": 493, "contents": {"source": "data:,%23!/bin/sh%0Aecho%20hello%0A"}}
  ],
  "directories": [
    {"path": "/home/core/mcbake-dir", "mode": 488, "user": {"name": "core"}, "group": {"name": "core"}}
  ],
  "links": [
    {"path": "/etc/mcbake-test/soft", "target": "plain.conf"},
    {"path": "/etc/mcbake-test/core-link", "target": "core.conf", "user": {"name": "core"}},
    {"path": "/etc/mcbake-test/a-hard", "target": "/etc/mcbake-test/plain.conf", "hard": true}
  ]
}`

// disableOpenvswitch disables a unit the base enables: the build owns its
// enablement link as absent (a RUN rm for the buildah engine).
const disableOpenvswitch = `,
  {"name": "openvswitch.service", "enabled": false}`

func parityMC(t *testing.T, extraUnits string) []*machineconfig.MachineConfig {
	t.Helper()
	doc := fmt.Sprintf(`{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
  "metadata": {"name": "99-mcbake-parity"},
  "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": %s, "systemd": {"units": %s}}}}`,
		parityStorage, fmt.Sprintf(parityUnits, extraUnits))
	mcs, err := machineconfig.Parse("parity.json", []byte(doc))
	if err != nil {
		t.Fatal(err)
	}
	return mcs
}

func requireRoot(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("skipping: the buildah engine tests run as root only (chroot isolation, chown, overlay store)")
	}
}

// env is a test's private directories: TMPDIR, caches, buildah's store.
type env struct {
	dir, cache string
	images     image.Options
}

// newEnv gives the test its own TMPDIR, cache (and so buildah store and
// run root) and an empty registries.conf, and unmounts whatever a failed
// build left mounted under them before they are removed.
func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	t.Cleanup(func() { unmountUnder(t, dir) })
	e := &env{dir: dir, cache: filepath.Join(dir, "cache"), images: imagestest.Isolate(t, dir)}
	t.Setenv("XDG_RUNTIME_DIR", filepath.Join(dir, "run"))
	return e
}

// unmountUnder detaches every mount below dir, deepest first.
func unmountUnder(t *testing.T, dir string) {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		t.Log(err)
		return
	}
	defer f.Close()
	var mounts []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) > 4 && strings.HasPrefix(fields[4], dir+"/") {
			mounts = append(mounts, fields[4])
		}
	}
	sort.Sort(sort.Reverse(sort.StringSlice(mounts)))
	for _, m := range mounts {
		t.Logf("unmounting %s left by the build", m)
		if err := unix.Unmount(m, unix.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", m, err)
		}
	}
}

// writeBase writes the RHCOS-like test base (plus extra layers) and
// returns its oci: reference.
func (e *env) writeBase(t *testing.T, extra ...testbase.Layer) string {
	t.Helper()
	dir := filepath.Join(e.dir, "base")
	if _, err := testbase.Write(dir, testbase.Options{Platforms: []string{"linux/" + runtime.GOARCH}, ExtraLayers: extra}); err != nil {
		t.Fatal(err)
	}
	return "oci:" + dir + ":latest"
}

func (e *env) options(base, output string, mcs []*machineconfig.MachineConfig) build.ImageOptions {
	return build.ImageOptions{Output: output, Options: build.Options{Base: base, MachineConfigs: mcs, Images: e.images, CacheDir: e.cache,
		Timestamp: time.Unix(1700000000, 0)}}
}

// rmTool builds a static rm (rm -f -- PATH...) for the test base, whose
// binaries are fakes: the buildah engine removes absent paths with RUN.
func rmTool(t *testing.T) testbase.Layer {
	t.Helper()
	goBin, err := exec.LookPath("go")
	if err != nil {
		goBin = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	src := t.TempDir()
	const prog = `package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// rm -f [--] PATH...: remove each path, ignoring missing ones.
func main() {
	args := os.Args[1:]
	if len(args) > 0 && args[0] == "-f" {
		args = args[1:]
	}
	if len(args) > 0 && args[0] == "--" {
		args = args[1:]
	}
	status := 0
	for _, p := range args {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			fmt.Fprintln(os.Stderr, "rm:", err)
			status = 1
		}
	}
	os.Exit(status)
}
`
	for name, content := range map[string]string{"go.mod": "module rm\n\ngo 1.21\n", "main.go": prog} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cmd := exec.Command(goBin, "build", "-trimpath", "-o", "rm", ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+runtime.GOARCH, "GOFLAGS=", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("building the test rm: %v\n%s", err, out)
	}
	bin, err := os.ReadFile(filepath.Join(src, "rm"))
	if err != nil {
		t.Fatal(err)
	}
	return testbase.Layer{Files: []testbase.File{{Path: "usr/bin/rm", Mode: 0o755, Content: bin}}, Comment: "test: rm"}
}

// fsNode is what the tests compare of a path in an image.
type fsNode struct {
	Type     string // file, dir, symlink
	Mode     int64
	UID, GID int
	Digest   string
	Target   string
	// Peers are the other paths that are the same inode (hard links).
	Peers []string
}

// readImage merges the layers of the image tagged "latest" in an OCI
// layout, applying whiteouts and opaque directories. Hard links become
// files with their target's metadata and list each other as peers.
func readImage(t *testing.T, layout string) map[string]*fsNode {
	t.Helper()
	m := readManifest(t, layout)
	fs := map[string]*fsNode{}
	inode := map[string]string{} // path -> first path of its inode
	for _, l := range m.Layers {
		if err := applyLayer(layout, l, fs, inode); err != nil {
			t.Fatalf("%s: layer %s: %v", layout, l.Digest, err)
		}
	}
	groups := map[string][]string{}
	for p, id := range inode {
		if _, ok := fs[p]; ok {
			groups[id] = append(groups[id], p)
		}
	}
	for _, g := range groups {
		if len(g) < 2 {
			continue
		}
		sort.Strings(g)
		for _, p := range g {
			for _, q := range g {
				if q != p {
					fs[p].Peers = append(fs[p].Peers, q)
				}
			}
		}
	}
	return fs
}

func readManifest(t *testing.T, layout string) v1.Manifest {
	t.Helper()
	var idx v1.Index
	readJSON(t, filepath.Join(layout, "index.json"), &idx)
	for _, d := range idx.Manifests {
		if d.Annotations[v1.AnnotationRefName] == "latest" {
			var m v1.Manifest
			readJSON(t, blobPath(layout, d.Digest), &m)
			return m
		}
	}
	t.Fatalf("%s: no image tagged latest", layout)
	return v1.Manifest{}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", file, err)
	}
}

func blobPath(layout string, d digest.Digest) string {
	return filepath.Join(layout, "blobs", d.Algorithm().String(), d.Encoded())
}

type tarEntryRead struct {
	hdr    *tar.Header
	name   string
	digest string
}

func applyLayer(layout string, l v1.Descriptor, fs map[string]*fsNode, inode map[string]string) (err error) {
	f, err := os.Open(blobPath(layout, l.Digest))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	r, err := decompress.Reader(f)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	entries, err := readTar(r)
	if err != nil {
		return err
	}
	for _, e := range entries { // whiteouts apply to the layers below
		dir, base := path.Split(e.name)
		switch {
		case base == ".wh..wh..opq":
			removeUnder(fs, inode, strings.TrimSuffix(dir, "/"), false)
		case strings.HasPrefix(base, ".wh."):
			removeUnder(fs, inode, dir+strings.TrimPrefix(base, ".wh."), true)
		}
	}
	for _, e := range entries {
		if strings.HasPrefix(path.Base(e.name), ".wh.") {
			continue
		}
		if err := addEntry(fs, inode, e); err != nil {
			return err
		}
	}
	return nil
}

func readTar(r io.Reader) ([]tarEntryRead, error) {
	var out []tarEntryRead
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return nil, err
		}
		e := tarEntryRead{hdr: h, name: strings.TrimPrefix(path.Clean("/"+h.Name), "/")}
		if h.Typeflag == tar.TypeReg {
			sum := sha256.New()
			if _, err := io.Copy(sum, tr); err != nil {
				return nil, err
			}
			e.digest = "sha256:" + hex.EncodeToString(sum.Sum(nil))
		}
		if e.name != "" {
			out = append(out, e)
		}
	}
}

func removeUnder(fs map[string]*fsNode, inode map[string]string, p string, self bool) {
	for q := range fs {
		if (self && q == p) || strings.HasPrefix(q, p+"/") || p == "" {
			delete(fs, q)
			delete(inode, q)
		}
	}
}

// addEntry adds a tar entry as extraction would; a hard link must come
// after its target, as extraction links to what it has already written.
func addEntry(fs map[string]*fsNode, inode map[string]string, e tarEntryRead) error {
	h := e.hdr
	n := &fsNode{Mode: h.Mode & 0o7777, UID: h.Uid, GID: h.Gid}
	if old, ok := fs[e.name]; ok && old.Type == "dir" && h.Typeflag != tar.TypeDir {
		removeUnder(fs, inode, e.name, false)
	}
	delete(inode, e.name)
	switch h.Typeflag {
	case tar.TypeDir:
		n.Type = "dir"
	case tar.TypeSymlink:
		n.Type, n.Target = "symlink", h.Linkname
	case tar.TypeLink:
		target := strings.TrimPrefix(path.Clean("/"+h.Linkname), "/")
		t, ok := fs[target]
		if !ok || t.Type != "file" {
			return fmt.Errorf("hard link %s to %s, which is not a file written before it", e.name, target)
		}
		c := *t
		n = &c
		inode[e.name] = inode[target]
	default:
		n.Type, n.Digest = "file", e.digest
		inode[e.name] = e.name
	}
	fs[e.name] = n
	return nil
}

// wantNode is what the manifest says an owned path is.
func wantNode(e manifest.Entry) *fsNode {
	n := &fsNode{Mode: int64(e.Mode), UID: e.UID, GID: e.GID, Digest: string(e.Digest), Target: e.Target}
	switch e.Type {
	case manifest.Directory:
		n.Type = "dir"
	case manifest.Symlink:
		n.Type = "symlink"
	default:
		n.Type = "file"
	}
	return n
}

// TestBuildahMatchesAppend builds the same MachineConfig on the test base
// with both engines and checks that every owned path has the manifest's
// type, mode, owner, content and link target in both images, and that
// the images' merged file systems are the same.
func TestBuildahMatchesAppend(t *testing.T) {
	requireRoot(t)
	tests := []struct {
		name   string
		units  string
		rm     bool   // the base needs an rm for RUN
		append string // --containerfile-append content
		guard  bool   // with the revert guard
	}{
		{name: "files units links", append: "LABEL io.mcbake.test.appended=yes\n"},
		{name: "disabled base unit", units: disableOpenvswitch, rm: true},
		{name: "with the revert guard", guard: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			var extra []testbase.Layer
			if tt.rm {
				extra = append(extra, rmTool(t))
			}
			baseRef := e.writeBase(t, extra...)
			mcs := parityMC(t, tt.units)
			appendFile := ""
			if tt.append != "" {
				appendFile = filepath.Join(e.dir, "append.containerfile")
				if err := os.WriteFile(appendFile, []byte(tt.append), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			ctx := context.Background()
			options := func(out string) build.ImageOptions {
				o := e.options(baseRef, "oci:"+filepath.Join(e.dir, out)+":latest", mcs)
				if tt.guard {
					o.Guard = testGuard
				}
				return o
			}

			start := time.Now()
			appended, err := build.Image(ctx, options("append"))
			if err != nil {
				t.Fatalf("Image: %v", err)
			}
			t.Logf("append engine: %v", time.Since(start))
			start = time.Now()
			built, err := buildahBuild(ctx, options("buildah"), appendFile)
			if err != nil {
				t.Fatalf("Buildah: %v", err)
			}
			t.Logf("buildah engine: %v", time.Since(start))

			if tt.append == "" {
				// The same build in a fresh store gives the same image.
				e.cache = filepath.Join(e.dir, "cache-again")
				again, err := buildahBuild(ctx, options("again"), appendFile)
				if err != nil {
					t.Fatalf("Buildah again: %v", err)
				}
				if again.Digest != built.Digest {
					t.Errorf("Buildah twice = %s, then %s, want the same digest", built.Digest, again.Digest)
				}
			}
			if diff := cmp.Diff(appended.Manifest, built.Manifest); diff != "" {
				t.Errorf("manifests differ (-append +buildah):\n%s", diff)
			}
			fsA := readImage(t, filepath.Join(e.dir, "append"))
			fsB := readImage(t, filepath.Join(e.dir, "buildah"))
			checkOwned(t, built.Manifest, fsA, fsB)
			if diff := cmp.Diff(fsA, fsB); diff != "" {
				t.Errorf("merged file systems differ (-append +buildah):\n%s", diff)
			}
			checkLabels(t, e, "oci:"+filepath.Join(e.dir, "buildah")+":latest", built, tt.append != "")
			checkBaseBlobs(t, filepath.Join(e.dir, "base"), filepath.Join(e.dir, "buildah"))
		})
	}
}

// checkBaseBlobs checks that the buildah image reuses the base's gzip
// layer blobs as they are (its blob cache); zstd layers are compressed
// again with gzip, as the build asks for gzip.
func checkBaseBlobs(t *testing.T, baseLayout, layout string) {
	t.Helper()
	b, m := readManifest(t, baseLayout), readManifest(t, layout)
	if len(m.Layers) != len(b.Layers)+1 {
		t.Fatalf("the buildah image has %d layers, want the base's %d and one", len(m.Layers), len(b.Layers))
	}
	for i, l := range b.Layers {
		if l.MediaType == v1.MediaTypeImageLayerGzip && m.Layers[i].Digest != l.Digest {
			t.Errorf("base layer %d is %s in the buildah image, want the base's blob %s", i, m.Layers[i].Digest, l.Digest)
		}
	}
}

// checkOwned compares each owned path with the manifest in both images.
func checkOwned(t *testing.T, m *manifest.Manifest, fsA, fsB map[string]*fsNode) {
	t.Helper()
	var absent, present int
	for _, e := range m.Entries {
		p := strings.TrimPrefix(e.Where(), "/")
		a, b := fsA[p], fsB[p]
		if e.Type == manifest.Absent {
			absent++
			if a != nil || b != nil {
				t.Errorf("%s is owned as absent but the append image has %+v, the buildah image %+v", p, a, b)
			}
			continue
		}
		present++
		if a == nil || b == nil {
			t.Errorf("%s: append image has %+v, buildah image has %+v", p, a, b)
			continue
		}
		if diff := cmp.Diff(a, b); diff != "" {
			t.Errorf("%s differs (-append +buildah):\n%s", p, diff)
		}
		want := wantNode(e)
		got := *b
		if e.Type == manifest.Hardlink {
			// A hard link is its target's inode: compare the peers.
			want = &fsNode{Type: "file", Mode: got.Mode, UID: got.UID, GID: got.GID, Digest: got.Digest}
			if !containsPeer(got.Peers, e.Target) {
				t.Errorf("%s: hard link peers %v, want %s among them", p, got.Peers, e.Target)
			}
		}
		got.Peers = nil
		if diff := cmp.Diff(want, &got); diff != "" {
			t.Errorf("%s differs from the manifest (-manifest +image):\n%s", p, diff)
		}
	}
	t.Logf("compared %d owned paths and %d owned absences", present, absent)
}

func containsPeer(peers []string, p string) bool {
	for _, q := range peers {
		if "/"+q == p {
			return true
		}
	}
	return false
}

// topLayerImage lets image.ReadManifest read an image.Image.
type topLayerImage struct{ *image.Image }

func (im topLayerImage) TopLayer(ctx context.Context) (io.ReadCloser, error) {
	ls := im.Layers()
	return im.OpenLayer(ctx, ls[len(ls)-1].Digest)
}

// checkLabels checks the buildah image's digest, labels, annotations and
// embedded manifest.
func checkLabels(t *testing.T, e *env, ref string, res *build.Result, appended bool) {
	t.Helper()
	ctx := context.Background()
	im, err := image.Open(ctx, ref, e.images)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	if got := im.Digest(); got != res.Digest {
		t.Errorf("Buildah returned digest %s, the image has %s", res.Digest, got)
	}
	labels := im.Labels()
	if got := labels[image.LabelManifestDigest]; got != res.ManifestDigest.String() {
		t.Errorf("label %s = %q, want %q", image.LabelManifestDigest, got, res.ManifestDigest)
	}
	if got := labels[image.LabelMachineConfigs]; got != "99-mcbake-parity" {
		t.Errorf("label %s = %q, want 99-mcbake-parity", image.LabelMachineConfigs, got)
	}
	if got, want := labels["io.mcbake.test.appended"], map[bool]string{true: "yes"}[appended]; got != want {
		t.Errorf("appended label = %q, want %q", got, want)
	}
	if got := im.Annotations()[image.AnnotationBaseDigest]; got != res.Manifest.Base.Digest.String() {
		t.Errorf("annotation %s = %q, want %q", image.AnnotationBaseDigest, got, res.Manifest.Base.Digest)
	}
	_, raw, err := image.ReadManifest(ctx, topLayerImage{im})
	if err != nil {
		t.Fatalf("reading the embedded manifest: %v", err)
	}
	if got := digest.FromBytes(raw); got != res.ManifestDigest {
		t.Errorf("embedded manifest digest %s, want %s", got, res.ManifestDigest)
	}
}

// TestBuildahWithoutRuntime checks that without crun and runc a build
// with nothing to RUN works and one that must RUN fails up front, naming
// them, with nothing at the destination.
func TestBuildahWithoutRuntime(t *testing.T) {
	requireRoot(t)
	e := newEnv(t)
	baseRef := e.writeBase(t)
	empty := filepath.Join(e.dir, "empty-path")
	if err := os.Mkdir(empty, 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", empty)
	ctx := context.Background()

	out := filepath.Join(e.dir, "run")
	_, err := buildahBuild(ctx, e.options(baseRef, "oci:"+out+":latest", parityMC(t, disableOpenvswitch)), "")
	if !errors.Is(err, buildah.ErrNoRuntime) || !strings.Contains(err.Error(), "install crun or runc") {
		t.Errorf("Buildah with RUN and no runtime = %v, want %v", err, buildah.ErrNoRuntime)
	}
	if _, err := os.Lstat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the failed build left %s (%v)", out, err)
	}

	res, err := buildahBuild(ctx, e.options(baseRef, "oci:"+filepath.Join(e.dir, "norun")+":latest", parityMC(t, "")), "")
	if err != nil {
		t.Fatalf("Buildah without RUN and no runtime: %v", err)
	}
	if !strings.HasPrefix(res.Digest.String(), "sha256:") {
		t.Errorf("digest %q", res.Digest)
	}
}

// prepare opens the base and renders mcs against it.
func (e *env) prepare(t *testing.T, baseRef string, mcs []*machineconfig.MachineConfig) *build.Prepared {
	t.Helper()
	opts := e.options(baseRef, "", mcs)
	b, err := image.OpenBase(context.Background(), baseRef, image.BaseOptions{Images: opts.Images, CacheDir: opts.CacheDir})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	p, err := build.Prepare(context.Background(), b, opts.Options)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestWriteContext checks the --render-only context: the Containerfile's
// instructions, the rendered tree with the manifest's metadata, the base's
// metadata on the directories above it, the chown copies and the
// manifest; and that it replaces only an earlier context, atomically.
func TestWriteContext(t *testing.T) {
	e := newEnv(t)
	baseRef := e.writeBase(t)
	appendFile := filepath.Join(e.dir, "append")
	if err := os.WriteFile(appendFile, []byte("RUN [\"rpm-ostree\", \"install\", \"usbguard\"]\n\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(e.dir, "out", "ctx")
	if err := os.Mkdir(filepath.Dir(dir), 0o755); err != nil {
		t.Fatal(err)
	}
	opts := build.RenderOptions{Options: e.options(baseRef, "", parityMC(t, disableOpenvswitch)).Options, Dir: dir, ContainerfileAppend: appendFile}
	// An image reference is not a directory to write the context to.
	ref := opts
	ref.Dir = "oci:" + filepath.Join(e.dir, "ctx-ref") + ":latest"
	if _, err := build.RenderOnly(context.Background(), ref); err == nil || !strings.Contains(err.Error(), "is an image reference") {
		t.Errorf("RenderOnly(-o %s) = %v, want an image reference refused", ref.Dir, err)
	}
	if _, err := os.Lstat(ref.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("RenderOnly(-o %s) wrote a directory by that name (%v)", ref.Dir, err)
		_ = os.RemoveAll(strings.Split(ref.Dir, "/")[0])
	}
	p, err := build.RenderOnly(context.Background(), opts)
	if err != nil {
		t.Fatalf("RenderOnly: %v", err)
	}
	cf, err := os.ReadFile(filepath.Join(dir, build.ContextContainerfile))
	if err != nil {
		t.Fatal(err)
	}
	checkContainerfile(t, string(cf), p, "FROM oci:"+filepath.Join(e.dir, "base")+":latest")
	if !strings.HasSuffix(string(cf), "\n# --containerfile-append\nRUN [\"rpm-ostree\", \"install\", \"usbguard\"]\n") {
		t.Errorf("the Containerfile does not end with the appended instructions:\n%s", cf)
	}
	if raw, err := os.ReadFile(filepath.Join(dir, build.ContextManifest)); err != nil || string(raw) != string(p.ManifestJSON) {
		t.Errorf("%s does not hold the manifest (%v)", build.ContextManifest, err)
	}
	checkRootfs(t, filepath.Join(dir, build.ContextRootfs), p)
	checkChownCopies(t, dir)

	// An earlier context is replaced; nothing else is.
	if err := build.WriteContext(dir, p, ""); err != nil {
		t.Fatalf("WriteContext over an earlier context: %v", err)
	}
	if cf, _ := os.ReadFile(filepath.Join(dir, build.ContextContainerfile)); strings.Contains(string(cf), "containerfile-append") {
		t.Errorf("the earlier Containerfile was not replaced")
	}
	other := filepath.Join(e.dir, "out", "other")
	if err := os.MkdirAll(other, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(other, "notes.txt"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := build.WriteContext(other, p, ""); err == nil || !strings.Contains(err.Error(), "refusing to replace") {
		t.Errorf("WriteContext over a directory with other files = %v, want a refusal", err)
	}
	if _, err := os.Stat(filepath.Join(other, "notes.txt")); err != nil {
		t.Errorf("the refused directory lost its file: %v", err)
	}
	checkNoTemp(t, filepath.Dir(dir), "ctx", "other")
}

func checkContainerfile(t *testing.T, cf string, p *build.Prepared, from string) {
	t.Helper()
	want := []string{
		from + "\n",
		"\nCOPY rootfs/ /\n",
		"\nCOPY --chown=1000:1000 --chmod=0600 chown/2/ /etc/mcbake-test/\n",
		"\nCOPY --chown=1000:0 --chmod=0640 [\"chown/0/\", \"'/etc/mcbake test/'\"]\n",
		"\nCOPY --chown=1000:0 chown/1/ /etc/mcbake-test/\n",
		"\nCOPY --chown=994:991 --chmod=0750 chown/4/ /var/lib/\n",
		"\nCOPY manifest.json /usr/share/mcbake/manifest.json\n",
		"\nRUN [\"rm\", \"-f\", \"--\", \"/etc/systemd/system/multi-user.target.wants/openvswitch.service\"]\n",
	}
	for k, v := range p.Labels() {
		want = append(want, "      "+k+"="+v)
	}
	for _, w := range want {
		if !strings.Contains(cf, w) {
			t.Errorf("the Containerfile lacks %q:\n%s", w, cf)
		}
	}
}

// checkRootfs compares the context's tree with the manifest, and the
// directories above the owned paths with the base.
func checkRootfs(t *testing.T, rootfs string, p *build.Prepared) {
	t.Helper()
	for _, e := range p.Manifest.Entries {
		host := filepath.Join(rootfs, e.Where())
		var st unix.Stat_t
		err := unix.Lstat(host, &st)
		if e.Type == manifest.Absent {
			if err == nil {
				t.Errorf("%s is owned as absent but the context has it", e.Where())
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", e.Where(), err)
			continue
		}
		want := wantNode(e)
		if e.Type == manifest.Hardlink {
			want = sameInode(t, rootfs, p.Manifest, e, &st)
		}
		checkStat(t, e.Where(), &st, want, host)
	}
	var st unix.Stat_t
	for _, d := range []string{"/var/lib/chrony", "/etc", "/var/usrlocal/bin"} {
		n, ok, err := p.Tree.Lstat(d)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			continue // /var/usrlocal/bin is the rendering's
		}
		if err := unix.Lstat(filepath.Join(rootfs, d), &st); err != nil {
			t.Fatal(err)
		}
		checkStat(t, d, &st, &fsNode{Type: "dir", Mode: int64(n.Mode), UID: n.UID, GID: n.GID}, "")
	}
}

// sameInode checks that the hard link e shares its target's inode and
// returns what the target should be.
func sameInode(t *testing.T, rootfs string, m *manifest.Manifest, e manifest.Entry, st *unix.Stat_t) *fsNode {
	t.Helper()
	target, ok := m.Lookup(e.Target)
	if !ok {
		t.Fatalf("%s: hard link target %s is not owned", e.Path, e.Target)
	}
	var tst unix.Stat_t
	if err := unix.Lstat(filepath.Join(rootfs, target.Where()), &tst); err != nil {
		t.Fatal(err)
	}
	if tst.Ino != st.Ino {
		t.Errorf("%s is not a hard link to %s in the context", e.Where(), target.Where())
	}
	return wantNode(*target)
}

// checkStat compares a host path with a node; owners only as root, who
// can set them.
func checkStat(t *testing.T, p string, st *unix.Stat_t, want *fsNode, host string) {
	t.Helper()
	got := &fsNode{Mode: int64(st.Mode & 0o7777), UID: int(st.Uid), GID: int(st.Gid), Target: want.Target}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFDIR:
		got.Type = "dir"
	case unix.S_IFLNK:
		got.Type = "symlink"
		got.Target, _ = os.Readlink(host)
		got.Mode = want.Mode // symlink modes are not the file system's to keep
	case unix.S_IFREG:
		got.Type = "file"
		b, err := os.ReadFile(host)
		if err != nil {
			t.Fatal(err)
		}
		got.Digest = digest.FromBytes(b).String()
	}
	if os.Geteuid() != 0 {
		got.UID, got.GID = want.UID, want.GID
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s in the context (-want +got):\n%s", p, diff)
	}
}

// checkChownCopies checks that each chown/N holds exactly one entry.
func checkChownCopies(t *testing.T, dir string) {
	t.Helper()
	ents, err := os.ReadDir(filepath.Join(dir, build.ContextChown))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range ents {
		inner, err := os.ReadDir(filepath.Join(dir, build.ContextChown, d.Name()))
		if err != nil {
			t.Fatal(err)
		}
		for _, i := range inner {
			got = append(got, d.Name()+"/"+i.Name())
		}
	}
	want := []string{"0/it's \\x2d.conf", "1/core-link", "2/core.conf", "3/mcbake-dir", "4/chrony"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("chown copies (-want +got):\n%s", diff)
	}
}

// checkNoTemp fails if dir has entries other than keep (temporary
// siblings left behind).
func checkNoTemp(t *testing.T, dir string, keep ...string) {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range ents {
		got = append(got, e.Name())
	}
	if diff := cmp.Diff(keep, got); diff != "" {
		t.Errorf("%s (-want +got):\n%s", dir, diff)
	}
}

// TestWriteContextErrors checks that what a Containerfile cannot express
// is refused, and that nothing is written then.
func TestWriteContextErrors(t *testing.T) {
	e := newEnv(t)
	baseRef := e.writeBase(t)
	tests := []struct {
		name, storage, appendFile, want string
	}{
		{
			name: "hard link to a file not root's",
			storage: `{"files": [{"path": "/etc/a", "user": {"name": "core"}, "contents": {"source": "data:,a"}}],
			  "links": [{"path": "/etc/b", "target": "/etc/a", "hard": true}]}`,
			want: "/etc/b: a Containerfile cannot keep a hard link to /etc/a, which is not owned by root",
		},
		{
			name:       "missing append file",
			storage:    `{"files": [{"path": "/etc/a", "contents": {"source": "data:,a"}}]}`,
			appendFile: filepath.Join(e.dir, "missing"),
			want:       "reading the extra Containerfile instructions: open " + filepath.Join(e.dir, "missing") + ": no such file or directory",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			doc := fmt.Sprintf(`{"apiVersion": "machineconfiguration.openshift.io/v1", "kind": "MachineConfig",
			  "metadata": {"name": "99-bad"}, "spec": {"config": {"ignition": {"version": "3.4.0"}, "storage": %s}}}`, tt.storage)
			mcs, err := machineconfig.Parse("bad.json", []byte(doc))
			if err != nil {
				t.Fatal(err)
			}
			p := e.prepare(t, baseRef, mcs)
			parent := t.TempDir()
			err = build.WriteContext(filepath.Join(parent, "ctx"), p, tt.appendFile)
			if err == nil || err.Error() != tt.want {
				t.Errorf("build.WriteContext() = %v, want %s", err, tt.want)
			}
			checkNoTemp(t, parent)
		})
	}
}

// TestBuildahContainersStorage builds into a containers-storage store the
// options name and reads the image back from it.
func TestBuildahContainersStorage(t *testing.T) {
	requireRoot(t)
	e := newEnv(t)
	baseRef := e.writeBase(t)
	e.images.StorageRoot = filepath.Join(e.dir, "storage")
	e.images.StorageRunRoot = filepath.Join(e.dir, "storage-run")
	e.images.StorageDriver = "vfs"
	ref := "containers-storage:localhost/mcbake-test:latest"
	res, err := buildahBuild(context.Background(), e.options(baseRef, ref, parityMC(t, "")), "")
	if err != nil {
		t.Fatalf("Buildah: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.images.StorageRoot, "vfs")); err != nil {
		t.Errorf("the build did not use the named store: %v", err)
	}
	checkLabels(t, e, ref, res, false)
}

func TestFromReference(t *testing.T) {
	wd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	const d = "sha256:0123"
	tests := []struct{ ref, want string }{
		{"oci:base:latest", "oci:" + filepath.Join(wd, "base") + ":latest"},
		{"oci:/abs/base", "oci:/abs/base"},
		{"oci-archive:b.tar:4.18", "oci-archive:" + filepath.Join(wd, "b.tar") + ":4.18"},
		{"docker-archive:b.tar", "docker-archive:" + filepath.Join(wd, "b.tar")},
		{"dir:some/dir", "dir:" + filepath.Join(wd, "some/dir")},
		{"docker://quay.io/openshift/rhcos:4.18", "quay.io/openshift/rhcos:4.18@" + d},
		{"docker://quay.io/openshift/rhcos@sha256:abcd", "quay.io/openshift/rhcos@sha256:abcd"},
		{"containers-storage:localhost/rhcos:4.18", "containers-storage:localhost/rhcos:4.18"},
	}
	for _, tt := range tests {
		got, err := build.FromReference(tt.ref, d)
		if err != nil || got != tt.want {
			t.Errorf("build.FromReference(%q) = %q, %v, want %q", tt.ref, got, err, tt.want)
		}
	}
	if _, err := build.FromReference("oci:/a b", d); err == nil {
		t.Errorf("fromReference with a space = nil error")
	}
}

// buildahBuild builds with the buildah engine and the extra Containerfile
// instructions of the file appendFile ("" = none).
func buildahBuild(ctx context.Context, opts build.ImageOptions, appendFile string) (*build.Result, error) {
	opts.Engine = buildah.Engine{ContainerfileAppend: appendFile}
	return build.Image(ctx, opts)
}

// TestLoadMachineConfigsWhileOpening checks Options.LoadMachineConfigs: the
// build is the one MachineConfigs given directly make, and a loading
// error is the one returned, whatever the base, with nothing written.
func TestLoadMachineConfigsWhileOpening(t *testing.T) {
	e := newEnv(t)
	base := e.writeBase(t)
	mcs := parityMC(t, "")
	direct := filepath.Join(e.dir, "direct")
	want, err := build.Image(context.Background(), e.options(base, "oci:"+direct+":x", mcs))
	if err != nil {
		t.Fatal(err)
	}
	loaded := filepath.Join(e.dir, "loaded")
	opts := e.options(base, "oci:"+loaded+":x", nil)
	opts.LoadMachineConfigs = func() ([]*machineconfig.MachineConfig, error) { return mcs, nil }
	got, err := build.Image(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if got.Digest != want.Digest {
		t.Errorf("loading while opening built %s, given MachineConfigs %s", got.Digest, want.Digest)
	}

	// An engine is given the loaded MachineConfigs.
	var eng recordingEngine
	opts = e.options(base, "oci:"+filepath.Join(e.dir, "engine")+":x", nil)
	opts.LoadMachineConfigs = func() ([]*machineconfig.MachineConfig, error) { return mcs, nil }
	opts.Engine = &eng
	if _, err := build.Image(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if len(eng.opts.MachineConfigs) != len(mcs) || eng.opts.LoadMachineConfigs != nil {
		t.Errorf("the engine got %d MachineConfigs (loader still set: %v), want %d", len(eng.opts.MachineConfigs), eng.opts.LoadMachineConfigs != nil, len(mcs))
	}

	errLoad := errors.New("mc.yaml: 00-x: spec.config: broken")
	for _, b := range []string{base, "oci:" + filepath.Join(e.dir, "absent") + ":x"} {
		out := filepath.Join(e.dir, "failed")
		opts := e.options(b, "oci:"+out+":x", nil)
		opts.LoadMachineConfigs = func() ([]*machineconfig.MachineConfig, error) { return nil, errLoad }
		if _, err := build.Image(context.Background(), opts); !errors.Is(err, errLoad) || err.Error() != errLoad.Error() {
			t.Errorf("base %s: Run() = %v, want only the loading error", b, err)
		}
		if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("base %s: a failed load left %s (%v)", b, out, err)
		}
		ro := build.RenderOptions{Options: opts.Options, Dir: filepath.Join(e.dir, "render-only")}
		if _, err := build.RenderOnly(context.Background(), ro); !errors.Is(err, errLoad) {
			t.Errorf("base %s: RenderOnly() = %v, want the loading error", b, err)
		}
	}
}

// recordingEngine records the options it is given and builds nothing.
type recordingEngine struct{ opts build.ImageOptions }

func (r *recordingEngine) Build(_ context.Context, p *build.Prepared, opts build.ImageOptions) (digest.Digest, error) {
	r.opts = opts
	return digest.FromBytes(p.ManifestJSON), nil
}

// TestManifestCache: ManifestOf keeps the manifest of a top layer in the
// cache directory and reads it from there, without the layer; a cached
// manifest that the label does not name is not used.
func TestManifestCache(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	layout := filepath.Join(e.dir, "out")
	ref := "oci:" + layout + ":latest"
	res, err := build.Image(ctx, e.options(e.writeBase(t), ref, parityMC(t, "")))
	if err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	_, raw, _, err := image.ManifestOf(ctx, ref, e.images, cache)
	if err != nil || digest.FromBytes(raw) != res.ManifestDigest {
		t.Fatalf("ManifestOf() = %v, digest %s; want %s", err, digest.FromBytes(raw), res.ManifestDigest)
	}
	im, err := image.Open(ctx, ref, e.images)
	if err != nil {
		t.Fatal(err)
	}
	top := im.Layers()[len(im.Layers())-1].Digest
	im.Close()
	cached := filepath.Join(cache, "manifests", "sha256", top.Encoded())
	if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, raw) {
		t.Fatalf("cached manifest %s: %v, same bytes: %v", cached, err, bytes.Equal(b, raw))
	}
	// Without the top layer's blob, the cache serves.
	blob := filepath.Join(layout, "blobs", "sha256", top.Encoded())
	if err := os.Rename(blob, blob+".away"); err != nil {
		t.Fatal(err)
	}
	if m, got, _, err := image.ManifestOf(ctx, ref, e.images, cache); err != nil || !bytes.Equal(got, raw) || m.Base == nil {
		t.Fatalf("ManifestOf() without the layer = %v, same bytes: %v", err, bytes.Equal(got, raw))
	}
	// A cached manifest the label does not name is not used.
	if err := os.WriteFile(cached, append(bytes.Clone(raw), ' '), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, _, err := image.ManifestOf(ctx, ref, e.images, cache); err == nil {
		t.Fatal("ManifestOf() read a cached manifest that does not match the label")
	}
	if err := os.Rename(blob+".away", blob); err != nil {
		t.Fatal(err)
	}
	if _, got, _, err := image.ManifestOf(ctx, ref, e.images, cache); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("ManifestOf() over a wrong cached manifest = %v, same bytes: %v", err, bytes.Equal(got, raw))
	}
	if b, err := os.ReadFile(cached); err != nil || !bytes.Equal(b, raw) {
		t.Errorf("the wrong cached manifest was not replaced: %v", err)
	}
}

// TestBaseDropinsOfEnabledUnit: a base with drop-ins (under /usr and
// /etc) for a unit the MachineConfig enables builds, and enablement reads
// them: the [Install] a base drop-in adds makes its link.
func TestBaseDropinsOfEnabledUnit(t *testing.T) {
	e := newEnv(t)
	base := e.writeBase(t, testbase.Layer{Files: []testbase.File{
		{Path: "usr/lib/systemd/system/crio.service.d/05-base.conf", Mode: 0o644, Content: []byte("[Install]\nWantedBy=sockets.target\n")},
		{Path: "etc/systemd/system/crio.service.d/06-etc.conf", Mode: 0o644, Content: []byte("[Service]\nEnvironment=X=1\n")},
	}})
	mcs, err := machineconfig.Parse("crio.json", []byte(`{"kind": "MachineConfig", "metadata": {"name": "99-crio"},
  "spec": {"config": {"ignition": {"version": "3.4.0"}, "systemd": {"units": [{"name": "crio.service", "enabled": true}]}}}}`))
	if err != nil {
		t.Fatal(err)
	}
	res, err := build.Image(context.Background(), e.options(base, "oci:"+filepath.Join(e.dir, "out")+":latest", mcs))
	if err != nil {
		t.Fatalf("build.Image(base with crio.service drop-ins, crio.service enabled) = %v", err)
	}
	const link = "/etc/systemd/system/sockets.target.wants/crio.service"
	for _, en := range res.Manifest.Entries {
		if en.Path == link {
			if en.Target != "/usr/lib/systemd/system/crio.service" {
				t.Errorf("%s -> %s, want the base's unit", link, en.Target)
			}
			return
		}
	}
	t.Errorf("the manifest has no %s, the link the base drop-in's [Install] makes", link)
}

// TestCreatedDefault: without a timestamp a build is dated the base's
// creation (config.created, history and layer mtimes), reproducibly, not
// 1970; a timestamp wins over it.
func TestCreatedDefault(t *testing.T) {
	e := newEnv(t)
	baseRef := e.writeBase(t)
	ctx := context.Background()
	b, err := image.Open(ctx, baseRef, e.images)
	if err != nil {
		t.Fatal(err)
	}
	baseCreated := b.Config().Created
	b.Close()
	if baseCreated == nil {
		t.Fatal("the test base has no created time")
	}
	for _, c := range []struct {
		name string
		ts   time.Time
		want time.Time
	}{
		{"default", time.Time{}, baseCreated.UTC()},
		{"timestamp", time.Unix(1700000000, 0), time.Unix(1700000000, 0).UTC()},
	} {
		opts := e.options(baseRef, "oci:"+filepath.Join(e.dir, c.name)+":latest", parityMC(t, ""))
		opts.Timestamp = c.ts
		res, err := build.Image(ctx, opts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		im, err := image.Open(ctx, opts.Output, e.images)
		if err != nil {
			t.Fatal(err)
		}
		cfg := im.Config()
		im.Close()
		last := cfg.History[len(cfg.History)-1]
		if cfg.Created == nil || !cfg.Created.Equal(c.want) || last.Created == nil || !last.Created.Equal(c.want) {
			t.Errorf("%s: created %v, history %v; want %v", c.name, cfg.Created, last.Created, c.want)
		}
		if again, err := build.Image(ctx, opts); err != nil || again.ManifestDigest != res.ManifestDigest {
			t.Errorf("%s: a second build = %v, %s; want the same digest %s", c.name, err, again.ManifestDigest, res.ManifestDigest)
		}
	}
}
