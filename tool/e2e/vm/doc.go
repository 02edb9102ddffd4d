// Package vm holds mcbake's end-to-end test on a booted ostree system.
//
// It runs on internal/testing/ostreevm: a layered image built by mcbake from a
// Debian bookworm ostree OS, a node that runs it, a revert to the base with
// the real staged deployment and finalization at shutdown, and the node's
// state on the first boot of the base.
package vm
