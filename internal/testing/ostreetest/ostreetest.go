package ostreetest

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// Stateroot is the ostree stateroot ("osname") the harness deploys into.
const Stateroot = "mcbake"

// Refs the two images are committed to.
const (
	refL = "mcbake/layered"
	refB = "mcbake/base"
)

// ostreeEnv is passed to every ostree command. mutable-deployments stops
// ostree from sealing deployment roots with chattr +i, so that t.TempDir
// can remove them; it changes nothing else (see the package comment).
var ostreeEnv = []string{"OSTREE_SYSROOT_DEBUG=mutable-deployments"}

// Available reports whether the harness can run: it needs root (ostree
// keeps real owners only for root, and deploys write a sysroot) and the
// ostree command, which it installs with apt-get when missing. When it
// cannot run, the string says why.
func Available() (bool, string) {
	if os.Geteuid() != 0 {
		return false, "needs root: ostree commits keep file owners and deploys write a sysroot only as root"
	}
	if err := ensureTool("ostree", "ostree"); err != nil {
		return false, err.Error()
	}
	return true, ""
}

// Revert simulates a node reverting from image L to image B with real
// ostree: it commits lRoot and bRoot (unpacked image root filesystems,
// which it does not modify) into a fresh repository, moving each tree's
// /etc to /usr/etc as ostree-container import does and dropping the
// contents of /run, /tmp, /proc, /sys and /dev; creates a sysroot; deploys
// L; calls mcdWrite(etcDir), where etcDir is the L deployment's /etc on
// the host, so that the test writes files into it exactly as the
// machine-config-daemon would; then deploys B with `ostree admin deploy`,
// which performs ostree's three-way /etc merge from the L deployment; and
// returns the B deployment's root directory on the host.
//
// Everything lives in t.TempDir(). Revert skips the test when Available
// says no, and fails it when a step fails (including ostree refusing the
// merge, e.g. a node file where B has a directory). The node's persistent
// /var is VarDir(root), not root/var.
func Revert(t testing.TB, lRoot, bRoot string, mcdWrite func(etcDir string) error) string {
	t.Helper()
	root, err := TryRevert(t, lRoot, bRoot, mcdWrite)
	if err != nil {
		t.Fatalf("ostreetest.Revert: %v", err)
	}
	return root
}

// TryRevert is Revert returning the error of a step that fails, such as
// ostree refusing the deployment, instead of failing the test.
func TryRevert(t testing.TB, lRoot, bRoot string, mcdWrite func(etcDir string) error) (string, error) {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skip("ostreetest: " + why)
	}
	work := t.TempDir()
	t.Cleanup(func() { unseal(work) })
	root, out, err := revert(work, lRoot, bRoot, mcdWrite)
	if out != "" {
		t.Logf("ostree admin deploy (B): %s", strings.TrimSpace(out))
	}
	return root, err
}

// VarDir returns the /var a node booted into the deployment whose root is
// deployRoot sees: its stateroot's shared var directory
// (SYSROOT/ostree/deploy/STATEROOT/var). It is the same directory for L
// and B, and deploys never touch it.
func VarDir(deployRoot string) string {
	return filepath.Join(filepath.Dir(filepath.Dir(deployRoot)), "var")
}

// revert is Revert without testing.TB: it returns the B deployment root
// and the output of the B deploy (ostree's "Copying /etc changes" line).
func revert(work, lRoot, bRoot string, mcdWrite func(etcDir string) error) (string, string, error) {
	s := sysroot{dir: filepath.Join(work, "sysroot")}
	if err := s.init(); err != nil {
		return "", "", fmt.Errorf("creating sysroot: %w", err)
	}
	if err := s.commitImage(lRoot, filepath.Join(work, "tree-l"), refL, nil); err != nil {
		return "", "", fmt.Errorf("committing L: %w", err)
	}
	if err := s.commitImage(bRoot, filepath.Join(work, "tree-b"), refB, nil); err != nil {
		return "", "", fmt.Errorf("committing B: %w", err)
	}
	lDeploy, _, err := s.deploy(refL)
	if err != nil {
		return "", "", fmt.Errorf("deploying L: %w", err)
	}
	if err := mcdWrite(filepath.Join(lDeploy, "etc")); err != nil {
		return "", "", fmt.Errorf("writing the node's /etc: %w", err)
	}
	bDeploy, out, err := s.deploy(refB)
	if err != nil {
		return "", out, fmt.Errorf("deploying B: %w", err)
	}
	return bDeploy, out, nil
}

// Staged is the state of a node at the moment a revert is prepared.
type Staged struct {
	// Sysroot is the ostree physical root.
	Sysroot string
	// Booted is the L deployment's root directory (its etc is the node's
	// /etc, written by mcdWrite; its usr/etc L's defaults), Staged the B
	// deployment's, whose etc is a fresh copy of B's usr/etc, as staging
	// makes it.
	Booted, Staged string
}

// Stage is Revert up to the staging: it deploys L, calls mcdWrite, then
// deploys B with --no-merge, which checks B out with an /etc that is a
// copy of B's defaults and merges nothing, as `ostree admin deploy
// --stage` does until finalization (staging itself needs a booted
// system). The B deployment gets a bootloader entry, which a staged one
// would only get at finalization.
func Stage(t testing.TB, lRoot, bRoot string, mcdWrite func(etcDir string) error) Staged {
	t.Helper()
	return StageWith(t, StageOptions{L: lRoot, B: bRoot, MCDWrite: mcdWrite})
}

// StageOptions say what StageWith stages: the image roots, the commit
// metadata of each (e.g. the keys ostree-ext records for the container
// image a commit was made from) and the machine-config-daemon's writes.
type StageOptions struct {
	L, B         string
	LMeta, BMeta map[string]string
	MCDWrite     func(etcDir string) error
}

// StageWith is Stage with commit metadata.
func StageWith(t testing.TB, o StageOptions) Staged {
	t.Helper()
	lRoot, bRoot, mcdWrite := o.L, o.B, o.MCDWrite
	if ok, why := Available(); !ok {
		t.Skip("ostreetest: " + why)
	}
	work := t.TempDir()
	t.Cleanup(func() { unseal(work) })
	s := sysroot{dir: filepath.Join(work, "sysroot")}
	var st Staged
	err := func() error {
		if err := s.init(); err != nil {
			return fmt.Errorf("creating sysroot: %w", err)
		}
		if err := s.commitImage(lRoot, filepath.Join(work, "tree-l"), refL, o.LMeta); err != nil {
			return fmt.Errorf("committing L: %w", err)
		}
		if err := s.commitImage(bRoot, filepath.Join(work, "tree-b"), refB, o.BMeta); err != nil {
			return fmt.Errorf("committing B: %w", err)
		}
		lDeploy, _, err := s.deploy(refL)
		if err != nil {
			return fmt.Errorf("deploying L: %w", err)
		}
		if err := mcdWrite(filepath.Join(lDeploy, "etc")); err != nil {
			return fmt.Errorf("writing the node's /etc: %w", err)
		}
		bDeploy, _, err := s.deploy(refB, "--no-merge", "--retain")
		if err != nil {
			return fmt.Errorf("deploying B: %w", err)
		}
		st = Staged{Sysroot: s.dir, Booted: lDeploy, Staged: bDeploy}
		return nil
	}()
	if err != nil {
		t.Fatalf("ostreetest.Stage: %v", err)
	}
	return st
}

// sysroot is an ostree physical root in a directory.
type sysroot struct {
	dir string
}

func (s sysroot) repo() string { return filepath.Join(s.dir, "ostree", "repo") }

func (s sysroot) deployDir() string {
	return filepath.Join(s.dir, "ostree", "deploy", Stateroot, "deploy")
}

// init creates the sysroot, its repository and the stateroot, with no
// bootloader: the sysroot is never booted.
func (s sysroot) init() error {
	if err := os.Mkdir(s.dir, 0o755); err != nil {
		return err
	}
	steps := [][]string{
		{"admin", "init-fs", "--modern", s.dir},
		{"admin", "os-init", "--sysroot=" + s.dir, Stateroot},
		{"config", "--repo=" + s.repo(), "set", "sysroot.bootloader", "none"},
		// No fsync/syncfs: a throwaway sysroot need not survive a crash,
		// and syncfs would wait for every dirty page of the filesystem.
		{"config", "--repo=" + s.repo(), "set", "core.fsync", "false"},
	}
	for _, args := range steps {
		if _, err := run(ostreeEnv, "ostree", args...); err != nil {
			return err
		}
	}
	return nil
}

// commitImage stages a copy of the image root imageRoot in stage, the way
// ostree-container import lays it out, and commits it to ref. The commit
// keeps owners, modes, contents and symlink targets; it drops xattrs,
// which the /etc merge ignores.
func (s sysroot) commitImage(imageRoot, stage, ref string, meta map[string]string) error {
	if err := stageTree(imageRoot, stage); err != nil {
		return err
	}
	args := []string{"commit", "--repo=" + s.repo(), "--branch=" + ref, "--tree=dir=" + stage, "--no-xattrs", "--subject=" + ref}
	for _, k := range slices.Sorted(maps.Keys(meta)) {
		args = append(args, "--add-metadata-string="+k+"="+meta[k])
	}
	_, err := run(ostreeEnv, "ostree", args...)
	return err
}

// deploy deploys ref with `ostree admin deploy` and returns the new
// deployment's root directory and ostree's output. The sysroot is not
// booted, so the merge deployment is the first deployment of the
// stateroot: the one deployed last.
func (s sysroot) deploy(ref string, flags ...string) (string, string, error) {
	before, err := s.deployments()
	if err != nil {
		return "", "", err
	}
	args := append([]string{"admin", "deploy", "--sysroot=" + s.dir, "--os=" + Stateroot}, flags...)
	out, err := run(ostreeEnv, "ostree", append(args, ref)...)
	if err != nil {
		return "", out, err
	}
	after, err := s.deployments()
	if err != nil {
		return "", out, err
	}
	added := slices.DeleteFunc(after, func(d string) bool { return slices.Contains(before, d) })
	if len(added) != 1 {
		return "", out, fmt.Errorf("deploying %s: want one new deployment, found %q", ref, added)
	}
	return filepath.Join(s.deployDir(), added[0]), out, nil
}

// deployments lists the deployment directories (CHECKSUM.SERIAL).
func (s sysroot) deployments() ([]string, error) {
	ents, err := os.ReadDir(s.deployDir())
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var dirs []string
	for _, e := range ents {
		if e.IsDir() {
			dirs = append(dirs, e.Name())
		}
	}
	return dirs, nil
}

// fsImmutableFL is FS_IMMUTABLE_FL from linux/fs.h (chattr +i).
const fsImmutableFL = 0x10

// unseal clears the immutable flag ostree sets on deployment roots, should
// a deployment have been sealed anyway, so that the work directory can be
// removed. Errors are ignored: removal reports what is left.
func unseal(work string) {
	roots, _ := filepath.Glob(filepath.Join(work, "sysroot", "ostree", "deploy", "*", "deploy", "*"))
	for _, r := range roots {
		f, err := os.Open(r)
		if err != nil {
			continue
		}
		if flags, err := unix.IoctlGetUint32(int(f.Fd()), unix.FS_IOC_GETFLAGS); err == nil && flags&fsImmutableFL != 0 {
			_ = unix.IoctlSetPointerInt(int(f.Fd()), unix.FS_IOC_SETFLAGS, int(flags&^fsImmutableFL))
		}
		_ = f.Close()
	}
}
