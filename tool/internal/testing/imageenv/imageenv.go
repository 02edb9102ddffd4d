// Package imageenv is the world of tests that build and read images.
//
// An Env is a test's directory, image options (a temporary blob-info
// cache, the insecure policy: the images are generated locally) and the
// default generated base; it writes MachineConfigs and builds layered
// images with the append engine. verify's and diff's tests share it.
package imageenv

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/image"
)

// Env is one test's world.
type Env struct {
	T    *testing.T
	Dir  string
	Opts image.Options
	Base string // oci:DIR:latest of the default testbase image
	// Guard stands for the revert guard's binary in the images Build
	// makes, as mcbake build bakes one by default.
	Guard []byte
}

// New makes a test's world in a temporary directory, with the default
// base written.
func New(t *testing.T, guard []byte) *Env {
	t.Helper()
	dir := t.TempDir()
	e := &Env{T: t, Dir: dir, Opts: image.Options{InsecurePolicy: true, CacheDir: filepath.Join(dir, "blobinfo")}, Guard: guard}
	e.Base = e.WriteBase("base")
	return e
}

// WriteBase writes the default testbase image plus extra layers.
func (e *Env) WriteBase(name string, extra ...testbase.Layer) string {
	e.T.Helper()
	dir := filepath.Join(e.Dir, name)
	if _, err := testbase.Write(dir, testbase.Options{ExtraLayers: extra}); err != nil {
		e.T.Fatal(err)
	}
	return "oci:" + dir + ":latest"
}

// MC writes a MachineConfig whose spec.config is the JSON config (an
// Ignition 3.5 config without the ignition key) to Dir/name.json.
func (e *Env) MC(name, config string) string {
	e.T.Helper()
	return WriteMC(e.T, e.Dir, name, config)
}

// WriteMC writes a MachineConfig whose spec.config is the JSON config to
// dir/name.json, indented so that fields have lines of their own.
func WriteMC(t testing.TB, dir, name, config string) string {
	t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		t.Fatalf("config of %s: %v", name, err)
	}
	cfg["ignition"] = map[string]any{"version": "3.5.0"}
	obj := map[string]any{
		"apiVersion": machineconfig.APIVersion, "kind": machineconfig.Kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"config": cfg},
	}
	b, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, name+".json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// Build bakes the MachineConfig files into a layered image with the
// append engine and a layer compression (build.Gzip or build.Zstd), and
// returns its reference and the build's result.
func (e *Env) Build(compression, baseRef, name string, files ...string) (string, *build.Result) {
	e.T.Helper()
	mcs, err := machineconfig.Load(files, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	out := "oci:" + filepath.Join(e.Dir, name) + ":latest"
	res, err := build.Image(context.Background(), build.ImageOptions{Output: out, Compression: compression,
		Options: build.Options{Base: baseRef, MachineConfigs: mcs, Images: e.Opts, Guard: e.Guard}})
	if err != nil {
		e.T.Fatalf("build: %v", err)
	}
	return out, res
}
