package ostreevm

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

// baseForTest returns the cached base root filesystem, skipping t when VM
// tests cannot run.
func baseForTest(t *testing.T) string {
	t.Helper()
	if ok, why := Available(); !ok {
		t.Skip("ostreevm: " + why)
	}
	start := time.Now()
	base, err := BaseRootfs(context.Background())
	if err != nil {
		t.Fatalf("BaseRootfs: %v", err)
	}
	t.Logf("BaseRootfs %s in %v", base, time.Since(start).Round(time.Millisecond))
	return base
}

func TestBaseRootfsLayout(t *testing.T) {
	base := baseForTest(t)
	for _, p := range []string{"etc/machine-id", driverPath, "usr/lib/systemd/system/" + driverUnit, "usr/lib/ostree/ostree-prepare-root"} {
		if _, err := os.Stat(filepath.Join(base, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(base, "etc/machine-id")); strings.TrimSpace(string(b)) == "" {
		t.Error("empty machine-id")
	}
	if err := checkKernel(base); err != nil {
		t.Error(err)
	}
	if ents, _ := os.ReadDir(filepath.Join(base, "boot")); len(ents) != 0 {
		t.Errorf("/boot not empty: %v", ents)
	}
}

// copyTree copies src to dst with cp -a (owners, modes, hard links kept).
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if out, err := exec.Command("cp", "-a", "--", src+"/.", dst).CombinedOutput(); err != nil {
		t.Fatalf("cp -a %s: %v: %s", src, err, out)
	}
}

func logBoots(t *testing.T, res []BootResult) {
	t.Helper()
	for _, r := range res {
		t.Logf("boot %d: %v wall, entry %q (version %d), booted %s, step exit %d, action %s, finalize %q",
			r.Boot, r.Wall.Round(100*time.Millisecond), r.Entry.Title, r.Entry.Version, r.Booted, r.StepExit, r.Action, r.Finalize)
	}
}

// revertScenario commits the base as B and a copy with an extra /etc file
// and an extra unit as L, boots L, stages B from the guest, reboots
// through the real finalization and checks B in the guest.
// It returns the machine, powered off, and B's checksum.
func revertScenario(t *testing.T, readOnly bool) (*Machine, string) {
	base := baseForTest(t)
	m := New(t, Options{ReadOnlySysroot: readOnly})

	start := time.Now()
	bSum, err := m.Commit(base, "test/base")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("commit B %s in %v", bSum[:12], time.Since(start).Round(time.Millisecond))

	l := filepath.Join(t.TempDir(), "l")
	copyTree(t, base, l)
	if err := os.WriteFile(filepath.Join(l, "etc/l-only.conf"), []byte("from L\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	unit := "[Unit]\nDescription=L-only unit\n[Service]\nType=oneshot\nRemainAfterExit=yes\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
	if err := os.WriteFile(filepath.Join(l, "usr/lib/systemd/system/l-only.service"), []byte(unit), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("/usr/lib/systemd/system/l-only.service", filepath.Join(l, "etc/systemd/system/multi-user.target.wants/l-only.service")); err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	lSum, err := m.Commit(l, "test/layered")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("commit L %s in %v", lSum[:12], time.Since(start).Round(time.Millisecond))
	if err := m.Deploy("test/layered"); err != nil {
		t.Fatal(err)
	}
	if err := m.WriteVar("lib/vmtest/input.txt", []byte("hello from the host\n"), 0o600); err != nil {
		t.Fatal(err)
	}

	roCheck := ""
	if readOnly {
		roCheck = `
opts=$(findmnt -no OPTIONS /sysroot)
echo "sysroot options: $opts"
case ",$opts," in *,ro,*) ;; *) echo "/sysroot is not read-only"; exit 1;; esac
if touch /sysroot/probe 2>/dev/null; then echo "/sysroot writable"; exit 1; fi
`
	}
	step1 := `set -eux
test "$(cat /var/lib/vmtest/input.txt)" = "hello from the host"
test "$(cat /etc/l-only.conf)" = "from L"
systemctl is-active l-only.service
ostree admin status
` + roCheck + `
ostree admin deploy --stage test/base
ostree admin status
test -e /run/ostree/staged-deployment
`
	step2 := `set -eux
ostree admin status
booted=$(ostree admin status | sed -n 's/^\* [^ ]* \([0-9a-f]*\)\..*/\1/p')
test "$booted" = "` + bSum + `"
test ! -e /etc/l-only.conf
test ! -e /etc/systemd/system/multi-user.target.wants/l-only.service
test ! -e /usr/lib/systemd/system/l-only.service
` + roCheck + `
echo "reverted to $booted" > "$VMTEST_RESULTS/result.txt"
`
	start = time.Now()
	res, err := m.Run(context.Background(), Step{Script: step1, Reboot: true}, Step{Script: step2})
	logBoots(t, res)
	logSteps(t, res)
	t.Logf("Run (disk build and %d boots) in %v", len(res), time.Since(start).Round(time.Millisecond))
	if err != nil {
		for _, r := range res {
			t.Logf("boot %d console:\n%s", r.Boot, r.Console)
		}
		t.Fatal(err)
	}
	if len(res) != 2 {
		t.Fatalf("%d boots, want 2", len(res))
	}
	if !strings.HasPrefix(res[0].Booted, lSum) || !strings.HasPrefix(res[1].Booted, bSum) {
		t.Errorf("booted %q then %q, want L %s then B %s", res[0].Booted, res[1].Booted, lSum, bSum)
	}
	if res[0].Finalize != "active" {
		t.Errorf("boot 1: ostree-finalize-staged.service %q before the reboot, want active", res[0].Finalize)
	}
	got, err := m.ReadResult("result.txt")
	if err != nil {
		t.Fatal(err)
	}
	if want := "reverted to " + bSum + "\n"; string(got) != want {
		t.Errorf("result.txt = %q, want %q", got, want)
	}
	t.Logf("finalization at the shutdown of boot 1:\n%s", res[1].PrevFinalize)
	if !strings.Contains(res[1].PrevFinalize, "Copying /etc changes") {
		t.Errorf("boot 2: the journal of boot 1 shows no /etc merge:\n%s", res[1].PrevFinalize)
	}
	return m, bSum
}

// logSteps logs each boot's step output.
func logSteps(t *testing.T, res []BootResult) {
	t.Helper()
	for _, r := range res {
		t.Logf("boot %d step log:\n%s", r.Boot, r.StepLog)
	}
}

// TestRevertBoots runs the revert, then a third boot in a second Run:
// B is still the default, and a file written into /var after the disk was
// built reaches the guest.
func TestRevertBoots(t *testing.T) {
	selfTest(t)
	m, bSum := revertScenario(t, false)
	if err := m.WriteVar("lib/vmtest/later.txt", []byte("written between runs\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	res, err := m.Run(context.Background(), Step{Script: `set -eux
test "$(cat /var/lib/vmtest/later.txt)" = "written between runs"
test "$(cat "$VMTEST_RESULTS/result.txt")" = "reverted to ` + bSum + `"
test "$VMTEST_BOOT" = 3
`})
	logBoots(t, res)
	logSteps(t, res)
	if err != nil {
		t.Fatal(err)
	}
	if len(res) != 1 || res[0].Boot != 3 || !strings.HasPrefix(res[0].Booted, bSum) {
		t.Errorf("third boot: %d results, boot %d booted %q; want boot 3 of B %s", len(res), res[0].Boot, res[0].Booted, bSum)
	}
}

// TestReadOnlySysroot runs the revert with sysroot.readonly=true; each
// step checks that /sysroot is mounted read-only.
func TestReadOnlySysroot(t *testing.T) {
	selfTest(t)
	revertScenario(t, true)
}

// selfTest skips the harness's own revert boots unless MCBAKE_VM_SELFTEST
// is set: e2e/vm_test.go boots the same flows (a revert with a staged
// deployment and finalization, a read-only sysroot) for mcbake's own
// scenarios, and the VM part of make test has a budget of 5 minutes.
func selfTest(t *testing.T) {
	if os.Getenv("MCBAKE_VM_SELFTEST") == "" {
		t.Skip("harness self-test: set MCBAKE_VM_SELFTEST=1 to run it (e2e/vm_test.go boots the same flows)")
	}
}

// TestBootTimeout kills a boot that overruns Options.BootTimeout and
// leaves no qemu behind. The step would sleep for ten minutes; a context
// with a generous deadline bounds the test if the timeout is not honoured,
// and then Run's error is the context's, not ErrBootTimeout.
func TestBootTimeout(t *testing.T) {
	base := baseForTest(t)
	m := New(t, Options{BootTimeout: 4 * time.Second})
	if _, err := m.Commit(base, "test/base"); err != nil {
		t.Fatal(err)
	}
	if err := m.Deploy("test/base"); err != nil {
		t.Fatal(err)
	}
	var pid int
	m.onStart = func(p int) { pid = p }
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	res, err := m.Run(ctx, Step{Script: "sleep 600"})
	if !errors.Is(err, ErrBootTimeout) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Run = %v, want ErrBootTimeout", err)
	}
	if len(res) != 1 || res[0].Action != "" {
		t.Errorf("results %+v, want one unfinished boot", res)
	}
	if pid == 0 {
		t.Fatal("qemu never started")
	}
	if _, err := os.Stat(filepath.Join("/proc", strconv.Itoa(pid))); err == nil {
		t.Errorf("qemu (pid %d) still running", pid)
	}
}

func TestSELinuxRootfsLayout(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip("ostreevm: " + why)
	}
	start := time.Now()
	root, err := SELinuxRootfs(context.Background())
	if err != nil {
		t.Fatalf("SELinuxRootfs: %v", err)
	}
	t.Logf("SELinuxRootfs %s in %v", root, time.Since(start).Round(time.Millisecond))
	for _, p := range []string{"usr/sbin/restorecon", "usr/sbin/sestatus", "usr/sbin/getenforce", "usr/sbin/setfiles", "usr/sbin/semodule", "usr/bin/bwrap",
		"etc/selinux/default/contexts/files/file_contexts", driverPath} {
		if _, err := os.Stat(filepath.Join(root, p)); err != nil {
			t.Errorf("%s: %v", p, err)
		}
	}
	if b, err := os.ReadFile(filepath.Join(root, "etc/selinux/config")); err != nil || string(b) != selinuxConfig {
		t.Errorf("etc/selinux/config: %q, %v; want %q", b, err, selinuxConfig)
	}
	if err := checkKernel(root); err != nil {
		t.Error(err)
	}
}
