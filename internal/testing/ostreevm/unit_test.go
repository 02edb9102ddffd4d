package ostreevm

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

func TestModuleLoadOrder(t *testing.T) {
	dep := filepath.Join(t.TempDir(), "modules.dep")
	content := `kernel/fs/ext4/ext4.ko: kernel/lib/crc16.ko kernel/fs/mbcache.ko kernel/fs/jbd2/jbd2.ko
kernel/fs/mbcache.ko:
kernel/fs/jbd2/jbd2.ko:
kernel/lib/crc16.ko:
kernel/drivers/virtio/virtio.ko:
kernel/drivers/virtio/virtio_ring.ko:
kernel/drivers/virtio/virtio_pci.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/drivers/block/virtio_blk.ko: kernel/drivers/virtio/virtio.ko kernel/drivers/virtio/virtio_ring.ko
kernel/arch/x86/crypto/crc32c-intel.ko:
`
	if err := os.WriteFile(dep, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := moduleLoadOrder(dep, []string{"virtio_pci", "virtio_blk", "ext4", "crc32c-intel"})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"kernel/drivers/virtio/virtio.ko", "kernel/drivers/virtio/virtio_ring.ko", "kernel/drivers/virtio/virtio_pci.ko",
		"kernel/drivers/block/virtio_blk.ko",
		"kernel/lib/crc16.ko", "kernel/fs/mbcache.ko", "kernel/fs/jbd2/jbd2.ko", "kernel/fs/ext4/ext4.ko",
		"kernel/arch/x86/crypto/crc32c-intel.ko",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("order\n got %q\nwant %q", got, want)
	}
	if _, err := moduleLoadOrder(dep, []string{"nosuch"}); err == nil {
		t.Error("unknown module: no error")
	}
}

func TestResolveIn(t *testing.T) {
	root := t.TempDir()
	for _, d := range []string{"usr/lib/x86_64-linux-gnu", "usr/lib64"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, "usr/lib/x86_64-linux-gnu/ld.so"), nil, 0o755); err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"lib":                          "usr/lib",
		"lib64":                        "usr/lib64",
		"usr/lib64/ld-linux.so":        "/lib/x86_64-linux-gnu/ld.so",
		"usr/lib/x86_64-linux-gnu/rel": "ld.so",
	} {
		if err := os.Symlink(target, filepath.Join(root, link)); err != nil {
			t.Fatal(err)
		}
	}
	for in, want := range map[string]string{
		"/lib64/ld-linux.so":          "/usr/lib/x86_64-linux-gnu/ld.so",
		"/lib/x86_64-linux-gnu/rel":   "/usr/lib/x86_64-linux-gnu/ld.so",
		"/usr/lib/x86_64-linux-gnu/.": "/usr/lib/x86_64-linux-gnu",
	} {
		got, err := resolveIn(root, in)
		if err != nil || got != want {
			t.Errorf("resolveIn(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := resolveIn(root, "/lib/missing"); err == nil {
		t.Error("missing file: no error")
	}
}

func TestCpio(t *testing.T) {
	if _, err := exec.LookPath("cpio"); err != nil {
		t.Skip("no cpio to read the archive back")
	}
	var b bytes.Buffer
	c := newCpio(&b)
	c.dir("bin", 0o755)
	c.file("bin/busybox", 0o755, []byte("binary"))
	c.symlink("bin/sh", "busybox")
	c.parents("lib/modules/kernel/fs/ext4.ko", map[string]bool{"lib": true})
	c.file("lib/modules/kernel/fs/ext4.ko", 0o644, []byte("odd-length"))
	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if b.Len()%4 != 0 {
		t.Errorf("archive length %d not 4-aligned", b.Len())
	}
	dir := t.TempDir()
	cmd := exec.Command("cpio", "-idm", "--quiet")
	cmd.Dir, cmd.Stdin = dir, &b
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("cpio -id: %v: %s", err, out)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "lib/modules/kernel/fs/ext4.ko")); string(got) != "odd-length" {
		t.Errorf("ext4.ko = %q", got)
	}
	if l, _ := os.Readlink(filepath.Join(dir, "bin/sh")); l != "busybox" {
		t.Errorf("bin/sh -> %q", l)
	}
}

func TestParseBLS(t *testing.T) {
	e := parseBLS("title Debian GNU/Linux 12 (bookworm) (ostree:0)\nversion 2\noptions root=/dev/vda rw ostree=/ostree/boot.1/mcbake/abc/0\nlinux /ostree/mcbake-abc/vmlinuz-6.1\ninitrd /ostree/mcbake-abc/initramfs-6.1.img\n")
	want := BootEntry{Title: "Debian GNU/Linux 12 (bookworm) (ostree:0)", Version: 2,
		Options: "root=/dev/vda rw ostree=/ostree/boot.1/mcbake/abc/0",
		Linux:   "/ostree/mcbake-abc/vmlinuz-6.1", Initrd: "/ostree/mcbake-abc/initramfs-6.1.img"}
	if e != want {
		t.Errorf("parseBLS = %+v, want %+v", e, want)
	}
}

// TestDiskAccess reads and writes an ext4 image with debugfs, through a
// symlinked directory as boot/loader is.
func TestDiskAccess(t *testing.T) {
	for _, tool := range []string{"mke2fs", "debugfs", "e2fsck"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skip("e2fsprogs not installed")
		}
	}
	ctx := context.Background()
	src := t.TempDir()
	if err := os.MkdirAll(filepath.Join(src, "boot/loader.1/entries"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink("loader.1", filepath.Join(src, "boot/loader")); err != nil {
		t.Fatal(err)
	}
	big := bytes.Repeat([]byte("0123456789abcdef"), 100000)
	if err := os.WriteFile(filepath.Join(src, "boot/loader.1/entries/a.conf"), big, 0o644); err != nil {
		t.Fatal(err)
	}
	disk := filepath.Join(t.TempDir(), "disk.img")
	if out, err := exec.Command("mke2fs", "-q", "-F", "-t", "ext4", "-d", src, disk, "64M").CombinedOutput(); err != nil {
		t.Fatalf("mke2fs: %v: %s", err, out)
	}
	got, err := diskCat(ctx, disk, "/boot/loader/entries/a.conf")
	if err != nil || !bytes.Equal(got, big) {
		t.Fatalf("diskCat through the symlink: %d bytes, %v", len(got), err)
	}
	ents, err := diskList(ctx, disk, "/boot/loader/entries")
	if err != nil || len(ents) != 1 || ents[0].Name != "a.conf" || ents[0].Size != int64(len(big)) {
		t.Fatalf("diskList = %+v, %v", ents, err)
	}
	if _, err := diskCat(ctx, disk, "/nosuch"); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("diskCat of a missing file: %v, want fs.ErrNotExist", err)
	}
	for _, data := range []string{"first\n", "second, longer\n"} {
		if err := diskWrite(ctx, disk, "/var/lib/new/dir/f.sh", []byte(data), 0o750); err != nil {
			t.Fatal(err)
		}
		got, err := diskCat(ctx, disk, "/var/lib/new/dir/f.sh")
		if err != nil || string(got) != data {
			t.Errorf("after diskWrite: %q, %v; want %q", got, err, data)
		}
	}
	out, _, err := debugfs(ctx, disk, false, "stat /var/lib/new/dir/f.sh")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out, "Mode:  0750") || !strings.Contains(out, "User:     0") {
		t.Errorf("stat after diskWrite:\n%s", out)
	}
	if err := diskReplayJournal(ctx, disk); err != nil {
		t.Error(err)
	}
	if out, err := exec.Command("e2fsck", "-fn", disk).CombinedOutput(); err != nil {
		t.Errorf("e2fsck -fn after the writes: %v\n%s", err, out)
	}
}
