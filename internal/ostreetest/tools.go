package ostreetest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// aptTimeout bounds one apt-get run: waiting for another apt-get's lock
// included.
const aptTimeout = 10 * time.Minute

var (
	toolsMu sync.Mutex
	// toolErrs remembers each tool's outcome so that apt-get runs at most
	// once per tool and test binary.
	toolErrs = map[string]error{}
)

// ensureTool makes sure bin is on PATH, installing the Debian package pkg
// with apt-get when it is missing and we are root. Safe for concurrent use.
func ensureTool(bin, pkg string) error {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if err, done := toolErrs[bin]; done {
		return err
	}
	err := lookOrInstall(bin, pkg)
	toolErrs[bin] = err
	return err
}

func lookOrInstall(bin, pkg string) error {
	onPath := func() error {
		_, err := exec.LookPath(bin)
		return err
	}
	return presentOrInstall(bin, pkg, onPath)
}

// EnsureFile makes sure the file path exists, installing the Debian
// package pkg that ships it with apt-get when it is missing and we are
// root (a header or library a test builds against). Safe for concurrent
// use; apt-get runs at most once per path and test binary.
func EnsureFile(path, pkg string) error {
	toolsMu.Lock()
	defer toolsMu.Unlock()
	if err, done := toolErrs[path]; done {
		return err
	}
	err := presentOrInstall(path, pkg, func() error {
		_, err := os.Stat(path)
		return err
	})
	toolErrs[path] = err
	return err
}

// presentOrInstall installs pkg unless present says what (a command or
// a file) is there already.
func presentOrInstall(what, pkg string, present func() error) error {
	if present() == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is not installed (Debian package %s) and installing it needs root", what, pkg)
	}
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return fmt.Errorf("%s is not installed (Debian package %s) and there is no apt-get", what, pkg)
	}
	if err := aptInstall(apt, pkg); err != nil {
		return fmt.Errorf("installing %s: %w", pkg, err)
	}
	if err := present(); err != nil {
		return fmt.Errorf("package %s installed but %w", pkg, err)
	}
	return nil
}

// EnsureTool makes sure bin is on PATH, installing the Debian package pkg
// with apt-get when it is missing and we are root. Safe for concurrent
// use.
func EnsureTool(bin, pkg string) error { return ensureTool(bin, pkg) }

// aptInstall installs pkg, refreshing the package lists once if the first
// attempt fails (a fresh machine may have none).
func aptInstall(apt, pkg string) error {
	install := []string{"-y", "-q", "-o", "DPkg::Lock::Timeout=300", "install", "--no-install-recommends", pkg}
	if runApt(apt, install...) == nil {
		return nil
	}
	if err := runApt(apt, "-q", "-o", "DPkg::Lock::Timeout=300", "update"); err != nil {
		return err
	}
	return runApt(apt, install...)
}

func runApt(apt string, args ...string) error {
	ctx, cancel := context.WithTimeout(context.Background(), aptTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, apt, args...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, lastLines(out, 5))
	}
	return nil
}

// lastLines returns the last n lines of out, for error messages.
func lastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

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
