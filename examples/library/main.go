// Command library shows mcbake used as a library: it loads MachineConfigs,
// renders them against an unpacked base image, predicts what a revert to
// that base clobbers, and rewrites those paths under a node's root.
//
//	library BASE_DIGEST BASE_DIR NODE_ROOT MC.yaml...
package main

import (
	"context"
	"fmt"
	"os"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
)

func main() {
	if len(os.Args) < 5 {
		fmt.Fprintln(os.Stderr, "usage: library BASE_DIGEST BASE_DIR NODE_ROOT MC...")
		os.Exit(2)
	}
	if err := run(context.Background(), digest.Digest(os.Args[1]), os.Args[2], os.Args[3], os.Args[4:]); err != nil {
		fmt.Fprintln(os.Stderr, "library:", err)
		os.Exit(2)
	}
}

func run(ctx context.Context, baseDigest digest.Digest, baseDir, rootDir string, files []string) error {
	mcs, err := machineconfig.Load(files, nil)
	if err != nil {
		return err
	}
	base, err := fstree.Open(baseDir)
	if err != nil {
		return err
	}
	defer base.Close()
	res, err := render.Render(ctx, machineconfig.Merge(mcs), base) // what the image bakes
	if err != nil {
		return err
	}
	m := res.Manifest(mcs)
	raw, err := manifest.Marshal(m)
	if err != nil {
		return err
	}
	image := manifest.ImageRef{Reference: "rendered", Digest: digest.FromBytes(raw)}
	report, err := revert.Diff(ctx, m, image, manifest.ImageRef{Reference: baseDir, Digest: baseDigest}, base)
	if err != nil {
		return err
	}
	plan, err := revert.NewPlan(report)
	if err != nil {
		return err
	}
	root, err := node.Open(rootDir)
	if err != nil {
		return err
	}
	defer root.Close()
	actions, err := node.Rewrite(ctx, root, plan, mcs, node.RewriteOptions{})
	for _, a := range actions {
		fmt.Printf("%s %s %v\n", a.Op, a.Path, a.Kinds)
	}
	fmt.Printf("%d owned, %d clobbered by a revert, %d rewritten\n", report.Summary.Total, report.Summary.Clobbered, len(actions))
	return err
}
