package revert

import (
	"context"
	"fmt"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// Derive is what the merged MachineConfigs own on a node that runs a
// layered image without an ownership manifest, whose tree is layered
// (docs/design.md, "Images built by others"): what the machine-config-
// daemon writes there, the MachineConfigs rendered against the image as
// the daemon applies them on the node; plus, owned only on the base a node
// reverts to, the parent directories the base lacks and the removals of
// base paths (a disabled unit's enablement link) that the image already
// has as the MachineConfigs need them, so that the daemon writes nothing
// there. The entries' sources are the MachineConfig fields that own them.
// PredictDerived and DiffDerived take its result.
func Derive(ctx context.Context, m *machineconfig.Merged, layered, base fstree.Tree) (Ownership, error) {
	if err := ctx.Err(); err != nil {
		return Ownership{}, err
	}
	onNode, err := render.Render(ctx, m, layered)
	if err != nil {
		return Ownership{}, fmt.Errorf("rendering the MachineConfigs against the image: %w", err)
	}
	owned := Ownership{Manifest: onNode.Manifest(m.MachineConfigs), BaseOnly: map[string]bool{}}
	if err := ctx.Err(); err != nil {
		return Ownership{}, err
	}
	onBase, err := render.Render(ctx, m, base)
	if err != nil {
		return Ownership{}, fmt.Errorf("rendering the MachineConfigs against the base: %w", err)
	}
	for _, e := range onBase.Entries {
		if _, ok := owned.Manifest.Lookup(e.Path); ok || (e.Type != manifest.Absent && e.Type != manifest.Directory) {
			continue
		}
		owned.Manifest.Entries = append(owned.Manifest.Entries, e.Entry)
		owned.BaseOnly[e.Path] = true
	}
	owned.Manifest.Sort()
	return owned, nil
}
