package revert

import (
	"fmt"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// Stale is one difference between the MachineConfigs given and those a
// manifest records (mcbake verify reports each as MCB009).
type Stale struct {
	// Source names the MachineConfig given; empty for one only recorded.
	Source  machineconfig.Source
	Message string
}

// Staleness lists the MachineConfigs given that the manifest m does not
// record as they are, then those it records that were not given.
func Staleness(m *manifest.Manifest, mcs []*machineconfig.MachineConfig) []Stale {
	var out []Stale
	baked := map[string]digest.Digest{}
	for _, mc := range m.MachineConfigs {
		baked[mc.Name] = mc.Digest
	}
	for _, mc := range mcs {
		src := machineconfig.Source{File: mc.File, MachineConfig: mc.Name, Field: "metadata.name"}
		d, ok := baked[mc.Name]
		switch {
		case !ok:
			out = append(out, Stale{src, fmt.Sprintf("MachineConfig %s is not baked into the image", mc.Name)})
		case d != mc.Digest:
			out = append(out, Stale{src, fmt.Sprintf("MachineConfig %s differs from the one baked into the image (given %s, baked %s)", mc.Name, mc.Digest, d)})
		}
		delete(baked, mc.Name)
	}
	for _, mc := range m.MachineConfigs {
		if _, ok := baked[mc.Name]; ok {
			out = append(out, Stale{machineconfig.Source{}, fmt.Sprintf("the image bakes MachineConfig %s (%s), which was not given", mc.Name, mc.Digest)})
		}
	}
	return out
}
