// Package node prepares, checks and repairs a node's /etc around a revert.
//
// It works on a node's root filesystem, or on an ostree deployment's,
// from the node's side of a revert: Open opens a root (reads through
// openat2 with RESOLVE_IN_ROOT, atomic writes that never leave it),
// Rewrite makes the paths of a revert plan what the MachineConfigs want,
// and Validate checks a root against the MachineConfigs the way the
// machine-config-daemon's on-disk validation does, and more strictly.
//
// It builds without cgo and without any containers/* module, so the
// machine-config-daemon and a static node binary can use it.
package node
