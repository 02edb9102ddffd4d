// Package ignitiontest builds layered images the way others build them.
//
// Tests use them to check what mcbake predicts for an image that carries no
// mcbake manifest (docs/design.md, "Images built by others") against real
// ostree: Ignition's own ignition-apply applies a MachineConfig's Ignition
// config to an unpacked base, as the MCO's on-cluster build (OCL) and a
// Containerfile running ignition-apply do, and the changes are packed as one
// more layer on top of the base image.
//
// # The ignition binary
//
// Binary builds the `ignition` command from the github.com/coreos/ignition/v2
// module that mcbake's go.mod requires, at that version, in the module's own
// directory of the Go module cache (so with ignition's own go.mod and
// go.sum: its dependencies come from the Go module proxy, never into
// mcbake's module graph). It needs cgo and libblkid's headers (Debian's
// libblkid-dev, installed when missing and root). The binary is cached in
// CacheDir() per ignition and Go version; the first build downloads and
// compiles ignition's dependencies (a few minutes on two cores), later ones
// reuse it.
//
// The binary runs in apply mode when invoked as `ignition-apply`; Apply
// runs it so, with `--root`, `--ignore-unsupported` and `--offline`, the
// environment variable container=oci (ignition-apply refuses to run outside
// a container otherwise; the OCL Containerfile sets the same) and umask
// 022, as in a container build. ApplyMachineConfig is the OCL step: it
// stores the MachineConfig at /etc/machine-config-daemon/currentconfig
// and applies its spec.config.
//
// What ignition-apply then writes, unlike the machine-config-daemon:
// enablement goes to /etc/systemd/system-preset/20-ignition.preset
// ("enable NAME"), not to .wants links; `enabled: false` runs the host's
// `systemctl --root ROOT disable` when the unit is enabled, then adds
// "disable NAME"; a drop-in with empty contents is written as an empty
// file; a directory without a mode keeps the mode it has; a file without
// contents keeps the content it has; a symlink gets the owner of what it
// points to (stat follows it; an absolute target resolves on the host, a
// relative one in the root); an existing file needs `overwrite: true`;
// passwd (users, core's SSH keys) is skipped with --ignore-unsupported;
// owner names resolve in a chroot through the root's nsswitch.conf
// (without nss-altfiles in the root, /usr/lib/passwd is not read). SELinux
// labels are not set in apply mode.
//
// # The layer
//
// AppendLayer compares the applied root with a pristine unpack of the base
// and writes every path that was added or changed (type, mode, owners,
// content or target; mtimes are ignored) with its parent directories, and a
// whiteout for every path that was removed, as one gzip layer appended to
// the base image's manifest and config (diff ID and history), into a new
// OCI image layout whose other blobs are hard links to the base's. The
// image carries no mcbake label. Tests unpack it again with
// ostreetest.Unpack to get the root a node deploys.
//
// Everything runs as root (Available says why not otherwise).
package ignitiontest
