package ostreevm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"sync"

	"github.com/mcbake/mcbake/internal/testing/debpkg"
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
		if err := debpkg.Install(missing...); err != nil {
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
		msg := strings.TrimSpace(debpkg.LastLines(append(stdout.Bytes(), both.Bytes()...), 15))
		return stdout.String(), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, msg)
	}
	return stdout.String(), nil
}

var (
	selinuxOnce sync.Once
	selinuxOK   bool
	selinuxWhy  string
)

// SELinuxAvailable reports whether SELinux tests can run here: what
// Available checks, and a host ostree built with SELinux support, without
// which Commit and Deploy cannot label anything. When they cannot, the
// string says why; tests t.Skip with it.
func SELinuxAvailable() (bool, string) {
	if ok, why := Available(); !ok {
		return ok, why
	}
	selinuxOnce.Do(func() {
		out, err := run(context.Background(), nil, "ostree", "--version")
		switch {
		case err != nil:
			selinuxWhy = err.Error()
		case !ostreeHasSELinux(out):
			selinuxWhy = "the host's ostree is built without SELinux (ostree --version lists no selinux feature): it cannot label commits"
		default:
			selinuxOK = true
		}
	})
	return selinuxOK, selinuxWhy
}

// ostreeHasSELinux reads the feature list of `ostree --version`.
func ostreeHasSELinux(version string) bool {
	for _, l := range strings.Split(version, "\n") {
		if strings.TrimSpace(l) == "- selinux" {
			return true
		}
	}
	return false
}
