package build_test

import (
	"archive/tar"
	"bytes"
	"context"
	"debug/elf"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
)

var testGuard = []byte("#!/bin/sh\n# the revert guard of the build tests\n")

// TestRevertGuard: a build with the guard puts its binary, unit and
// enabling link in a layer of their own under the MachineConfig layer
// (the same layer for another timestamp and other MachineConfigs), records them in the manifest as
// mcbake's own (no MachineConfig's), labels the image, and gives the same
// digest twice. umoci unpacks it, and systemctl --root says the unit is
// enabled from /usr ("static": no [Install] section, a link in /usr). With
// the node binary make guard-bin embeds, the gzip layer splices in its
// deflate encoding (guard.Deflated), which umoci must read as well.
func TestRevertGuard(t *testing.T) {
	t.Run("a test script", func(t *testing.T) { testRevertGuard(t, testGuard) })
	t.Run("the embedded node binary", func(t *testing.T) {
		bin, err := guard.Binary(runtime.GOARCH)
		if err != nil {
			t.Skipf("no embedded node binary (make guard-bin): %v", err)
		}
		if guard.Deflated(digest.FromBytes(bin)) == nil {
			t.Fatal("make guard-bin embedded no deflate encoding of the node binary")
		}
		testRevertGuard(t, bin)
	})
}

func testRevertGuard(t *testing.T, bin []byte) {
	e := newEnv(t)
	baseRef := e.writeBase(t)
	mcs := parityMC(t, "")
	ctx := context.Background()
	out := "oci:" + filepath.Join(e.dir, "guarded") + ":latest"
	opts := e.options(baseRef, out, mcs)
	opts.Guard = bin
	res, err := build.Image(ctx, opts)
	if err != nil {
		t.Fatalf("Image: %v", err)
	}
	opts.Output = "oci:" + filepath.Join(e.dir, "again") + ":latest"
	opts.CacheDir = filepath.Join(e.dir, "cache-again")
	if again, err := build.Image(ctx, opts); err != nil || again.Digest != res.Digest {
		t.Errorf("the same build again: %v, %v; want %s", again, err, res.Digest)
	}
	guardLayer := checkGuardLayer(t, filepath.Join(e.dir, "guarded"))
	// The layer written ahead is the one written once the base is read.
	restore := build.NoGuardAhead()
	opts.Output = "oci:" + filepath.Join(e.dir, "not-ahead") + ":latest"
	opts.CacheDir = filepath.Join(e.dir, "cache-not-ahead")
	notAhead, err := build.Image(ctx, opts)
	restore()
	if err != nil || notAhead.Digest != res.Digest {
		t.Errorf("the build without the guard's layer written ahead: %v, %v; want %s", notAhead, err, res.Digest)
	}
	opts.Output = "oci:" + filepath.Join(e.dir, "other") + ":latest"
	opts.Timestamp = opts.Timestamp.Add(time.Hour)
	opts.MachineConfigs = parityMC(t, disableOpenvswitch)
	if _, err := build.Image(ctx, opts); err != nil {
		t.Fatalf("another build: %v", err)
	}
	if other := checkGuardLayer(t, filepath.Join(e.dir, "other")); other != guardLayer {
		t.Errorf("another timestamp and other MachineConfigs made guard layer %s, want %s", other, guardLayer)
	}
	want := map[string]manifest.Type{guard.BinaryPath: manifest.File, guard.UnitPath: manifest.File, guard.WantsPath: manifest.Symlink}
	for _, o := range res.Manifest.Own {
		if want[o.Path] != o.Type || o.Source != guard.Source {
			t.Errorf("manifest own entry %+v, want one of %v from %v", o, want, guard.Source)
		}
		delete(want, o.Path)
		if _, ok := res.Manifest.Lookup(o.Path); ok {
			t.Errorf("%s is recorded as a MachineConfig's path too", o.Path)
		}
	}
	if len(want) > 0 {
		t.Errorf("the manifest does not record %v as mcbake's own", want)
	}
	fs := readImage(t, filepath.Join(e.dir, "guarded"))
	if n := fs[strings.TrimPrefix(guard.BinaryPath, "/")]; n == nil || n.Mode != 0o755 || n.Digest != digest.FromBytes(bin).String() {
		t.Errorf("the guard's binary in the image: %+v", n)
	}
	im, err := image.Open(ctx, out, e.images)
	if err != nil {
		t.Fatal(err)
	}
	labels := im.Labels()
	im.Close()
	if labels[guard.Label] == "" || labels[image.LabelManifestDigest] == "" {
		t.Errorf("labels %v, want %s and the manifest's", labels, guard.Label)
	}

	root := filepath.Join(e.dir, "rootfs")
	ostreetest.Unpack(t, filepath.Join(e.dir, "guarded"), "latest", root)
	if _, err := exec.LookPath("systemctl"); err != nil {
		t.Skip("systemctl: " + err.Error())
	}
	got, _ := exec.Command("systemctl", "--root="+root, "is-enabled", guard.UnitName).CombinedOutput()
	if s := strings.TrimSpace(string(got)); s != "static" {
		t.Errorf("systemctl --root is-enabled %s = %q, want static (enabled from /usr)", guard.UnitName, s)
	}
	if b, err := os.ReadFile(filepath.Join(root, guard.UnitPath)); err != nil || !bytes.Equal(b, guard.Unit) {
		t.Errorf("the unit in the image: %v", err)
	}
}

// checkGuardLayer checks that the image tagged latest in layout has the
// guard's layer under its top layer: the guard's files, the directory
// they need, mtime the Unix epoch, the guard layer's history entry, and
// nothing of the guard in the top layer. It returns the layer's digest.
func checkGuardLayer(t *testing.T, layout string) digest.Digest {
	t.Helper()
	m := readManifest(t, layout)
	var cfg v1.Image
	readJSON(t, blobPath(layout, m.Config.Digest), &cfg)
	if n := len(cfg.History); n < 2 || cfg.History[n-2].CreatedBy != guard.LayerHistory || !strings.HasPrefix(cfg.History[n-1].CreatedBy, "mcbake build: ") {
		t.Errorf("%s: history %+v, want the guard layer's and then the MachineConfig layer's last", layout, cfg.History)
	}
	gl, top := m.Layers[len(m.Layers)-2], m.Layers[len(m.Layers)-1]
	got := layerHeaders(t, layout, gl)
	var paths []string
	for n, h := range got {
		paths = append(paths, n)
		if !h.ModTime.Equal(time.Unix(0, 0)) {
			t.Errorf("%s: the guard layer's %s has mtime %v, want the Unix epoch", layout, n, h.ModTime)
		}
	}
	slices.Sort(paths)
	want := []string{"usr/libexec/mcbake", strings.TrimPrefix(guard.BinaryPath, "/"), strings.TrimPrefix(guard.UnitPath, "/"), strings.TrimPrefix(guard.WantsPath, "/")}
	slices.Sort(want)
	if !slices.Equal(paths, want) {
		t.Errorf("%s: the guard layer holds %v, want %v", layout, paths, want)
	}
	for n := range layerHeaders(t, layout, top) {
		if slices.Contains(want, n) {
			t.Errorf("%s: the top layer holds %s too", layout, n)
		}
	}
	return gl.Digest
}

// layerHeaders reads layer l of layout: its entries' headers by name.
func layerHeaders(t *testing.T, layout string, l v1.Descriptor) map[string]*tar.Header {
	t.Helper()
	f, err := os.Open(blobPath(layout, l.Digest))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := decompress.Reader(f)
	if err != nil {
		t.Fatal(err)
	}
	entries, err := readTar(zr)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*tar.Header{}
	for _, en := range entries {
		out[en.name] = en.hdr
	}
	return out
}

// TestGuardOnly: with no MachineConfigs, the new layer holds only the
// guard (and the directories it needs): no manifest, no MachineConfig
// labels, so the image stays one built by others.
func TestGuardOnly(t *testing.T) {
	e := newEnv(t)
	baseRef := e.writeBase(t)
	out := "oci:" + filepath.Join(e.dir, "guard-only") + ":latest"
	opts := e.options(baseRef, out, nil)
	opts.Guard = testGuard
	res, err := build.Image(context.Background(), opts)
	if err != nil {
		t.Fatalf("Image: %v", err)
	}
	if res.Manifest != nil {
		t.Errorf("a guard-only build has a manifest: %+v", res.Manifest)
	}
	m := readManifest(t, filepath.Join(e.dir, "guard-only"))
	var names []string
	for n := range layerHeaders(t, filepath.Join(e.dir, "guard-only"), m.Layers[len(m.Layers)-1]) {
		names = append(names, n)
	}
	for _, n := range names {
		if strings.Contains(n, "manifest.json") || strings.HasPrefix(n, "etc/") {
			t.Errorf("a guard-only layer holds %s: %v", n, names)
		}
	}
	for _, p := range []string{guard.BinaryPath, guard.UnitPath, guard.WantsPath} {
		if !slices.Contains(names, strings.TrimPrefix(p, "/")) {
			t.Errorf("a guard-only layer lacks %s: %v", p, names)
		}
	}
	opts.Guard = nil
	if _, err := build.Image(context.Background(), opts); err == nil {
		t.Error("a build with neither MachineConfigs nor a guard succeeded")
	}
}

// TestOutputCheckedFirst: what can never be written is refused before the
// base is opened (for a registry base, before it is downloaded): here the
// base does not exist, and the error is the output's.
func TestOutputCheckedFirst(t *testing.T) {
	base := "oci:" + filepath.Join(t.TempDir(), "no-such-base") + ":latest"
	out := "oci:" + filepath.Join(t.TempDir(), "out") + ":latest"
	for _, tc := range []struct {
		name string
		opts build.ImageOptions
		want string
	}{
		{"no transport", build.ImageOptions{Output: "nosuch:x"}, "missing transport"},
		{"a compression mcbake does not write", build.ImageOptions{Output: out, Compression: "lz4"}, `compression "lz4"`},
		{"GPG signing in a build without it", build.ImageOptions{Output: out, Options: build.Options{Images: image.Options{Sign: image.Signing{By: "me@example.com"}}}}, "--sign-by me@example.com"},
		{"a sigstore key that is not there", build.ImageOptions{Output: out, Options: build.Options{Images: image.Options{Sign: image.Signing{SigstorePrivateKey: "/nonexistent/cosign.key"}}}}, "--sign-by-sigstore-private-key /nonexistent/cosign.key"},
		{"a passphrase with no key", build.ImageOptions{Output: out, Options: build.Options{Images: image.Options{Sign: image.Signing{PassphraseFile: "/dev/null"}}}}, "needs a key"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := tc.opts
			opts.Base, opts.Guard = base, testGuard
			_, err := build.Image(context.Background(), opts)
			if err == nil || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "no-such-base") {
				t.Errorf("Run = %v; want the output's error (%q), before the base is opened", err, tc.want)
			}
		})
	}
}

// TestGuardArch: each platform of a multi-platform build gets the guard
// of its own architecture, and a node binary for another architecture
// than the image's is refused.
func TestGuardArch(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.dir, "multi")
	if _, err := testbase.Write(dir, testbase.Options{Platforms: []string{"linux/amd64", "linux/arm64"}}); err != nil {
		t.Fatal(err)
	}
	machines := map[string]elf.Machine{"amd64": elf.EM_X86_64, "arm64": elf.EM_AARCH64}
	var asked []string
	opts := e.options("oci:"+dir+":latest", "oci:"+filepath.Join(e.dir, "out")+":latest", parityMC(t, ""))
	opts.Platforms = []string{build.AllPlatforms}
	opts.GuardFor = func(arch string) ([]byte, error) {
		asked = append(asked, arch)
		return elfHeader(machines[arch]), nil
	}
	if _, err := build.Image(context.Background(), opts); err != nil {
		t.Fatalf("Image(--platform all): %v", err)
	}
	slices.Sort(asked)
	if !slices.Equal(asked, []string{"amd64", "arm64"}) {
		t.Errorf("the guard was asked for %v, want amd64 and arm64", asked)
	}

	opts.Platforms, opts.Images.Platform = nil, "linux/arm64"
	opts.Output = "oci:" + filepath.Join(e.dir, "wrong") + ":latest"
	opts.GuardFor = func(string) ([]byte, error) { return elfHeader(elf.EM_X86_64), nil }
	_, err := build.Image(context.Background(), opts)
	if err == nil || !strings.Contains(err.Error(), "for linux/amd64, the image for linux/arm64") {
		t.Errorf("Image(arm64 base, amd64 guard) = %v, want a refusal", err)
	}
}

// elfHeader is a minimal ELF64 little-endian executable header for
// machine: what guard.ArchOf reads.
func elfHeader(machine elf.Machine) []byte {
	h := make([]byte, 64)
	copy(h, elf.ELFMAG)
	h[elf.EI_CLASS], h[elf.EI_DATA], h[elf.EI_VERSION] = byte(elf.ELFCLASS64), byte(elf.ELFDATA2LSB), byte(elf.EV_CURRENT)
	binary.LittleEndian.PutUint16(h[16:], uint16(elf.ET_EXEC))
	binary.LittleEndian.PutUint16(h[18:], uint16(machine))
	binary.LittleEndian.PutUint32(h[20:], uint32(elf.EV_CURRENT))
	binary.LittleEndian.PutUint16(h[52:], 64)
	return h
}
