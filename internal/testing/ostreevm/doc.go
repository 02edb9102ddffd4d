// Package ostreevm boots a real ostree system under qemu for tests.
//
// A test runs the real node flow in it (TCG): boot a deployment of a layered
// image L, do things in the guest, stage a deployment of the base B (`ostree
// admin deploy --stage`), reboot so that ostree-finalize-staged.service runs
// the real three-way /etc merge at shutdown, boot B, check things in the
// guest, power off, and read the results back on the host. It is test
// support: it imports only the standard library and golang.org/x/sys, and
// everything runs as root on the host (tests skip otherwise; Available).
//
// # Flow
//
//	base, _ := ostreevm.BaseRootfs(ctx)      // cached Debian bookworm ostree OS tree
//	m := ostreevm.New(t, ostreevm.Options{}) // empty sysroot in t.TempDir()
//	b, _ := m.Commit(base, "os/base")        // image root -> ostree commit
//	l, _ := m.Commit(layeredRoot, "os/layered")
//	m.Deploy("os/layered")                   // offline deploy: the first boot's entry
//	m.WriteVar("lib/test/input", data, 0o644)
//	res, err := m.Run(ctx,
//		ostreevm.Step{Script: "ostree admin deploy --stage os/base", Reboot: true},
//		ostreevm.Step{Script: `ostree admin status > "$VMTEST_RESULTS/status"`})
//	out, _ := m.ReadResult("status")
//
// PackOCI writes a tree (such as the base) as a one-layer OCI image
// layout, for tools that take an image (mcbake build --base oci:DIR:TAG);
// an image they produce is unpacked and given to Commit.
//
// # Steps
//
// The guest runs vmtest-driver.service (wanted by, and ordered after,
// multi-user.target). On its Nth start it runs /var/lib/vmtest/steps/N.sh
// with bash, output to /var/lib/vmtest/out/N.log and the serial console,
// and records the exit status, /proc/cmdline and `ostree admin status`.
// /var is the stateroot's /var, shared by all deployments, so the counter,
// the steps and the results survive a change of deployment. A step that
// should be followed by the next one sets Step.Reboot: when it exits 0
// the driver runs `systemctl reboot` (a full shutdown); otherwise, and
// after the last step, the driver powers off. Before either, if a
// deployment is staged (/run/ostree/staged-deployment), it waits until
// ostree-finalize-staged.service is active: shutting down earlier would
// finalize nothing (its ExecStop does the work). A step exiting non-zero
// powers the guest off and makes Run return a *StepError. Steps write
// files for the host in $VMTEST_RESULTS (/var/lib/vmtest/results), read
// with ReadResult; ReadFile reads any path of the disk.
//
// # Booting
//
// Run builds the disk once from the host sysroot with `mke2fs -t ext4 -d`
// (no mount, hard links kept). For each boot it reads the BLS entries in
// boot/loader/entries with debugfs, takes the highest version (what a
// BLS bootloader boots by default), extracts its kernel and initramfs, and
// starts qemu-system-x86_64 -accel tcg -no-reboot -nodefaults -smp 2 -m
// 1024 with -kernel/-initrd/-append from the entry (plus panic=-1), the
// disk as a virtio drive (cache=unsafe) and the serial console in a file
// (console-N.log in Machine.Dir). A guest reboot makes qemu exit; Run then
// reads the entries again, so the deployment finalized at shutdown boots
// next. /dev/kvm is never used: nested KVM hangs on these machines
// (docs/node.md, "Testing"). A boot that exceeds Options.BootTimeout, or whose
// context ends, has its qemu killed by PID; qemu also dies with the test
// binary (Pdeathsig), and a cleanup kills any qemu left.
//
// The initramfs is the harness's own (no dracut): busybox-static, the
// virtio PCI/block, crc32c and ext4 modules in modules.dep order, and
// ostree-prepare-root with the libraries it links (read from its ELF
// headers). Its /init mounts /dev/vda on /sysroot, runs
// ostree-prepare-root /sysroot (which picks the deployment from ostree= on
// the command line and, with sysroot.readonly=true in the repository
// config, mounts /sysroot read-only), moves /dev, /proc, /sys and /run
// into the new root (/run/ostree-booted must survive) and switch_roots to
// systemd.
//
// # The base root filesystem and its cache
//
// BaseRootfs runs mmdebstrap --variant=minbase for bookworm with
// BasePackages (systemd, udev, kmod, ostree, ostree-boot, the kernel,
// busybox-static, util-linux, mount, e2fsprogs), without /usr/share/doc,
// man, info, locale and lintian, keeps only the kernel modules a virtio
// guest needs (the tree drops from about 640 MB to 257 MB), and bakes in:
// the kernel and initramfs at usr/lib/modules/KVER/{vmlinuz,initramfs.img}
// (ostree 2022.7 refuses to deploy a commit without them), /sysroot and
// /ostree -> sysroot/ostree (ostree-prepare-root moves the physical root
// there), a fixed /etc/machine-id (an empty one starts systemd-firstboot,
// which waits on the console), default.target multi-user.target, a
// persistent journal (a step can read the previous boot's finalization
// with journalctl -b -1; BootResult.PrevFinalize has it), the driver, and
// masks for the gettys (a serial getty swallows console output), apt and
// e2scrub timers, networkd-wait-online, and the ConditionNeedsUpdate=/etc
// jobs (hwdb, ldconfig, catalog), which would run on every ostree boot.
//
// The tree is cached in $MCBAKE_VM_CACHE (default
// /var/cache/mcbake-test/vm) as rootfs-KEY, where KEY hashes the suite,
// the mirror ($MCBAKE_VM_MIRROR, default deb.debian.org), the package,
// exclude, module and mask lists, the machine-id, and the embedded guest
// files (guest/) together with the source of base.go and initramfs.go, so
// any change to what is baked in, or to the code baking it, rebuilds
// (SELinuxRootfs's key adds its packages and the source of selinux.go). The
// build holds an flock on the cache's lock file, runs in tmp-KEY-PID and is
// renamed into place when complete; the next build removes temporaries of
// killed builds, and cached trees of other keys unused for a week.
//
// # SELinux
//
// SELinuxRootfs is the base with Debian's reference policy
// (selinux-policy-default, policy type "default"), policycoreutils,
// selinux-utils and bubblewrap, and /etc/selinux/config setting
// SELINUX=permissive. A test deploys it with SELinuxKargs (security=selinux
// selinux=1 enforcing=0: Debian's kernel starts AppArmor otherwise);
// systemd then loads the policy ("Successfully loaded SELinux policy"),
// getenforce says Permissive, and restorecon, sestatus and chcon work in
// the guest. The deployments are labelled as on an SELinux host: Commit
// labels a tree that has a policy with it (ostree commit
// --selinux-policy), ostree labels /etc from /usr/etc when it deploys, and
// Deploy relabels the /etc of a host-made deployment with its own setfiles
// (on a host without SELinux ostree labels /etc's files but not its
// directories and symlinks). ostree 2022.7 finalizes a staged deployment
// that has /etc/selinux/config by running `semodule -N
// --rebuild-if-modules-changed` in it under /usr/bin/bwrap: without
// bubblewrap finalization fails ("Failed to execute child process
// /usr/bin/bwrap") and the old deployment boots again. Permissive mode
// logs denials (AVCs) to the console and refuses nothing.
//
// # Measured (2-core Debian bookworm host, TCG, idle)
//
//   - BaseRootfs: 35–45 s to build (mmdebstrap about 35 s), 0 s cached.
//     The kernel initramfs is 10 MB, uncompressed.
//   - PackOCI of the base: 3.3–4.2 s, a 98 MB gzip layer.
//   - Commit: 3–7 s per image (hard-linked copy, ostree commit of 257 MB).
//   - Disk build and Run's bookkeeping: about 3 s (2 GiB sparse image).
//   - One boot: the kernel runs /init at 2.3 s of guest uptime,
//     switch_root at 3.2 s, multi-user.target at 8.4 s (systemd-analyze:
//     3.4 s kernel + 5.0 s userspace), power-off at about 9.5 s; qemu
//     start-up and shutdown add about 3.5 s: 14 s wall for a boot with a
//     trivial step. -smp 1 is slower (a boot with a 5 s step: 24.8 s wall
//     against 18.9 s with -smp 2).
//   - The revert (boot L, stage B, reboot with finalization, boot B):
//     19.7–21.7 s and 14.2–15.9 s, 37–40 s for Run including the disk.
//     A busy machine can take several times longer (others saw 3
//     minutes); the default BootTimeout is 5 minutes per boot.
//   - SELinuxRootfs: 1 min 47 s to build on an idle machine, 3–5 min on
//     a busy one; 286 MB. systemd loads the policy in 0.3–0.4 s; the
//     guard's revert on it (two CPUs): 32–37 s for L's boot, 17–20 s for
//     B's.
//
// # Differences from a node
//
// No SELinux in the base (commits drop xattrs; SELinuxRootfs has a
// permissive policy, Debian's, not RHCOS's targeted one), no network, no
// bootloader (the host plays a BLS bootloader), /boot on the root file
// system, core.fsync=false in the repository (a throwaway disk), and the
// units the base masks.
// The stateroot /var starts empty, as `ostree admin os-init` makes it.
package ostreevm
