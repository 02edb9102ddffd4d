package verify

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/imageenv"
)

var update = flag.Bool("update", false, "rewrite golden files and docs/rules.md")

// TestMain lets containers-storage run its re-executed helpers out of the
// test binary.
func TestMain(m *testing.M) {
	if image.InitReexec() {
		return
	}
	os.Exit(m.Run())
}

// env is one test's world (imageenv.Env), whose images carry testGuard.
type env struct{ *imageenv.Env }

func newEnv(t *testing.T) *env { return &env{imageenv.New(t, testGuard)} }

// run verifies with the env's image options.
func (e *env) run(o Options) *Report {
	e.T.Helper()
	r, err := e.tryRun(o)
	if err != nil {
		e.T.Fatalf("Run: %v", err)
	}
	return r
}

func (e *env) tryRun(o Options) (*Report, error) {
	o.Images = e.Opts
	return Run(context.Background(), o)
}

// writeMC writes a MachineConfig whose spec.config is the JSON config
// (imageenv.WriteMC).
func writeMC(t *testing.T, dir, name, config string) string {
	t.Helper()
	return imageenv.WriteMC(t, dir, name, config)
}

// build bakes the MachineConfig files into a layered image with the
// append engine and returns its reference.
func (e *env) build(baseRef, name string, files ...string) string {
	e.T.Helper()
	ref, _ := e.buildResult(baseRef, name, files...)
	return ref
}

func (e *env) buildResult(baseRef, name string, files ...string) (string, *build.Result) {
	e.T.Helper()
	return e.buildWith(build.Gzip, baseRef, name, files...)
}

// buildWith builds with a layer compression (build.Gzip or build.Zstd).
func (e *env) buildWith(compression, baseRef, name string, files ...string) (string, *build.Result) {
	e.T.Helper()
	return e.Build(compression, baseRef, name, files...)
}

// testGuard stands for the revert guard's binary in the images the tests
// build, as mcbake build bakes it by default.
var testGuard = []byte("#!/bin/sh\n# the revert guard of verify's tests\n")

// prepare renders MachineConfig files against a base as a build does,
// without writing an image.
func (e *env) prepare(baseRef string, files ...string) *build.Prepared {
	e.T.Helper()
	mcs, err := machineconfig.Load(files, nil)
	if err != nil {
		e.T.Fatal(err)
	}
	b, err := image.OpenBase(context.Background(), baseRef, image.BaseOptions{Images: e.Opts})
	if err != nil {
		e.T.Fatal(err)
	}
	defer b.Close()
	p, err := build.Prepare(context.Background(), b, build.Options{Base: baseRef, MachineConfigs: mcs})
	if err != nil {
		e.T.Fatal(err)
	}
	return p
}

// tarEntry is one entry of a hand-made layer.
type tarEntry struct {
	hdr     tar.Header
	content []byte
}

// layerOf turns rendered entries into tar entries as the append engine
// writes them: at their resolved paths, absent entries as whiteouts.
func layerOf(entries []render.Entry) []tarEntry {
	var out []tarEntry
	for _, e := range entries {
		name := strings.TrimPrefix(e.Where(), "/")
		h := tar.Header{Name: name, Mode: int64(e.Mode), Uid: e.UID, Gid: e.GID, ModTime: time.Unix(0, 0)}
		switch e.Type {
		case manifest.File:
			h.Typeflag, h.Size = tar.TypeReg, int64(len(e.Content))
		case manifest.Directory:
			h.Typeflag, h.Name = tar.TypeDir, name+"/"
		case manifest.Symlink:
			h.Typeflag, h.Linkname = tar.TypeSymlink, e.Target
		case manifest.Hardlink:
			h.Typeflag, h.Linkname = tar.TypeLink, strings.TrimPrefix(e.Target, "/")
		case manifest.Absent:
			h = tar.Header{Typeflag: tar.TypeReg, Name: filepath.Join(filepath.Dir(name), ".wh."+filepath.Base(name)), ModTime: time.Unix(0, 0)}
		}
		out = append(out, tarEntry{hdr: h, content: e.Content})
	}
	return out
}

// manifestFile is the tar entry of an embedded manifest.
func manifestFile(raw []byte) tarEntry {
	return tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "usr/share/mcbake/manifest.json", Mode: 0o644, Size: int64(len(raw)), ModTime: time.Unix(0, 0)}, content: raw}
}

// appendImage writes baseRef plus one uncompressed layer holding entries,
// with labels, to e.Dir/name, and returns its reference.
func (e *env) appendImage(baseRef, name string, entries []tarEntry, labels map[string]string) string {
	e.T.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, te := range entries {
		h := te.hdr
		if err := tw.WriteHeader(&h); err != nil {
			e.T.Fatal(err)
		}
		if _, err := tw.Write(te.content); err != nil {
			e.T.Fatal(err)
		}
	}
	if err := tw.Close(); err != nil {
		e.T.Fatal(err)
	}
	blob := filepath.Join(e.Dir, name+".layer")
	if err := os.WriteFile(blob, buf.Bytes(), 0o644); err != nil {
		e.T.Fatal(err)
	}
	sum := sha256.Sum256(buf.Bytes())
	d := digest.Digest("sha256:" + hex.EncodeToString(sum[:]))
	b, err := image.Open(context.Background(), baseRef, e.Opts)
	if err != nil {
		e.T.Fatal(err)
	}
	defer b.Close()
	out := "oci:" + filepath.Join(e.Dir, name) + ":latest"
	_, err = image.Append(context.Background(), b, out, image.AppendOptions{
		Layers: []image.NewLayer{{Path: blob, Digest: d, DiffID: d, Size: int64(buf.Len()), MediaType: v1.MediaTypeImageLayer, History: "test"}},
		Labels: labels,
	}, e.Opts)
	if err != nil {
		e.T.Fatal(err)
	}
	return out
}

// fieldsOf lists "FIELD PATH" of findings, for comparisons.
func fieldsOf(fs []Finding) []string {
	var out []string
	for _, f := range fs {
		out = append(out, fmt.Sprintf("%s %s %s", f.MachineConfig, f.Field, f.Path))
	}
	return out
}
