package ostreevm

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/mcbake/mcbake/internal/testing/debpkg"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"golang.org/x/sys/unix"
)

// Stateroot is the ostree stateroot ("osname") of every Machine.
const Stateroot = "mcbake"

// DefaultKargs are the kernel arguments Deploy gives every deployment
// before the caller's. The initramfs always mounts /dev/vda; root= only
// documents it.
var DefaultKargs = []string{"root=/dev/vda", "rw", "console=ttyS0"}

// Guest paths of the test driver's state, in the stateroot's /var.
const (
	// GuestVMTestDir is the driver's directory in the guest.
	GuestVMTestDir = "/var/lib/vmtest"
	// GuestResultsDir is where steps are meant to write results for the
	// host ($VMTEST_RESULTS in a step); read them with ReadResult.
	GuestResultsDir = GuestVMTestDir + "/results"
)

// ostreeEnv is passed to host-side ostree commands: deployments made on
// the host are not sealed with chattr +i, so t.TempDir can remove them.
var ostreeEnv = []string{"OSTREE_SYSROOT_DEBUG=mutable-deployments"}

// Options configure a Machine. Zero values take the defaults.
type Options struct {
	// ReadOnlySysroot sets sysroot.readonly=true in the repository
	// config, so that ostree-prepare-root mounts /sysroot read-only (as on
	// RHCOS) and ostree remounts it read-write in a private mount
	// namespace when it writes.
	ReadOnlySysroot bool
	// MemoryMiB is the guest's memory (default 1024).
	MemoryMiB int
	// CPUs is the number of guest CPUs (default 2, multi-threaded TCG).
	CPUs int
	// BootTimeout bounds one boot, from starting qemu to its exit
	// (default 5 minutes). When it passes, qemu is killed and Run fails.
	BootTimeout time.Duration
	// DiskSize is the disk image size in bytes (default: twice the
	// sysroot plus 1 GiB, at least 2 GiB). The file is sparse.
	DiskSize int64
}

// A Machine is an ostree sysroot that becomes an ext4 disk image, and the
// qemu that boots it. Until the first Run the sysroot is a host directory
// that Commit, Deploy and WriteVar fill; Run builds the disk from it, and
// from then on the disk image is the machine's only state (WriteVar and
// ReadFile go through debugfs; Commit and Deploy fail). A Machine is not
// safe for concurrent use.
type Machine struct {
	t       testing.TB
	opts    Options
	dir     string // work directory
	sysroot string // host sysroot until the disk is built
	disk    string // disk image, once built
	commits int
	boots   int // guest boots so far: the driver's boot counter

	mu   sync.Mutex
	qemu *os.Process // running qemu, killed by the test's cleanup

	onStart func(pid int) // tests: called with qemu's PID
}

// New creates a Machine in a directory of t.TempDir() with an empty
// sysroot: `ostree admin init-fs --modern`, stateroot Stateroot, repository
// config sysroot.bootloader=none (ostree writes only the BLS entries the
// harness boots from), core.fsync=false, and sysroot.readonly=true with
// opts.ReadOnlySysroot. It skips t when Available says no and fails t when
// the sysroot cannot be made. A cleanup kills a qemu still running and
// clears immutable flags so that the directory can be removed.
func New(t testing.TB, opts Options) *Machine {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skip("ostreevm: " + why)
	}
	if opts.MemoryMiB == 0 {
		opts.MemoryMiB = 1024
	}
	if opts.CPUs == 0 {
		opts.CPUs = 2
	}
	if opts.BootTimeout == 0 {
		opts.BootTimeout = 5 * time.Minute
	}
	m := &Machine{t: t, opts: opts, dir: t.TempDir()}
	m.sysroot = filepath.Join(m.dir, "sysroot")
	t.Cleanup(m.cleanup)
	if err := m.initSysroot(); err != nil {
		t.Fatalf("ostreevm: creating the sysroot: %v", err)
	}
	return m
}

func (m *Machine) cleanup() {
	m.mu.Lock()
	if m.qemu != nil {
		_ = m.qemu.Kill()
	}
	m.mu.Unlock()
	unseal(m.sysroot)
}

func (m *Machine) repo() string { return filepath.Join(m.sysroot, "ostree", "repo") }

func (m *Machine) initSysroot() error {
	ctx := context.Background()
	if err := os.Mkdir(m.sysroot, 0o755); err != nil {
		return err
	}
	steps := [][]string{
		{"admin", "init-fs", "--modern", m.sysroot},
		{"admin", "os-init", "--sysroot=" + m.sysroot, Stateroot},
		{"config", "--repo=" + m.repo(), "set", "sysroot.bootloader", "none"},
		{"config", "--repo=" + m.repo(), "set", "core.fsync", "false"},
	}
	if m.opts.ReadOnlySysroot {
		steps = append(steps, []string{"config", "--repo=" + m.repo(), "set", "sysroot.readonly", "true"})
	}
	for _, args := range steps {
		if _, err := run(ctx, ostreeEnv, "ostree", args...); err != nil {
			return err
		}
	}
	return nil
}

// ErrBootTimeout is the error Run wraps when a boot overruns
// Options.BootTimeout.
var ErrBootTimeout = errors.New("boot timed out")

var errDiskBuilt = errors.New("ostreevm: the disk is built (Run was called); the host sysroot is gone")

// Commit commits the image root rootfs (a directory as unpacked from an OCI
// image, etc at /etc) to ref in the machine's repository and returns the
// commit checksum. Like ostree-container import it commits /etc as
// /usr/etc and drops the contents of /run, /tmp, /proc, /sys and /dev; it
// works on a hard-linked copy (cp -al, or cp -a across file systems) and
// never modifies rootfs. Content, symlink targets, modes, uids and gids
// are kept (run as root); xattrs are dropped (--no-xattrs). A tree whose
// /etc/selinux/config enables a policy that it ships (SELinuxRootfs's) is
// labelled with that policy (--selinux-policy), as ostree-container
// labels the images it imports: /usr/etc as /usr/etc, which ostree
// relabels as /etc when it deploys. The tree must
// hold a kernel: usr/lib/modules/KVER/vmlinuz and initramfs.img, as
// BaseRootfs has. Commit fails once the disk is built.
func (m *Machine) Commit(rootfs, ref string) (string, error) {
	return m.CommitWithMetadata(rootfs, ref, nil)
}

// CommitWithMetadata is Commit with string metadata on the commit, such
// as the keys ostree-ext records when it imports a container image
// (ostree.manifest-digest, ostree.manifest,
// ostree.container.image-config).
func (m *Machine) CommitWithMetadata(rootfs, ref string, meta map[string]string) (string, error) {
	if m.disk != "" {
		return "", errDiskBuilt
	}
	ctx := context.Background()
	m.commits++
	stage := filepath.Join(m.dir, fmt.Sprintf("stage-%d", m.commits))
	defer os.RemoveAll(stage)
	if _, err := run(ctx, nil, "cp", "-al", "--", rootfs+"/.", stage); err != nil {
		_ = os.RemoveAll(stage)
		if _, err2 := run(ctx, nil, "cp", "-a", "--", rootfs+"/.", stage); err2 != nil {
			return "", fmt.Errorf("copying %s: %w", rootfs, errors.Join(err, err2))
		}
	}
	if err := ostreetest.MoveEtc(stage); err != nil {
		return "", err
	}
	for _, d := range ostreetest.DroppedDirs {
		if err := ostreetest.EmptyDir(filepath.Join(stage, d)); err != nil {
			return "", err
		}
	}
	if err := checkKernel(stage); err != nil {
		return "", err
	}
	args := []string{"commit", "--repo=" + m.repo(), "--branch=" + ref, "--tree=dir=" + stage, "--no-xattrs", "--subject=" + ref}
	if _, err := os.Stat(filepath.Join(stage, "usr", "etc", "selinux", "config")); err == nil {
		// Labelled with the tree's own policy, as ostree-container labels
		// what it imports (ostree loads it only when the config enables
		// SELinux).
		args = append(args, "--selinux-policy="+stage)
	}
	keys := make([]string, 0, len(meta))
	for k := range meta {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		args = append(args, "--add-metadata-string="+k+"="+meta[k])
	}
	out, err := run(ctx, ostreeEnv, "ostree", args...)
	if err != nil {
		return "", err
	}
	csum := strings.TrimSpace(out)
	if len(csum) != 64 {
		return "", fmt.Errorf("ostree commit printed %q, want a checksum", out)
	}
	return csum, nil
}

// checkKernel requires a regular usr/lib/modules/*/vmlinuz with an
// initramfs.img beside it: ostree 2022.7 refuses to deploy without.
func checkKernel(root string) error {
	found, err := filepath.Glob(filepath.Join(root, "usr", "lib", "modules", "*", "vmlinuz"))
	if err != nil {
		return err
	}
	for _, k := range found {
		fi, err := os.Stat(k)
		_, ierr := os.Stat(filepath.Join(filepath.Dir(k), "initramfs.img"))
		if err == nil && fi.Mode().IsRegular() && ierr == nil {
			return nil
		}
	}
	return errors.New("image has no usr/lib/modules/KVER/{vmlinuz,initramfs.img}: it cannot boot (start from BaseRootfs)")
}

// Deploy deploys ref from the host (`ostree admin deploy`, offline) with
// DefaultKargs and then kargs as its kernel arguments. The new deployment
// becomes the default BLS entry: the one the first boot boots. Deploying
// again keeps the earlier deployment as the rollback entry. A deployment
// with an SELinux policy (SELinuxRootfs's) has its /etc labelled in full,
// as ostree on an SELinux host labels it (see labelEtc). Deploy fails
// once the disk is built.
func (m *Machine) Deploy(ref string, kargs ...string) error {
	if m.disk != "" {
		return errDiskBuilt
	}
	args := []string{"admin", "deploy", "--sysroot=" + m.sysroot, "--os=" + Stateroot}
	for _, k := range append(append([]string(nil), DefaultKargs...), kargs...) {
		args = append(args, "--karg="+k)
	}
	if _, err := run(context.Background(), ostreeEnv, "ostree", append(args, ref)...); err != nil {
		return err
	}
	return m.labelEtc()
}

// labelEtc completes the SELinux labels of the /etc of every deployment
// whose /etc/selinux/config enables a policy. ostree copies /usr/etc to
// /etc labelled with the deployment's policy, but it labels directories
// and symlinks through setfscreatecon, which it skips on a host without
// SELinux: they would boot unlabeled_t, and files created below them
// too. The deployment's own setfiles relabels /etc as an SELinux host's
// ostree would have, chrooted, in a mount namespace with /proc mounted
// in the deployment (setfiles sets contexts through /proc/self/fd).
func (m *Machine) labelEtc() error {
	deps, err := filepath.Glob(filepath.Join(m.sysroot, "ostree", "deploy", Stateroot, "deploy", "*.[0-9]*"))
	if err != nil {
		return err
	}
	for _, d := range deps {
		if fi, err := os.Stat(d); err != nil || !fi.IsDir() || !selinuxEnabled(d) {
			continue
		}
		policy := selinuxType(d)
		fc := "/etc/selinux/" + policy + "/contexts/files/file_contexts"
		if _, err := run(context.Background(), nil, "unshare", "--mount-proc="+filepath.Join(d, "proc"),
			"chroot", d, "/usr/sbin/setfiles", "-F", fc, "/etc"); err != nil {
			return fmt.Errorf("labelling the /etc of deployment %s: %w", filepath.Base(d), err)
		}
	}
	return nil
}

// selinuxEnabled reports whether root's /etc/selinux/config sets SELINUX
// to enforcing or permissive, as ostree reads it.
func selinuxEnabled(root string) bool {
	v := selinuxConfigValue(root, "SELINUX")
	return v == "enforcing" || v == "permissive"
}

// selinuxType is the policy type root's /etc/selinux/config names
// (SELINUXTYPE).
func selinuxType(root string) string { return selinuxConfigValue(root, "SELINUXTYPE") }

func selinuxConfigValue(root, key string) string {
	b, err := os.ReadFile(filepath.Join(root, "etc", "selinux", "config"))
	if err != nil {
		return ""
	}
	v := ""
	for _, l := range strings.Split(string(b), "\n") {
		if k, val, ok := strings.Cut(strings.TrimSpace(l), "="); ok && k == key {
			v = strings.Trim(strings.TrimSpace(val), `"`)
		}
	}
	return v
}

// VarPath is the disk path of the stateroot's persistent /var: the /var
// every deployment of Stateroot mounts.
const VarPath = "ostree/deploy/" + Stateroot + "/var"

// WriteVar writes data as the file /var/REL of the guest (the stateroot's
// shared /var, VarPath/REL), owned by root with mode perm, creating parent
// directories (0755). Before the disk is built it writes into the host
// sysroot; after, into the disk image with debugfs (the guest must not be
// running, and never is between Runs).
func (m *Machine) WriteVar(rel string, data []byte, perm os.FileMode) error {
	if err := checkRel(rel); err != nil {
		return err
	}
	if m.disk != "" {
		return diskWrite(context.Background(), m.disk, VarPath+"/"+rel, data, perm)
	}
	return writeFile(filepath.Join(m.sysroot, VarPath, rel), data, perm)
}

func checkRel(rel string) error {
	if rel == "" || path.IsAbs(rel) || path.Clean(rel) != rel || strings.HasPrefix(rel, "../") || rel == ".." {
		return fmt.Errorf("ostreevm: %q is not a clean relative path", rel)
	}
	return nil
}

// ReadFile reads the file at rel (relative to the disk's root, e.g.
// "ostree/deploy/mcbake/var/lib/x" or "boot/loader/entries/...") from the
// disk image with debugfs, without mounting it; symlinks in rel are
// followed as in the guest's physical root. Before the disk is built it
// reads the host sysroot. A missing file gives an error wrapping
// fs.ErrNotExist.
func (m *Machine) ReadFile(rel string) ([]byte, error) {
	if err := checkRel(rel); err != nil {
		return nil, err
	}
	if m.disk == "" {
		return os.ReadFile(filepath.Join(m.sysroot, rel))
	}
	return diskCat(context.Background(), m.disk, "/"+rel)
}

// ReadVar reads /var/REL of the guest (VarPath/REL on the disk).
func (m *Machine) ReadVar(rel string) ([]byte, error) { return m.ReadFile(VarPath + "/" + rel) }

// ReadResult reads $VMTEST_RESULTS/NAME, which a step wrote in the guest.
func (m *Machine) ReadResult(name string) ([]byte, error) {
	return m.ReadVar(strings.TrimPrefix(GuestResultsDir, "/var/") + "/" + name)
}

// Disk returns the disk image's path, "" before the first Run.
func (m *Machine) Disk() string { return m.disk }

// Dir returns the machine's work directory (console logs, kernels).
func (m *Machine) Dir() string { return m.dir }

// A Step is one boot's work: Script runs in the guest, as root, with
// /bin/bash from / once the system is up (multi-user.target reached),
// stdin /dev/null, stdout and stderr to the console and to the step log.
// Its environment has VMTEST_BOOT (the boot number) and VMTEST_RESULTS (a
// directory in the persistent /var for files the host reads with
// ReadResult). After the script exits the driver powers the guest off,
// or, when Reboot is set and the script exited 0, reboots it with
// `systemctl reboot` (a normal shutdown: a staged deployment is finalized,
// the driver first waiting for ostree-finalize-staged.service to be
// active). A step that must not continue should exit non-zero: the guest
// then powers off and Run stops with a StepError.
type Step struct {
	Script string
	Reboot bool
}

// BootEntry is the BLS entry (boot/loader/entries/*.conf) a boot used.
type BootEntry struct {
	File    string // file name in boot/loader/entries
	Title   string
	Version int
	Linux   string // kernel, relative to /boot
	Initrd  string
	Options string // kernel command line (passed to -append)
}

// BootResult is what one boot did.
type BootResult struct {
	Boot    int       // the driver's boot number (1 for the machine's first boot)
	Entry   BootEntry // what the harness booted: the highest-version entry
	Wall    time.Duration
	Console string // the serial console, kernel to power off

	// What the driver recorded in the guest.
	Cmdline  string // /proc/cmdline
	Status   string // ostree admin status
	Booted   string // booted deployment, CHECKSUM.SERIAL
	StepRan  bool   // a step existed for this boot
	StepExit int    // its exit status (-1 when none ran)
	StepLog  string // its output
	Finalize string // is-active state of ostree-finalize-staged.service at the end ("no staged deployment" without one)
	Action   string // "reboot" or "poweroff"
	// PrevFinalize is `journalctl -b -1 -u ostree-finalize-staged` (boots
	// after the first): what finalization printed at the last shutdown.
	PrevFinalize string
}

// A StepError is returned by Run when a step exited non-zero.
type StepError struct {
	Boot int
	Exit int
	Log  string
}

func (e *StepError) Error() string {
	return fmt.Sprintf("ostreevm: boot %d: step exited %d:\n%s", e.Boot, e.Exit, debpkg.LastLines([]byte(e.Log), 20))
}

// Run boots the machine once per step and returns what each boot did.
//
// On the first Run it builds the disk image from the sysroot (mke2fs -t
// ext4 -d, which keeps hard links; the host sysroot is removed). Steps are
// written to the guest's /var/lib/vmtest/steps/N.sh, N counting boots
// over the machine's life. Each boot reads the highest-version BLS entry
// from the disk with debugfs and starts qemu-system-x86_64 -accel tcg
// -no-reboot with that entry's kernel, initramfs and options (plus
// panic=-1), a virtio disk (cache=unsafe) and the serial console in a file.
// When qemu exits, Run reads what the driver recorded; if the step asked
// for a reboot and steps remain, it boots again: a reboot makes qemu exit
// (-no-reboot), and the next boot reads the entries anew, so a deployment
// finalized at shutdown boots next.
//
// Run stops with an error when a boot exceeds Options.BootTimeout (it
// wraps ErrBootTimeout) or ctx ends (qemu is killed by PID), when qemu fails, when the driver did not
// finish (the guest crashed, hung or powered off early: the error carries
// the console's tail), or when a step exits non-zero (a *StepError). The
// results of the boots made so far are returned in every case. With no
// steps, Run boots once and the driver powers off at once.
func (m *Machine) Run(ctx context.Context, steps ...Step) ([]BootResult, error) {
	if m.disk == "" {
		if err := m.buildDisk(ctx); err != nil {
			return nil, fmt.Errorf("ostreevm: building the disk: %w", err)
		}
	}
	first := m.boots + 1
	for i, s := range steps {
		n := first + i
		rel := fmt.Sprintf("lib/vmtest/steps/%d", n)
		if err := m.WriteVar(rel+".sh", []byte(s.Script), 0o755); err != nil {
			return nil, err
		}
		if s.Reboot {
			if err := m.WriteVar(rel+".reboot", nil, 0o644); err != nil {
				return nil, err
			}
		}
	}
	boots := len(steps)
	if boots == 0 {
		boots = 1
	}
	var results []BootResult
	for i := 0; i < boots; i++ {
		r, err := m.boot(ctx, first+i)
		results = append(results, r)
		if err != nil {
			return results, err
		}
		if r.StepRan && r.StepExit != 0 {
			return results, &StepError{Boot: r.Boot, Exit: r.StepExit, Log: r.StepLog}
		}
		if r.Action != "reboot" {
			if i+1 < boots {
				return results, fmt.Errorf("ostreevm: boot %d powered off with %d steps left (its step did not set Reboot)", r.Boot, boots-i-1)
			}
			break
		}
	}
	return results, nil
}

// buildDisk makes the ext4 disk image from the host sysroot.
func (m *Machine) buildDisk(ctx context.Context) error {
	used, err := treeSize(m.sysroot)
	if err != nil {
		return err
	}
	size := m.opts.DiskSize
	if size == 0 {
		size = 2*used + 1<<30
		if size < 2<<30 {
			size = 2 << 30
		}
	}
	disk := filepath.Join(m.dir, "disk.img")
	if _, err := run(ctx, nil, "mke2fs", "-q", "-F", "-t", "ext4", "-L", "ostreevm", "-d", m.sysroot,
		disk, strconv.FormatInt(size/1024, 10)+"k"); err != nil {
		return err
	}
	unseal(m.sysroot)
	if err := os.RemoveAll(m.sysroot); err != nil {
		return err
	}
	m.disk = disk
	return nil
}

// treeSize adds up the sizes of the regular files under dir, counting a
// hard-linked file once.
func treeSize(dir string) (int64, error) {
	seen := map[[2]uint64]bool{}
	var total int64
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		fi, err := d.Info()
		if err != nil {
			return err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !ok {
			return nil
		}
		k := [2]uint64{uint64(st.Dev), st.Ino}
		if seen[k] {
			return nil
		}
		seen[k] = true
		total += (fi.Size() + 4095) &^ 4095
		return nil
	})
	return total, err
}

// boot boots the default entry once as boot n.
func (m *Machine) boot(ctx context.Context, n int) (BootResult, error) {
	r := BootResult{Boot: n, StepExit: -1}
	entry, err := m.defaultEntry(ctx)
	if err != nil {
		return r, err
	}
	r.Entry = entry
	kernel, err := m.bootFile(ctx, entry.Linux)
	if err != nil {
		return r, err
	}
	initrd, err := m.bootFile(ctx, entry.Initrd)
	if err != nil {
		return r, err
	}
	console := filepath.Join(m.dir, fmt.Sprintf("console-%d.log", n))
	args := []string{
		"-accel", "tcg,thread=multi", "-nodefaults", "-no-user-config", "-no-reboot",
		"-display", "none", "-m", strconv.Itoa(m.opts.MemoryMiB), "-smp", strconv.Itoa(m.opts.CPUs),
		"-kernel", kernel, "-initrd", initrd, "-append", entry.Options + " panic=-1",
		"-drive", "file=" + qemuOpt(m.disk) + ",format=raw,if=virtio,cache=unsafe",
		"-device", "virtio-rng-pci",
		"-chardev", "file,id=console,path=" + qemuOpt(console), "-serial", "chardev:console",
	}
	cmd := exec.Command("qemu-system-x86_64", args...)
	out := &strings.Builder{}
	cmd.Stdout, cmd.Stderr = out, out
	// Should the test binary die without running its cleanups (a go test
	// -timeout panic, a kill), the kernel kills qemu: Pdeathsig follows
	// the thread that started it, so that thread stays locked to the
	// goroutine that waits for qemu.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	start := time.Now()
	started := make(chan error, 1)
	done := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with the goroutine
		if err := cmd.Start(); err != nil {
			started <- err
			return
		}
		m.mu.Lock()
		m.qemu = cmd.Process
		m.mu.Unlock()
		if m.onStart != nil {
			m.onStart(cmd.Process.Pid)
		}
		started <- nil
		done <- cmd.Wait()
	}()
	if err := <-started; err != nil {
		return r, fmt.Errorf("starting qemu: %w", err)
	}
	timer := time.NewTimer(m.opts.BootTimeout)
	defer timer.Stop()
	var waitErr, stopErr error
	select {
	case waitErr = <-done:
	case <-timer.C:
		_ = cmd.Process.Kill()
		<-done
		stopErr = fmt.Errorf("boot %d: %w after %v (qemu killed)", n, ErrBootTimeout, m.opts.BootTimeout)
	case <-ctx.Done():
		_ = cmd.Process.Kill()
		<-done
		stopErr = fmt.Errorf("boot %d: %w (qemu killed)", n, ctx.Err())
	}
	m.mu.Lock()
	m.qemu = nil
	m.mu.Unlock()
	r.Wall = time.Since(start)
	if b, err := os.ReadFile(console); err == nil {
		r.Console = string(b)
	}
	m.boots = n
	if stopErr == nil && waitErr != nil {
		stopErr = fmt.Errorf("boot %d: qemu: %v: %s", n, waitErr, strings.TrimSpace(out.String()))
	}
	if err := diskReplayJournal(context.Background(), m.disk); err != nil && stopErr == nil {
		stopErr = err
	}
	m.readDriver(&r)
	if stopErr == nil && r.Action == "" {
		stopErr = fmt.Errorf("boot %d: the guest stopped before the test driver finished", n)
	}
	if stopErr != nil {
		return r, fmt.Errorf("ostreevm: %w; console (%s) ends:\n%s", stopErr, console, debpkg.LastLines([]byte(r.Console), 40))
	}
	return r, nil
}

// readDriver fills r from what the driver wrote in out/N.*.
func (m *Machine) readDriver(r *BootResult) {
	read := func(suffix string) string {
		b, err := m.ReadVar(fmt.Sprintf("lib/vmtest/out/%d.%s", r.Boot, suffix))
		if err != nil {
			return ""
		}
		return string(b)
	}
	r.Cmdline = strings.TrimSpace(read("cmdline"))
	r.Status = read("status")
	r.Booted = strings.TrimSpace(read("booted"))
	r.StepLog = read("log")
	r.Finalize = strings.TrimSpace(read("finalize"))
	r.PrevFinalize = read("prev-finalize")
	r.Action = strings.TrimSpace(read("action"))
	switch rc := strings.TrimSpace(read("rc")); rc {
	case "", "none":
	default:
		r.StepRan = true
		if v, err := strconv.Atoi(rc); err == nil {
			r.StepExit = v
		}
	}
}

// defaultEntry returns the highest-version BLS entry on the disk.
func (m *Machine) defaultEntry(ctx context.Context) (BootEntry, error) {
	ents, err := diskList(ctx, m.disk, "/boot/loader/entries")
	if err != nil {
		return BootEntry{}, err
	}
	var entries []BootEntry
	for _, e := range ents {
		if !strings.HasSuffix(e.Name, ".conf") {
			continue
		}
		b, err := diskCat(ctx, m.disk, "/boot/loader/entries/"+e.Name)
		if err != nil {
			return BootEntry{}, err
		}
		be := parseBLS(string(b))
		be.File = e.Name
		entries = append(entries, be)
	}
	if len(entries) == 0 {
		return BootEntry{}, errors.New("ostreevm: no BLS entry in boot/loader/entries: nothing deployed (call Deploy)")
	}
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Version > entries[j].Version })
	return entries[0], nil
}

// parseBLS parses the keys of a BLS entry the harness uses.
func parseBLS(s string) BootEntry {
	var e BootEntry
	for _, l := range strings.Split(s, "\n") {
		k, v, _ := strings.Cut(strings.TrimSpace(l), " ")
		v = strings.TrimSpace(v)
		switch k {
		case "title":
			e.Title = v
		case "version":
			e.Version, _ = strconv.Atoi(v)
		case "linux":
			e.Linux = v
		case "initrd":
			e.Initrd = v
		case "options":
			e.Options = v
		}
	}
	return e
}

// bootFile copies /boot/REL out of the disk into the work directory (once
// per path: ostree names boot files by checksum) and returns its path.
func (m *Machine) bootFile(ctx context.Context, rel string) (string, error) {
	if rel == "" {
		return "", errors.New("ostreevm: BLS entry without linux or initrd")
	}
	local := filepath.Join(m.dir, "boot", strings.ReplaceAll(strings.Trim(rel, "/"), "/", "_"))
	if _, err := os.Stat(local); err == nil {
		return local, nil
	}
	b, err := diskCat(ctx, m.disk, path.Join("/boot", rel))
	if err != nil {
		return "", err
	}
	if err := writeFile(local, b, 0o644); err != nil {
		return "", err
	}
	return local, nil
}

// fsImmutableFL is FS_IMMUTABLE_FL from linux/fs.h (chattr +i).
const fsImmutableFL = 0x10

// unseal clears the immutable flag ostree sets on deployment roots in the
// host sysroot, so that it can be removed. Errors are ignored: removal
// reports what is left.
func unseal(sysroot string) {
	roots, _ := filepath.Glob(filepath.Join(sysroot, "ostree", "deploy", "*", "deploy", "*"))
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

// qemuOpt escapes a value for qemu's KEY=VALUE,... option syntax, where
// a comma is written twice (a test's directory can have one: Go names it
// after the subtest).
func qemuOpt(v string) string { return strings.ReplaceAll(v, ",", ",,") }
