package ostreevm

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"path/filepath"
)

// SELinuxPackages are installed, besides BasePackages, into the root
// filesystem SELinuxRootfs returns: Debian's reference policy (policy type
// "default"), restorecon, setfiles and sestatus (policycoreutils),
// getenforce (selinux-utils), and bubblewrap: when the deployment has an
// /etc/selinux/config, ostree 2022.7 finalizes a staged deployment by
// running `semodule -N --rebuild-if-modules-changed` in it under
// /usr/bin/bwrap, and without bwrap finalization fails and the node
// boots the old deployment again.
var SELinuxPackages = []string{"selinux-policy-default", "policycoreutils", "selinux-utils", "bubblewrap"}

// SELinuxPolicy is the policy type SELinuxRootfs's /etc/selinux/config
// names.
const SELinuxPolicy = "default"

// SELinuxKargs are the kernel arguments a deployment of SELinuxRootfs
// boots with (Deploy's kargs): Debian's kernel starts AppArmor unless
// told otherwise; enforcing=0 keeps the policy permissive whatever
// /etc/selinux/config says.
var SELinuxKargs = []string{"security=selinux", "selinux=1", "enforcing=0"}

// selinuxConfig is SELinuxRootfs's /etc/selinux/config.
const selinuxConfig = "# ostreevm: the policy is loaded, permissive.\nSELINUX=permissive\nSELINUXTYPE=" + SELinuxPolicy + "\n"

// selinuxSource is this file: it goes into the variant's cache key, so
// that changing how the variant is baked rebuilds it (and only it).
//
//go:embed selinux.go
var selinuxSource []byte

var selinuxBase = variant{name: "selinux", packages: SELinuxPackages, bake: bakeSELinux, source: selinuxSource}

// SELinuxRootfs is BaseRootfs with an SELinux policy: SELinuxPackages
// installed, /etc/selinux/config setting SELINUX=permissive and
// SELINUXTYPE=default, the kernel checked for SELinux support. Booted
// with SELinuxKargs, systemd loads the policy and the guest runs it,
// permissive. Commit labels such a tree with its own policy and Deploy
// completes the labelling of its /etc, so that its deployments are
// labelled as RHCOS's are.
//
// The tree is cached like BaseRootfs's, under its own key; its build
// takes longer than the base's (installing the policy compiles it).
func SELinuxRootfs(ctx context.Context) (string, error) {
	return rootfs(ctx, selinuxBase)
}

// bakeSELinux checks that the kernel and the policy are there and writes
// /etc/selinux/config.
func bakeSELinux(_ context.Context, root string) error {
	kver, err := kernelVersion(root)
	if err != nil {
		return err
	}
	config, err := os.ReadFile(filepath.Join(root, "boot", "config-"+kver))
	if err != nil {
		return fmt.Errorf("the kernel's config: %w", err)
	}
	if !bytes.Contains(config, []byte("\nCONFIG_SECURITY_SELINUX=y\n")) {
		return fmt.Errorf("kernel %s is built without SELinux (no CONFIG_SECURITY_SELINUX=y)", kver)
	}
	dir := filepath.Join(root, "etc", "selinux", SELinuxPolicy)
	policies, err := filepath.Glob(filepath.Join(dir, "policy", "policy.*"))
	if err != nil {
		return err
	}
	if len(policies) == 0 {
		return fmt.Errorf("no compiled policy in %s/policy: the installation of %s did not build it", dir, SELinuxPackages[0])
	}
	if _, err := os.Stat(filepath.Join(dir, "contexts", "files", "file_contexts")); err != nil {
		return fmt.Errorf("the policy's file contexts: %w", err)
	}
	return writeFile(filepath.Join(root, "etc", "selinux", "config"), []byte(selinuxConfig), 0o644)
}
