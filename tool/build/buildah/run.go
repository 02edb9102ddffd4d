package buildah

import (
	"errors"
	"fmt"
	"os"
	"os/exec"

	"github.com/openshift/imagebuilder/dockerfile/parser"
)

// runtimes are the OCI runtimes looked up in PATH, in order.
var runtimes = []string{"crun", "runc"}

// checkRuntime returns the OCI runtime to use ("" when the Containerfile
// has no RUN instruction) or ErrNoRuntime.
func checkRuntime(containerfile string) (string, error) {
	run, err := hasRun(containerfile)
	if err != nil || !run {
		return "", err
	}
	for _, name := range runtimes {
		if p, err := exec.LookPath(name); err == nil {
			return p, nil
		}
	}
	return "", ErrNoRuntime
}

// hasRun reports whether any stage of the Containerfile has a RUN
// instruction (ONBUILD RUN runs in later builds, not this one).
func hasRun(containerfile string) (run bool, err error) {
	f, err := os.Open(containerfile)
	if err != nil {
		return false, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	res, err := parser.Parse(f)
	if err != nil {
		return false, fmt.Errorf("parsing %s: %w", containerfile, err)
	}
	for _, n := range res.AST.Children {
		if n.Value == "run" {
			return true, nil
		}
	}
	return false, nil
}
