// Package debpkg installs the Debian packages tests need.
//
// Ensure finds a command or installs its package, once per process, when it
// is missing and the test runs as root (make test on a fresh CI machine).
package debpkg

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

// aptTimeout bounds one apt-get run.
const aptTimeout = 10 * time.Minute

var (
	mu   sync.Mutex
	done = map[string]error{} // command or path -> the outcome of ensuring it
)

// Ensure makes sure bin is on PATH, installing the Debian package pkg with
// apt-get when it is missing and the process is root. Each bin is tried
// once per process. Safe for concurrent use.
func Ensure(bin, pkg string) error {
	return ensure(bin, pkg, func() error {
		_, err := exec.LookPath(bin)
		return err
	})
}

// EnsureFile makes sure the file path exists (a header or library a test
// builds against), installing the Debian package pkg that ships it when it
// is missing and the process is root. Each path is tried once per process.
// Safe for concurrent use.
func EnsureFile(path, pkg string) error {
	return ensure(path, pkg, func() error {
		_, err := os.Stat(path)
		return err
	})
}

// ensure installs pkg unless present says what (a command or a file) is
// there already, once per what and process.
func ensure(what, pkg string, present func() error) error {
	mu.Lock()
	defer mu.Unlock()
	if err, ok := done[what]; ok {
		return err
	}
	err := presentOrInstall(what, pkg, present)
	done[what] = err
	return err
}

func presentOrInstall(what, pkg string, present func() error) error {
	if present() == nil {
		return nil
	}
	if os.Geteuid() != 0 {
		return fmt.Errorf("%s is not installed (Debian package %s) and installing it needs root", what, pkg)
	}
	if err := Install(pkg); err != nil {
		return fmt.Errorf("installing %s: %w", pkg, err)
	}
	if err := present(); err != nil {
		return fmt.Errorf("package %s installed but %w", pkg, err)
	}
	return nil
}

// Install installs pkgs with apt-get, refreshing the package lists once
// if the first attempt fails (a fresh machine may have none).
func Install(pkgs ...string) error {
	apt, err := exec.LookPath("apt-get")
	if err != nil {
		return errors.New("no apt-get")
	}
	install := append([]string{"-y", "-q", "-o", "DPkg::Lock::Timeout=300", "install", "--no-install-recommends"}, pkgs...)
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
		return fmt.Errorf("apt-get %s: %w: %s", strings.Join(args, " "), err, LastLines(out, 5))
	}
	return nil
}

// LastLines returns the last n lines of out, for error messages.
func LastLines(out []byte, n int) string {
	lines := strings.Split(strings.TrimRight(string(out), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
