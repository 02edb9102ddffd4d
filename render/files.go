package render

import (
	"context"
	"io"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// Files loads the MachineConfigs the paths name (see machineconfig.Load),
// merges them and renders them against root (nil for none). It returns
// the rendering and its ownership manifest.
func Files(ctx context.Context, paths []string, stdin io.Reader, root fstree.Tree) (*Result, *manifest.Manifest, error) {
	mcs, err := machineconfig.Load(paths, stdin)
	if err != nil {
		return nil, nil, err
	}
	res, err := Render(ctx, machineconfig.Merge(mcs), root)
	if err != nil {
		return nil, nil, err
	}
	return res, res.Manifest(mcs), nil
}
