package ostreetest

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// DroppedDirs are the top-level directories whose contents
// ostree-container import drops (the directories themselves stay).
var DroppedDirs = []string{"run", "tmp", "proc", "sys", "dev"}

// Fake boot files, added to a tree without a kernel so that ostree admin
// deploy accepts it. They live under /usr, outside the /etc merge.
const (
	fakeKernelDir = "usr/lib/modules/0.0.0-ostreetest"
	fakeOSRelease = "usr/lib/os-release"
)

// stageTree copies the image root src to dst (which must not exist) and
// lays it out as ostree-container import commits an image: /etc moved to
// /usr/etc, the contents of DroppedDirs removed, and a fake kernel and
// os-release added when the image has none.
func stageTree(src, dst string) error {
	if _, err := run(nil, "cp", "-a", "--", src+"/.", dst); err != nil {
		return fmt.Errorf("copying the image root: %w", err)
	}
	if err := MoveEtc(dst); err != nil {
		return err
	}
	for _, d := range DroppedDirs {
		if err := EmptyDir(filepath.Join(dst, d)); err != nil {
			return err
		}
	}
	if err := ensureKernel(dst); err != nil {
		return fmt.Errorf("adding a kernel: %w", err)
	}
	if err := ensureOSRelease(dst); err != nil {
		return fmt.Errorf("adding os-release: %w", err)
	}
	return nil
}

// MoveEtc moves root/etc to root/usr/etc. A tree already in ostree layout
// (usr/etc and no etc) is accepted as it is.
func MoveEtc(root string) error {
	etc, usrEtc := filepath.Join(root, "etc"), filepath.Join(root, "usr", "etc")
	etcFi, etcErr := os.Lstat(etc)
	_, usrEtcErr := os.Lstat(usrEtc)
	switch {
	case etcErr == nil && !etcFi.IsDir():
		return fmt.Errorf("image /etc is a %s, not a directory", etcFi.Mode().Type())
	case etcErr == nil && usrEtcErr == nil:
		return errors.New("image has both /etc and /usr/etc")
	case errors.Is(etcErr, fs.ErrNotExist) && usrEtcErr == nil:
		return nil
	case errors.Is(etcErr, fs.ErrNotExist):
		return errors.New("image has no /etc")
	case etcErr != nil:
		return etcErr
	}
	if err := os.MkdirAll(filepath.Join(root, "usr"), 0o755); err != nil {
		return err
	}
	return os.Rename(etc, usrEtc)
}

// EmptyDir removes the contents of dir when it is a directory (not a
// symlink); a missing dir is fine.
func EmptyDir(dir string) error {
	fi, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) || (err == nil && !fi.IsDir()) {
		return nil
	}
	if err != nil {
		return err
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if err := os.RemoveAll(filepath.Join(dir, e.Name())); err != nil {
			return err
		}
	}
	return nil
}

// ensureKernel adds usr/lib/modules/VERSION/{vmlinuz,initramfs.img} unless
// some usr/lib/modules/*/vmlinuz is a regular file, which is what ostree
// looks for.
func ensureKernel(root string) error {
	found, err := filepath.Glob(filepath.Join(root, "usr", "lib", "modules", "*", "vmlinuz"))
	if err != nil {
		return err
	}
	for _, k := range found {
		if fi, err := os.Stat(k); err == nil && fi.Mode().IsRegular() {
			return nil
		}
	}
	dir := filepath.Join(root, fakeKernelDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "vmlinuz"), []byte("ostreetest fake kernel\n"), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "initramfs.img"), []byte("ostreetest fake initramfs\n"), 0o644)
}

// ensureOSRelease adds usr/lib/os-release when neither it nor
// usr/etc/os-release exists: ostree reads one of them to name the boot
// entry.
func ensureOSRelease(root string) error {
	for _, p := range []string{fakeOSRelease, "usr/etc/os-release"} {
		_, err := os.Lstat(filepath.Join(root, p))
		if err == nil {
			return nil
		}
		if !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	if err := os.MkdirAll(filepath.Join(root, "usr", "lib"), 0o755); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(root, fakeOSRelease), []byte("ID=ostreetest\nVERSION_ID=0\n"), 0o644)
}
