package revert_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/imagestest"
)

// TestMain lets containers/image run its re-executed helpers out of the
// test binary (build.Image writes images through it).
func TestMain(m *testing.M) {
	if image.InitReexec() {
		return
	}
	os.Exit(m.Run())
}

// env is a test's private directories: TMPDIR, caches and an empty
// registries.conf.
type env struct {
	dir, cache string
	images     image.Options
}

// newEnv gives the test its own TMPDIR and cache directory. It uses
// t.Setenv, so the test itself cannot be parallel (its subtests can).
func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	return &env{dir: dir, cache: filepath.Join(dir, "cache"), images: imagestest.Isolate(t, dir)}
}

// writeBase writes the RHCOS-like test base with opts into the directory
// name of the environment and returns its oci: reference.
func (e *env) writeBase(t *testing.T, name string, opts testbase.Options) string {
	t.Helper()
	dir := filepath.Join(e.dir, name)
	if _, err := testbase.Write(dir, opts); err != nil {
		t.Fatalf("testbase.Write(%s): %v", name, err)
	}
	return "oci:" + dir + ":latest"
}

// openBase opens and indexes ref.
func (e *env) openBase(t *testing.T, ref string) *image.Base {
	t.Helper()
	b, err := image.OpenBase(context.Background(), ref, image.BaseOptions{Images: e.images, CacheDir: e.cache})
	if err != nil {
		t.Fatalf("image.OpenBase(%s): %v", ref, err)
	}
	t.Cleanup(func() {
		if err := b.Close(); err != nil {
			t.Errorf("closing %s: %v", ref, err)
		}
	})
	return b
}

// loadMCs loads MachineConfig files.
func loadMCs(t *testing.T, files ...string) []*machineconfig.MachineConfig {
	t.Helper()
	mcs, err := machineconfig.Load(files, nil)
	if err != nil {
		t.Fatalf("machineconfig.Load(%v): %v", files, err)
	}
	return mcs
}

// diff is revert.Diff, failing the test on an error.
func diff(t *testing.T, m *manifest.Manifest, image, base manifest.ImageRef, tree fstree.Tree) *revert.Report {
	t.Helper()
	r, err := revert.Diff(context.Background(), m, image, base, tree)
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	return r
}
