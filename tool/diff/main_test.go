package diff

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

// TestMain lets containers-storage run its re-executed helpers out of the
// test binary.
func TestMain(m *testing.M) {
	if image.InitReexec() {
		return
	}
	os.Exit(m.Run())
}

// env is one test's world: a directory, image options with a temporary
// cache and the insecure policy (the images are generated locally), and
// the default generated base.
type env struct {
	t    *testing.T
	dir  string
	opts image.Options
	base string // oci:DIR:latest of the default testbase image
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	e := &env{t: t, dir: dir, opts: image.Options{InsecurePolicy: true, CacheDir: filepath.Join(dir, "blobinfo")}}
	e.base = e.writeBase("base")
	return e
}

// writeBase writes the default testbase image plus extra layers.
func (e *env) writeBase(name string, extra ...testbase.Layer) string {
	e.t.Helper()
	dir := filepath.Join(e.dir, name)
	if _, err := testbase.Write(dir, testbase.Options{ExtraLayers: extra}); err != nil {
		e.t.Fatal(err)
	}
	return "oci:" + dir + ":latest"
}

// mc writes a MachineConfig whose spec.config is the JSON config (an
// Ignition 3.5 config without the ignition key) to dir/name.json.
func (e *env) mc(name, config string) string {
	e.t.Helper()
	var cfg map[string]any
	if err := json.Unmarshal([]byte(config), &cfg); err != nil {
		e.t.Fatalf("config of %s: %v", name, err)
	}
	cfg["ignition"] = map[string]any{"version": "3.5.0"}
	obj := map[string]any{
		"apiVersion": machineconfig.APIVersion, "kind": machineconfig.Kind,
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"config": cfg},
	}
	b, err := json.MarshalIndent(obj, "", "  ")
	if err != nil {
		e.t.Fatal(err)
	}
	p := filepath.Join(e.dir, name+".json")
	if err := os.WriteFile(p, b, 0o644); err != nil {
		e.t.Fatal(err)
	}
	return p
}

// build bakes the MachineConfig files into a layered image and returns
// its reference.
func (e *env) build(baseRef, name string, files ...string) string {
	e.t.Helper()
	mcs, err := machineconfig.Load(files, nil)
	if err != nil {
		e.t.Fatal(err)
	}
	out := "oci:" + filepath.Join(e.dir, name) + ":latest"
	if _, err := build.Image(context.Background(), build.ImageOptions{Output: out, Options: build.Options{Base: baseRef, MachineConfigs: mcs, Images: e.opts,
		Guard: []byte("#!/bin/sh\n# the revert guard of diff's tests\n")}}); err != nil {
		e.t.Fatalf("build: %v", err)
	}
	return out
}
