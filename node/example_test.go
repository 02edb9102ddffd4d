package node_test

import (
	"context"
	"fmt"
	"log"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/node"
)

// The machine-config-daemon reverting a node from a layered image to its
// base calls PrepareRevert after its last staging step (the rebase, kernel
// arguments, extensions), instead of installing
// machine-config-daemon-revert.service: the node then boots the base with
// every MachineConfig file in place after one reboot, and kubelet never
// starts on a half-configured node. renderedConfig is the JSON of the
// rendered MachineConfig the node must run.
func ExamplePrepareRevert() {
	var renderedConfig []byte // the rendered MachineConfig, as JSON
	mcs, err := machineconfig.Parse("rendered-worker", renderedConfig)
	if err != nil {
		log.Fatalf("the MachineConfig: %v", err)
	}
	rec, err := node.PrepareRevert(context.Background(), node.PrepareOptions{Sysroot: "/", MachineConfigs: mcs})
	if err != nil {
		// Nothing was written (or, after a failed write, every path is
		// back as it was): keep the two-reboot revert.
		log.Printf("preparing the revert: %v", err)
		return
	}
	for _, c := range rec.Written() {
		fmt.Printf("revert: %s %s %v\n", c.Op, c.Path, c.Kinds)
	}
	// Reboot: ostree-finalize-staged.service merges the node's /etc into
	// the prepared deployment, mcbake-revert-finalized.service checks it.
}
