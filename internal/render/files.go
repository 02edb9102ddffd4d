package render

import (
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/mcbake/mcbake/internal/machineconfig"
	"github.com/mcbake/mcbake/internal/manifest"
)

// Files loads the MachineConfigs the paths name (see machineconfig.Load),
// merges them and renders them against the directory rootDir ("" for no
// root). It returns the rendering and its ownership manifest.
func Files(paths []string, stdin io.Reader, rootDir string) (*Result, *manifest.Manifest, error) {
	var root Root
	if rootDir != "" {
		abs, err := filepath.Abs(rootDir)
		if err != nil {
			return nil, nil, err
		}
		if fi, err := os.Stat(abs); err != nil || !fi.IsDir() {
			return nil, nil, fmt.Errorf("root %s: not a directory", rootDir)
		}
		root = DirRoot(abs)
	}
	mcs, err := machineconfig.Load(paths, stdin)
	if err != nil {
		return nil, nil, err
	}
	res, err := Render(machineconfig.Merge(mcs), root)
	if err != nil {
		return nil, nil, err
	}
	return res, res.Manifest(mcs), nil
}
