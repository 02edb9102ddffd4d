package ignitiontest

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/testing/debpkg"
)

// Module is the Go module the ignition binary is built from.
const Module = "github.com/coreos/ignition/v2"

// DefaultCacheDir holds built ignition binaries unless
// MCBAKE_IGNITION_CACHE names another directory.
const DefaultCacheDir = "/var/cache/mcbake-test/ignition"

// blkidHeader is the header ignition's cgo code includes.
const blkidHeader = "/usr/include/blkid/blkid.h"

// CacheDir returns the directory holding built ignition binaries:
// $MCBAKE_IGNITION_CACHE, or DefaultCacheDir.
func CacheDir() string {
	if d := os.Getenv("MCBAKE_IGNITION_CACHE"); d != "" {
		return d
	}
	return DefaultCacheDir
}

// Available reports whether ignition-apply can be built and run here: as
// root (the applied files keep their owners), with the go command, a C
// compiler, libblkid's headers (installed with apt-get when missing) and
// systemctl (ignition-apply runs it to disable units). When it cannot,
// the string says why.
func Available() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "needs root: ignition-apply writes files with their owners"
	}
	if _, err := goCommand(); err != nil {
		return false, err.Error()
	}
	for _, tool := range []string{"cc", "systemctl"} {
		if _, err := exec.LookPath(tool); err != nil {
			return false, fmt.Sprintf("%s is not installed: %v", tool, err)
		}
	}
	if err := debpkg.EnsureFile(blkidHeader, "libblkid-dev"); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// goCommand is the go command of the toolchain running the tests, or the
// one on PATH.
func goCommand() (string, error) {
	if g := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(g) {
		return g, nil
	}
	g, err := exec.LookPath("go")
	if err != nil {
		return "", fmt.Errorf("no go command to build ignition with: %w", err)
	}
	return g, nil
}

func fileExists(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.Mode().IsRegular()
}

var (
	buildOnce sync.Once
	built     string
	buildErr  error
)

// Binary returns the path of the ignition binary, building it once per
// test binary (or taking it from CacheDir); see the package comment. It
// skips the test when Available says no and fails it when the build fails.
func Binary(t testing.TB) string {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skip("ignitiontest: " + why)
	}
	buildOnce.Do(func() { built, buildErr = build() })
	if buildErr != nil {
		t.Fatalf("ignitiontest: building ignition: %v", buildErr)
	}
	return built
}

// build builds ignition's internal main package at the version mcbake
// requires, in the module's directory, into CacheDir.
func build() (string, error) {
	goCmd, err := goCommand()
	if err != nil {
		return "", err
	}
	dir, version, err := module(goCmd)
	if err != nil {
		return "", err
	}
	// Built as Ignition's own build builds it, without the experiment
	// mcbake is built with (GOEXPERIMENT=jsonv2, which runtime.Version
	// names after the release: go1.26.8-X:jsonv2; nojsonv2 because a go
	// env file's setting outlives an empty one).
	release := runtime.Version()
	if i := strings.Index(release, "X:"); i > 0 {
		release = strings.TrimRight(release[:i], " -")
	}
	bin := filepath.Join(CacheDir(), fmt.Sprintf("ignition-%s-%s", version, release), "ignition")
	if fileExists(bin) {
		return bin, nil
	}
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		return "", err
	}
	// Test binaries of several packages may build at once: one builds,
	// the others wait and take its binary.
	unlock, err := lock(filepath.Join(filepath.Dir(bin), "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if fileExists(bin) {
		return bin, nil
	}
	tmp := fmt.Sprintf("%s.tmp-%d", bin, os.Getpid())
	cmd := exec.Command(goCmd, "build", "-o", tmp,
		"-ldflags", "-X "+Module+"/internal/version.Raw="+version, "./internal")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=1", "GOFLAGS=-mod=readonly -buildvcs=false", "GOWORK=off", "GOEXPERIMENT=nojsonv2")
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp)
		return "", fmt.Errorf("go build %s/internal@%s: %w: %s", Module, version, err, strings.TrimSpace(string(out)))
	}
	return bin, os.Rename(tmp, bin)
}

// lock takes an exclusive flock of path, waiting for it, and returns the
// unlock.
func lock(path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX); err != nil {
		return nil, errors.Join(fmt.Errorf("flock %s: %w", path, err), f.Close())
	}
	return func() { _ = f.Close() }, nil
}

// module returns the directory and version of the ignition module in the
// module graph of the module the tests run in.
func module(goCmd string) (dir, version string, err error) {
	out, err := exec.Command(goCmd, "list", "-m", "-json", Module).Output()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			err = fmt.Errorf("%w: %s", err, ee.Stderr)
		}
		return "", "", fmt.Errorf("go list -m %s: %w", Module, err)
	}
	var m struct{ Dir, Version string }
	if err := json.Unmarshal(out, &m); err != nil {
		return "", "", fmt.Errorf("go list -m %s: %w", Module, err)
	}
	if m.Dir == "" || m.Version == "" {
		return "", "", fmt.Errorf("go list -m %s: no directory or version (%s)", Module, out)
	}
	return m.Dir, m.Version, nil
}

// Apply runs ignition-apply on the root directory root with the Ignition
// config cfg (JSON), as a container build does: `ignition-apply --root
// ROOT --ignore-unsupported --offline CONFIG` with container=oci and umask
// 022. It fails the test when ignition-apply fails and returns its log.
func Apply(t testing.TB, root string, cfg []byte) string {
	t.Helper()
	bin := Binary(t)
	dir := t.TempDir()
	cfgFile := filepath.Join(dir, "config.ign")
	if err := os.WriteFile(cfgFile, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	// ignition chooses its mode by the name it runs under.
	apply := filepath.Join(dir, "ignition-apply")
	if err := os.Symlink(bin, apply); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("/bin/sh", "-c", `umask 022 && exec "$0" "$@"`,
		apply, "--root", root, "--ignore-unsupported", "--offline", cfgFile)
	cmd.Env = append(os.Environ(), "container=oci")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("ignition-apply --root %s: %v\n%s", root, err, out)
	}
	return string(out)
}

// CurrentConfig is where the MCO's on-cluster build stores the
// MachineConfig in the image, and the machine-config-daemon on a node.
const CurrentConfig = "/etc/machine-config-daemon/currentconfig"

// ApplyMachineConfig does to root what the MCO's on-cluster build does to
// the base in its Containerfile: it stores the MachineConfig mc (JSON) at
// CurrentConfig (mkdir -p, mode 0644) and runs ignition-apply on its
// spec.config. It returns ignition-apply's log.
func ApplyMachineConfig(t testing.TB, root string, mc []byte) string {
	t.Helper()
	var obj struct {
		Spec struct {
			Config json.RawMessage `json:"config"`
		} `json:"spec"`
	}
	if err := json.Unmarshal(mc, &obj); err != nil || len(obj.Spec.Config) == 0 {
		t.Fatalf("ignitiontest: the MachineConfig has no spec.config (%v)", err)
	}
	cc := filepath.Join(root, CurrentConfig)
	if err := os.MkdirAll(filepath.Dir(cc), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(cc, mc, 0o644); err != nil {
		t.Fatal(err)
	}
	// Whatever the test's umask: as mkdir -p and a shell redirection
	// under umask 022 in the Containerfile make them.
	for p, mode := range map[string]os.FileMode{filepath.Dir(cc): 0o755, cc: 0o644} {
		if err := os.Chmod(p, mode); err != nil {
			t.Fatal(err)
		}
	}
	return Apply(t, root, obj.Spec.Config)
}
