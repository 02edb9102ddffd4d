package ostreetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"

	"github.com/mcbake/mcbake/internal/testing/debpkg"
)

// ensureTool makes sure bin is on PATH, installing the Debian package pkg
// with apt-get when it is missing and we are root.
func ensureTool(bin, pkg string) error { return debpkg.Ensure(bin, pkg) }

// run runs a command and returns its combined output; a failure carries
// the command line and the output.
func run(env []string, name string, args ...string) (string, error) {
	cmd := exec.Command(name, args...)
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
		return string(out), fmt.Errorf("%s: %w", name, err)
	}
	return string(out), nil
}
