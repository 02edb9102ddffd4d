package main

import (
	"errors"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/internal/cli"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/diff"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/progress"
)

// diffFlags are shared by diff and plan.
type diffFlags struct {
	img          imageFlags
	index        indexFlags
	baseRef      string
	imageRef     string
	manifestFile string
	mcs          []string
	quiet        bool
}

func (f *diffFlags) register(cmd *cobra.Command, allowManifest bool) {
	f.img.register(cmd)
	f.index.register(cmd, "")
	fl := cmd.Flags()
	fl.StringVar(&f.baseRef, "base", "", "the base image a node reverts to")
	fl.StringVar(&f.imageRef, "image", "", "the layered image the node runs")
	if allowManifest {
		fl.StringVar(&f.manifestFile, "manifest", "", "the layered image's ownership manifest file (instead of --image)")
	}
	fl.StringArrayVarP(&f.mcs, "machineconfig", "f", nil, "the MachineConfig files or directories the image was built from (- for stdin), for an --image without an mcbake manifest (built by others); with a manifest, a difference from the ones it records is a warning; repeatable")
	cli.AddPoolFlag(cmd)
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	_ = cmd.MarkFlagRequired("base")
	completeImageRefs(cmd, "base", "image")
}

// report runs the diff: one library call.
func (f *diffFlags) report(cmd *cobra.Command) (*revert.Report, error) {
	opts, cacheDir, err := f.img.options(cmd)
	if err != nil {
		return nil, err
	}
	shared, err := f.index.shared("", cmd.ErrOrStderr(), f.quiet)
	if err != nil {
		return nil, err
	}
	rep := progress.New(cmd.ErrOrStderr(), f.quiet)
	defer rep.Wait()
	r, err := diff.Run(cmd.Context(), diff.Options{Base: f.baseRef, Image: f.imageRef, ManifestFile: f.manifestFile,
		MachineConfigs: f.mcs, Stdin: cmd.InOrStdin(), Pool: cli.Pool(cmd), Skipped: cli.SkippedPrinter(cmd),
		Images: opts, CacheDir: cacheDir, SharedIndex: shared, Progress: func(layer string, total, n int64) { rep.Update("read "+short(layer), total, n) }})
	switch {
	case errors.Is(err, diff.ErrImageOrManifest):
		return nil, errors.New("give exactly one of --image IMAGE or --manifest FILE")
	case errors.Is(err, image.ErrNotLayered) && len(f.mcs) == 0:
		return nil, fmt.Errorf("%w; for an image built by others, give the MachineConfigs it was built from with -f", err)
	}
	return r, err
}

func newDiffCommand() *cobra.Command {
	var f diffFlags
	var format string
	var exitCode bool
	cmd := &cobra.Command{
		Use:   "diff --base IMAGE (--image IMAGE [-f MC...] | --manifest FILE)",
		Short: "Predict what a revert from a layered image to a base does to every owned path",
		Long: `Diff classifies every path the layered image owns by zone (etc: three-way
merged; usr: replaced by the base; var: untouched; dropped: never deployed),
compares it with the base, and applies ostree's /etc merge rules, assuming the
node's copy is what the machine-config-daemon wrote (the same content the image
baked). A path is clobbered when the revert leaves it different from what the
MachineConfig wants. The base may be a newer base than the one the image was
built on (base-bump analysis).

An image without an mcbake manifest (built by the MCO's on-cluster build or a
Containerfile running ignition-apply) needs -f with the MachineConfigs it was
built from: the owned paths are what the machine-config-daemon writes for them
on a node that runs the image, and a path counts as unmodified on the node only
where the image's own default is exactly that. For an image with a manifest
(or --manifest), the prediction follows the manifest, and -f is a check: each
difference from the MachineConfigs it records is logged as a warning.

With --exit-code the exit status says whether there is a difference, as
diffoci's does: 0 when a revert clobbers nothing, 1 when it clobbers at
least one owned path, 2 on an error.`,
		Example: `  mcbake diff --base oci:rhcos:4.18 --image oci:layered:latest
  mcbake diff --base docker://quay.io/org/rhcos:4.18.3 --manifest manifest.json --format json
  mcbake diff --base oci:rhcos:4.18 --image oci:layered:latest --exit-code --quiet   # 1 if a revert clobbers anything
  mcbake diff --base oci:rhcos:4.18 --image docker://quay.io/org/ocl-built:latest -f rendered-worker.yaml`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if format != "text" && format != "json" {
				return fmt.Errorf("--format %q: want text or json", format)
			}
			r, err := f.report(cmd)
			if err != nil {
				return err
			}
			if format == "json" {
				err = r.WriteJSON(cmd.OutOrStdout())
			} else {
				err = r.WriteText(cmd.OutOrStdout(), revert.TextOptions{Color: isTerminal(cmd.OutOrStdout())})
			}
			if err == nil && exitCode && r.Summary.Clobbered > 0 {
				return cli.Findings()
			}
			return err
		},
	}
	f.register(cmd, true)
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	cmd.Flags().BoolVar(&exitCode, "exit-code", false, "exit 1 when a revert clobbers at least one owned path (2 stays errors)")
	completeValues(cmd, "format", "text", "json")
	return cmd
}

// isTerminal reports whether output to w may be coloured (see
// progress.Interactive: NO_COLOR and TERM=dumb turn colour off).
func isTerminal(w io.Writer) bool { return progress.Interactive(w) }

func newPlanCommand() *cobra.Command {
	var f diffFlags
	var out string
	cmd := &cobra.Command{
		Use:     "plan --base IMAGE --image IMAGE [-f MC...] -o FILE",
		Short:   "Write the revert plan: the paths a node must rewrite after reverting to the base",
		Example: `  mcbake plan --base oci:rhcos:4.18 --image oci:layered:latest -o plan.json`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			r, err := f.report(cmd)
			if err != nil {
				return err
			}
			p, err := revert.NewPlan(r)
			if err != nil {
				return err
			}
			b, err := revert.MarshalPlan(p)
			if err != nil {
				return err
			}
			if err := writeFileAtomic("-o", out, b, cmd.OutOrStdout()); err != nil {
				return err
			}
			summary := cmd.OutOrStdout()
			if out == "-" { // stdout holds the plan
				summary = cmd.ErrOrStderr()
			}
			fmt.Fprintf(summary, "%s: %d path(s) to rewrite, %d lost (outside /etc)\n", out, len(p.Rewrite), len(p.Lost))
			return nil
		},
	}
	f.register(cmd, false)
	cmd.Flags().StringVarP(&out, "output", "o", "", "plan file to write (- for stdout)")
	_ = cmd.MarkFlagRequired("image")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
