package diff

import (
	"os"
	"testing"

	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/imageenv"
)

// TestMain lets containers-storage run its re-executed helpers out of the
// test binary.
func TestMain(m *testing.M) {
	if image.InitReexec() {
		return
	}
	os.Exit(m.Run())
}

// env is one test's world (imageenv.Env), whose images carry a stand-in
// for the revert guard.
type env struct{ *imageenv.Env }

func newEnv(t *testing.T) *env {
	return &env{imageenv.New(t, []byte("#!/bin/sh\n# the revert guard of diff's tests\n"))}
}

// build bakes the MachineConfig files into a layered image and returns
// its reference.
func (e *env) build(baseRef, name string, files ...string) string {
	e.T.Helper()
	ref, _ := e.Build(build.Gzip, baseRef, name, files...)
	return ref
}
