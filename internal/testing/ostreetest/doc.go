// Package ostreetest reverts a simulated node with real ostree, for tests.
//
// It is a test harness around the Debian `ostree` command: it lets tests of
// other packages revert a simulated node from a layered image L to its base
// image B and look at the /etc that ostree's three-way merge actually
// produced, so that mcbake's clobber predictions (docs/design.md, "ostree's
// /etc merge") are checked against ostree itself rather than against a model
// of it. Revert is the harness; Unpack turns an OCI image layout into the
// root filesystem Revert takes; VarDir names the node's persistent /var.
//
// # How the harness maps to a node
//
//   - Image import. ostree-container import (ostree-ext's tar filter,
//     normalize_validate_path) writes an image's /etc to /usr/etc and drops
//     everything below /run, /tmp, /proc, /sys and /dev (the directories
//     stay). Revert does the same to a copy (`cp -a`) of each unpacked
//     root and commits it, as root, into a bare repository with
//     --no-xattrs: content, symlink targets, modes, uids and gids are kept;
//     xattrs (SELinux labels) are dropped, which the /etc merge ignores
//     anyway (merge_configuration_from diffs with
//     OSTREE_DIFF_FLAGS_IGNORE_XATTRS). A root without a kernel gets a fake
//     usr/lib/modules/0.0.0-ostreetest/{vmlinuz,initramfs.img}, and one
//     without os-release gets usr/lib/os-release; both are under /usr,
//     outside the merge.
//   - The sysroot: `ostree admin init-fs --modern`, `ostree admin os-init`
//     (stateroot "mcbake"), repository config sysroot.bootloader=none and
//     core.fsync=false, and OSTREE_SYSROOT_DEBUG=mutable-deployments so
//     that deployment roots are not sealed with chattr +i (t.TempDir must
//     remove them). None of these reach the /etc merge code.
//   - The node on L: L is deployed with `ostree admin deploy`. Nothing is
//     booted. ostree picks the merge deployment with
//     ostree_sysroot_get_merge_deployment: the booted deployment when booted
//     into that stateroot, otherwise the first deployment of the stateroot,
//     which here is L, the only one. So B's merge diffs L's defaults
//     (usr/etc) against the node's live /etc (L's etc directory), as on a
//     node booted into L. The tests prove it: files the node left alone take
//     B's version, and those it changed are kept.
//   - The machine-config-daemon: mcdWrite gets the L deployment's etc
//     directory, which is the node's /etc itself on a booted ostree system.
//     The test writes there with the MCD's content, modes and owners.
//   - The revert: B is deployed with `ostree admin deploy` (no --stage):
//     ostree_sysroot_deploy_tree runs sysroot_initialize_deployment (check
//     out B; its /etc starts as a copy of B's /usr/etc) and then
//     sysroot_finalize_deployment, which calls merge_configuration_from with
//     L. On a node, rpm-ostree stages the deployment instead (docs/design.md, "Reverting on the node";
//     that rpm-ostree goes through ostree's staging API is assumed here,
//     not checked in rpm-ostree's source): ostree_sysroot_stage_tree runs
//     sysroot_initialize_deployment at once and records the merge
//     deployment (the booted one), and at shutdown
//     ostree-finalize-staged.service runs _ostree_sysroot_finalize_staged,
//     which calls the same sysroot_finalize_deployment, hence the same
//     merge_configuration_from. That both paths share this code was checked
//     by reading ostree's source (src/libostree/ostree-sysroot-deploy.c,
//     ostree-sysroot.c, ostree-diff.c and src/ostree/ot-admin-builtin-deploy.c
//     on the main branch), not the 2022.7 source Debian ships; the tests
//     pin what the 2022.7 binary does. One difference in time: a node
//     takes the /etc diff at shutdown, so MCD writes made after staging
//     count; Revert takes it when mcdWrite returns, so a test must write
//     everything the MCD writes before the reboot.
//   - /var: a booted node mounts its stateroot's var (VarDir) over the
//     deployment's var directory; it is shared by L and B and no deploy
//     touches it. Revert leaves it as os-init made it: ostree 2022.7 does
//     not copy a commit's /var into it (it prints "contains content in
//     /var/... that will be ignored"), which models a node provisioned
//     before L (baked /var never reaches it). The deployment root's own
//     var directory holds the image's /var content, which a booted node
//     never sees: look at VarDir for the node's /var, and resolve /usr/local,
//     /opt, /home, /root, /srv and /mnt through the image's symlinks into it.
//
// # What it cannot model
//
// Booting (ostree-prepare-root, the read-only /usr bind mount, kernel
// arguments, the bootloader); SELinux (the trees carry no labels and ostree
// loads no policy, so nothing is relabelled; a tree whose
// /etc/selinux/config names a policy type must ship that policy, or ostree
// fails with "selabel_open"); ostree-ext's other import rules (non-/usr
// top-level content in derived layers filtered unless allowed, /var
// optionally remapped to /usr/share/factory/var, per-layer commits);
// what newer ostree adds around the merge (ostree's main branch seeds an
// empty stateroot /var from the first deployment); the SELinux policy
// rebuild after the merge (ostree 2022.7 already runs `semodule -N
// --rebuild-if-modules-changed` under /usr/bin/bwrap in a new deployment
// that has /etc/selinux/config: internal/ostreevm's SELinux root
// filesystem boots it); transient or
// composefs-backed /etc; and what a node does when the merge
// fails: ostree refuses the deployment (a node file where B has a
// directory: "Modified config file newly defaults to directory"), which on
// a node leaves it on L and here fails the test.
//
// # What ostree 2022.7's merge does (pinned by the tests)
//
// Two entries are equal when type, content or symlink target, mode, uid and
// gid are equal (ostree compares file checksums of those); mtimes and xattrs
// are ignored. A path the node left unmodified takes B's default, or
// disappears when B lacks it; a modified or node-added path is copied over
// B's; a path the node removed is removed from B's /etc with everything
// below it, B's new files included. Directories are compared the same way
// but a modified directory that B also has is not copied, so a mode- or
// owner-only directory change is lost, unless a file below it is modified
// or added on the node: ostree then recreates the file's parent
// directories from the node's copies, which sets their mode and owners over
// B's even when the node never changed them. A modified directory that B
// lacks is copied whole, unmodified files below it included.
//
// Everything runs as root (Revert and Unpack skip the test otherwise)
// in t.TempDir(); ostree and umoci are installed with apt-get when missing.
package ostreetest
