package ostreevm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// hostTools are the commands the harness runs on the host, with the Debian
// package that ships each. The guest's kernel, busybox and ostree come
// from the base root filesystem (BaseRootfs), not from the host.
var hostTools = []struct{ bin, pkg string }{
	{"qemu-system-x86_64", "qemu-system-x86"},
	{"mmdebstrap", "mmdebstrap"},
	{"ostree", "ostree"},
	{"mke2fs", "e2fsprogs"},
	{"debugfs", "e2fsprogs"},
	{"e2fsck", "e2fsprogs"},
}

// aptTimeout bounds one apt-get run, waiting for another apt-get's lock
// included.
const aptTimeout = 10 * time.Minute

var (
	availOnce sync.Once
	availOK   bool
	availWhy  string
)

// Available reports whether VM tests can run here: the process must be
// root (ostree commits keep owners only for root; mmdebstrap and the disk
// build need it) and the host tools must be on PATH: qemu-system-x86_64
// (qemu-system-x86), mmdebstrap, ostree, and e2fsprogs' mke2fs, debugfs and
// e2fsck. Missing ones are installed with apt-get (package lists refreshed
// once if the first install fails). The answer is computed once per test
// binary. When it cannot run, the string says why; tests t.Skip with it.
//
// The guest's kernel (linux-image-amd64), busybox (busybox-static) and
// ostree-boot are installed into the base root filesystem by BaseRootfs,
// so the host does not need them.
func Available() (bool, string) {
	availOnce.Do(func() {
		availOK, availWhy = available()
	})
	return availOK, availWhy
}

func available() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "needs root (ostree commits keep file owners only as root; mmdebstrap and mke2fs -d need it)"
	}
	var missing []string
	for _, t := range hostTools {
		if _, err := exec.LookPath(t.bin); err != nil && !contains(missing, t.pkg) {
			missing = append(missing, t.pkg)
		}
	}
	if len(missing) > 0 {
		if err := aptInstall(missing...); err != nil {
			return false, fmt.Sprintf("installing %s: %v", strings.Join(missing, " "), err)
		}
	}
	for _, t := range hostTools {
		if _, err := exec.LookPath(t.bin); err != nil {
			return false, fmt.Sprintf("%s not found after installing %s", t.bin, t.pkg)
		}
	}
	return true, ""
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// aptInstall installs pkgs with apt-get, refreshing the package lists once
// if the first attempt fails (a fresh machine may have none).
func aptInstall(pkgs ...string) error {
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

// run runs a command with extra environment env and returns its standard
// output; a failure carries the command line and the last lines of its
// combined output.
func run(ctx context.Context, env []string, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = append(os.Environ(), env...)
	var stdout, both bytes.Buffer
	cmd.Stdout = &stdout
	cmd.Stderr = &both
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(lastLines(append(stdout.Bytes(), both.Bytes()...), 15))
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}
