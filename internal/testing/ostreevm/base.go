package ostreevm

import (
	"bytes"
	"context"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/mcbake/mcbake/internal/testing/debpkg"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"golang.org/x/sys/unix"
)

// guestFS holds what the harness bakes into the base root filesystem, and
// the source of the code that bakes it: all of it goes into the cache key,
// so that changing any of it rebuilds the cached root filesystem.
//
//go:embed guest base.go initramfs.go
var guestFS embed.FS

// Suite is the Debian release of the base root filesystem.
const Suite = "bookworm"

// DefaultMirror is the Debian mirror mmdebstrap installs from, unless
// MCBAKE_VM_MIRROR names another.
const DefaultMirror = "http://deb.debian.org/debian"

// DefaultCacheDir holds cached root filesystems unless MCBAKE_VM_CACHE
// names another directory.
const DefaultCacheDir = "/var/cache/mcbake-test/vm"

// BasePackages are installed by mmdebstrap --variant=minbase into the base
// root filesystem. tiny-initramfs only satisfies linux-image's
// linux-initramfs-tool dependency (cheaper than initramfs-tools); its
// output is deleted and replaced by the harness's own initramfs.
var BasePackages = []string{
	"systemd", "systemd-sysv", "udev", "kmod", "ostree", "ostree-boot",
	"linux-image-amd64", "tiny-initramfs", "busybox-static",
	"util-linux", "mount", "e2fsprogs",
}

// pathExcludes keep documentation, manual pages and translations out of
// the root filesystem (dpkg --path-exclude).
var pathExcludes = []string{
	"/usr/share/doc/*", "/usr/share/man/*", "/usr/share/info/*",
	"/usr/share/locale/*", "/usr/share/lintian/*",
}

// keepModules are the kernel modules kept in the base root filesystem
// (with their dependencies); all others are deleted, which takes the root
// filesystem from about 640 MB to about 250 MB. The guest has only virtio
// devices.
var keepModules = append([]string{"autofs4", "virtio_console", "virtio_rng", "crc32c_intel"}, initramfsModules...)

// MachineID is the guest's /etc/machine-id. An empty one would start
// systemd-firstboot, which waits on the console.
const MachineID = "6d63626b65766d0000000000000000a1"

// Guest paths the harness installs.
const (
	driverPath = "usr/libexec/vmtest-driver"
	driverUnit = "vmtest-driver.service"
)

// maskedUnits are masked in the base root filesystem: serial and VT
// gettys (they swallow console output), timers and jobs that only cost
// boot time under TCG, and ConditionNeedsUpdate=/etc jobs that would run
// on every ostree boot (the commit's /usr has mtime 0).
var maskedUnits = []string{
	"getty@.service", "serial-getty@.service", "console-getty.service", "getty-static.service",
	"systemd-networkd-wait-online.service",
	"apt-daily.service", "apt-daily.timer", "apt-daily-upgrade.service", "apt-daily-upgrade.timer",
	"dpkg-db-backup.service", "dpkg-db-backup.timer",
	"e2scrub_all.service", "e2scrub_all.timer", "e2scrub_reap.service",
	"fstrim.service", "fstrim.timer", "systemd-tmpfiles-clean.timer",
	"systemd-hwdb-update.service", "ldconfig.service", "systemd-journal-catalog-update.service",
	"systemd-update-done.service", "systemd-pstore.service", "systemd-firstboot.service",
}

// A variant of the base root filesystem: a name for its cache key,
// packages installed besides BasePackages, what is baked into the
// mmdebstrap tree before the base's baking (nil for nothing), and the
// source of the code that does it, for the cache key.
type variant struct {
	name     string
	packages []string
	bake     func(ctx context.Context, root string) error
	source   []byte
}

// plainBase is the base root filesystem itself.
var plainBase = variant{}

// cacheKey hashes everything a variant of the base root filesystem
// depends on: suite, mirror, packages, excludes, kept modules, masks,
// machine-id, the embedded guest files and baking code, and a variant's
// name, packages and baking code.
func cacheKey(mirror string, v variant) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "suite=%s\nmirror=%s\npackages=%q\nexcludes=%q\nmodules=%q\nmasked=%q\nmachine-id=%s\n",
		Suite, mirror, BasePackages, pathExcludes, keepModules, maskedUnits, MachineID)
	if v.name != "" {
		fmt.Fprintf(h, "variant=%s\nextra-packages=%q\nsource %d\n", v.name, v.packages, len(v.source))
		h.Write(v.source)
	}
	var names []string
	err := fs.WalkDir(guestFS, ".", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			names = append(names, p)
		}
		return err
	})
	if err != nil {
		return "", err
	}
	sort.Strings(names)
	for _, n := range names {
		b, err := guestFS.ReadFile(n)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(h, "file %s %d\n", n, len(b))
		h.Write(b)
	}
	return hex.EncodeToString(h.Sum(nil))[:20], nil
}

// CacheDir returns the directory holding cached root filesystems:
// $MCBAKE_VM_CACHE, or DefaultCacheDir.
func CacheDir() string {
	if d := os.Getenv("MCBAKE_VM_CACHE"); d != "" {
		return d
	}
	return DefaultCacheDir
}

// BaseRootfs returns the directory of a Debian bookworm root filesystem
// that boots as an ostree OS commit under the harness: mmdebstrap
// --variant=minbase with BasePackages, documentation and translations
// excluded, kernel modules pruned to keepModules, the kernel at
// usr/lib/modules/KVER/vmlinuz next to the harness's busybox initramfs
// (usr/lib/modules/KVER/initramfs.img; /boot emptied), the /sysroot
// directory and /ostree -> sysroot/ostree symlink that ostree-prepare-root
// needs in a deployment, /etc/machine-id set
// to MachineID, default.target multi-user.target, maskedUnits masked, a
// persistent journal, and the guest test driver (vmtest-driver.service,
// wanted by multi-user.target) installed. The tree is laid out as an
// image root (etc at /etc), the way Commit and PackOCI take it.
//
// The tree is built once per machine and cached in CacheDir() as
// rootfs-KEY, KEY a hash of the package list, mirror and everything the
// harness bakes in (see cacheKey). Concurrent callers in any process
// serialize on an flock of CacheDir()/lock; a build happens in a temporary
// directory renamed into place at the end, and temporaries left by killed
// builds are removed by the next build, and so are root filesystems of
// other keys unused for a week (each use sets the directory's mtime).
// Callers must not modify the returned directory, nor files in a
// hard-linked copy of it: copy it (cp -a).
//
// BaseRootfs needs what Available checks (root, mmdebstrap) and the
// Debian mirror; a build takes about a minute.
func BaseRootfs(ctx context.Context) (string, error) {
	return rootfs(ctx, plainBase)
}

// rootfs builds, or finds in the cache, the variant v of the base root
// filesystem (see BaseRootfs).
func rootfs(ctx context.Context, v variant) (string, error) {
	if ok, why := Available(); !ok {
		return "", errors.New(why)
	}
	mirror := DefaultMirror
	if m := os.Getenv("MCBAKE_VM_MIRROR"); m != "" {
		mirror = m
	}
	key, err := cacheKey(mirror, v)
	if err != nil {
		return "", err
	}
	cache := CacheDir()
	final := filepath.Join(cache, "rootfs-"+key)
	if isDir(final) {
		markUsed(final)
		return final, nil
	}
	if err := os.MkdirAll(cache, 0o755); err != nil {
		return "", err
	}
	unlock, err := lockFile(ctx, filepath.Join(cache, "lock"))
	if err != nil {
		return "", err
	}
	defer unlock()
	if isDir(final) {
		return final, nil
	}
	stale, _ := filepath.Glob(filepath.Join(cache, "tmp-*"))
	for _, s := range stale {
		if err := os.RemoveAll(s); err != nil {
			return "", fmt.Errorf("removing a killed build: %w", err)
		}
	}
	tmp := filepath.Join(cache, fmt.Sprintf("tmp-%s-%d", key, os.Getpid()))
	if err := buildRootfs(ctx, tmp, mirror, v); err != nil {
		return "", errors.Join(err, os.RemoveAll(tmp))
	}
	if err := os.Rename(tmp, final); err != nil {
		return "", errors.Join(err, os.RemoveAll(tmp))
	}
	markUsed(final)
	pruneCache(cache, final)
	return final, nil
}

// markUsed sets the mtime of a cached root filesystem to now: pruneCache
// keeps what was used recently.
func markUsed(dir string) {
	now := time.Now()
	_ = os.Chtimes(dir, now, now)
}

// pruneUnused is how long a cached root filesystem of another key stays
// after its last use: another checkout of the harness may still use it.
const pruneUnused = 7 * 24 * time.Hour

// pruneCache removes the root filesystems in cache other than keep that
// were not used for pruneUnused. It runs under the cache lock.
func pruneCache(cache, keep string) {
	old, _ := filepath.Glob(filepath.Join(cache, "rootfs-*"))
	for _, d := range old {
		if fi, err := os.Stat(d); err == nil && d != keep && time.Since(fi.ModTime()) > pruneUnused {
			_ = os.RemoveAll(d)
		}
	}
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// lockFile takes an exclusive flock on path, polling so that ctx can
// cancel the wait, and returns the function that releases it.
func lockFile(ctx context.Context, path string) (func(), error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err == nil {
			return func() { _ = f.Close() }, nil
		}
		if !errors.Is(err, unix.EWOULDBLOCK) {
			_ = f.Close()
			return nil, fmt.Errorf("flock %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			_ = f.Close()
			return nil, ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// buildRootfs runs mmdebstrap into dir (which must not exist) and bakes
// the result as the variant v.
func buildRootfs(ctx context.Context, dir, mirror string, v variant) error {
	args := []string{"--variant=minbase", "--mode=root", "--quiet",
		"--include=" + strings.Join(append(slices.Clone(BasePackages), v.packages...), ","),
		`--aptopt=Acquire::Retries "3"`}
	for _, p := range pathExcludes {
		args = append(args, "--dpkgopt=path-exclude="+p)
	}
	args = append(args, Suite, dir, mirror)
	cmd := exec.CommandContext(ctx, "mmdebstrap", args...)
	cmd.Stdin = nil // mmdebstrap reads mirrors from a non-terminal stdin otherwise
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("mmdebstrap: %w: %s", err, debpkg.LastLines(out, 15))
	}
	if v.bake != nil {
		// Before bake, which empties /boot (the kernel's config is there).
		if err := v.bake(ctx, dir); err != nil {
			return err
		}
	}
	return bake(ctx, dir)
}

// bake turns a fresh mmdebstrap tree into the harness's base root
// filesystem (see BaseRootfs).
func bake(ctx context.Context, root string) error {
	kver, err := kernelVersion(root)
	if err != nil {
		return err
	}
	modDir := filepath.Join(root, "usr/lib/modules", kver)
	if err := os.Rename(filepath.Join(root, "boot", "vmlinuz-"+kver), filepath.Join(modDir, "vmlinuz")); err != nil {
		return fmt.Errorf("moving the kernel: %w", err)
	}
	if err := ostreetest.EmptyDir(filepath.Join(root, "boot")); err != nil {
		return err
	}
	if err := pruneModules(modDir, keepModules); err != nil {
		return fmt.Errorf("pruning kernel modules: %w", err)
	}
	if _, err := run(ctx, nil, "chroot", root, "depmod", "-a", kver); err != nil {
		return err
	}
	initScript, err := guestFS.ReadFile("guest/init")
	if err != nil {
		return err
	}
	var initrd bytes.Buffer
	if err := buildInitramfs(root, kver, initScript, &initrd); err != nil {
		return fmt.Errorf("building the initramfs: %w", err)
	}
	if err := os.WriteFile(filepath.Join(modDir, "initramfs.img"), initrd.Bytes(), 0o644); err != nil {
		return err
	}

	// ostree-prepare-root moves the physical root to the deployment's
	// /sysroot, and /ostree leads into it, as in every ostree image.
	if err := os.Mkdir(filepath.Join(root, "sysroot"), 0o755); err != nil {
		return err
	}
	if err := os.Symlink("sysroot/ostree", filepath.Join(root, "ostree")); err != nil {
		return err
	}
	units := filepath.Join(root, "etc", "systemd", "system")
	files := []struct {
		path string
		mode os.FileMode
		data string
	}{
		{"etc/machine-id", 0o444, MachineID + "\n"},
		{"etc/hostname", 0o644, "ostreevm\n"},
		{"etc/systemd/journald.conf.d/ostreevm.conf", 0o644, "# ostreevm: keep the journal across boots (journalctl -b -1).\n[Journal]\nStorage=persistent\n"},
	}
	for _, f := range files {
		if err := writeFile(filepath.Join(root, f.path), []byte(f.data), f.mode); err != nil {
			return err
		}
	}
	driver, err := guestFS.ReadFile("guest/vmtest-driver")
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(root, driverPath), driver, 0o755); err != nil {
		return err
	}
	unit, err := guestFS.ReadFile("guest/" + driverUnit)
	if err != nil {
		return err
	}
	if err := writeFile(filepath.Join(root, "usr/lib/systemd/system", driverUnit), unit, 0o644); err != nil {
		return err
	}
	links := map[string]string{
		filepath.Join(units, "default.target"):                      "/usr/lib/systemd/system/multi-user.target",
		filepath.Join(units, "multi-user.target.wants", driverUnit): "/usr/lib/systemd/system/" + driverUnit,
	}
	for _, u := range maskedUnits {
		links[filepath.Join(units, u)] = "/dev/null"
	}
	for l, target := range links {
		if err := os.MkdirAll(filepath.Dir(l), 0o755); err != nil {
			return err
		}
		if err := os.Remove(l); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
		if err := os.Symlink(target, l); err != nil {
			return err
		}
	}
	return nil
}

// kernelVersion returns the one KVER with a usr/lib/modules/KVER directory
// and a boot/vmlinuz-KVER.
func kernelVersion(root string) (string, error) {
	ents, err := os.ReadDir(filepath.Join(root, "usr/lib/modules"))
	if err != nil {
		return "", err
	}
	var found []string
	for _, e := range ents {
		if _, err := os.Stat(filepath.Join(root, "boot", "vmlinuz-"+e.Name())); err == nil {
			found = append(found, e.Name())
		}
	}
	if len(found) != 1 {
		return "", fmt.Errorf("want one kernel in usr/lib/modules with a /boot/vmlinuz, found %q", found)
	}
	return found[0], nil
}

// pruneModules deletes every module under modDir/kernel that is not in
// keep or a dependency of one (modules named in keep but built in, or
// absent, are ignored), and the directories left empty.
func pruneModules(modDir string, keep []string) error {
	var present []string
	for _, k := range keep {
		if _, err := moduleLoadOrder(filepath.Join(modDir, "modules.dep"), []string{k}); err == nil {
			present = append(present, k)
		}
	}
	mods, err := moduleLoadOrder(filepath.Join(modDir, "modules.dep"), present)
	if err != nil {
		return err
	}
	kept := map[string]bool{}
	for _, m := range mods {
		kept[m] = true
	}
	kernel := filepath.Join(modDir, "kernel")
	var dirs []string
	err = filepath.WalkDir(kernel, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			dirs = append(dirs, p)
			return nil
		}
		rel, err := filepath.Rel(modDir, p)
		if err != nil {
			return err
		}
		if !kept[filepath.ToSlash(rel)] {
			return os.Remove(p)
		}
		return nil
	})
	if err != nil {
		return err
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if ents, err := os.ReadDir(dirs[i]); err == nil && len(ents) == 0 {
			if err := os.Remove(dirs[i]); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeFile writes data to p with mode (chmod'ed, so the umask does not
// apply), creating parent directories 0755.
func writeFile(p string, data []byte, mode os.FileMode) error {
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := os.WriteFile(p, data, mode); err != nil {
		return err
	}
	return os.Chmod(p, mode)
}
