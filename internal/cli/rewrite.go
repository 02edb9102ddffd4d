package cli

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/revert"
)

// nodeInputs are what rewrite and ondisk read: the MachineConfigs and the
// node's root.
type nodeInputs struct {
	mcs  []*machineconfig.MachineConfig
	root *node.Root
}

// openNode loads the MachineConfigs and opens the node's root directory.
// The caller closes the root.
func openNode(cmd *cobra.Command, files []string, dir string) (*nodeInputs, error) {
	mcs, err := LoadMachineConfigs(cmd, files, "")
	if err != nil {
		return nil, err
	}
	root, err := node.Open(dir)
	if err != nil {
		return nil, fmt.Errorf("--root: %w", err)
	}
	return &nodeInputs{mcs: mcs, root: root}, nil
}

// RewriteCommand is `rewrite`: a revert plan applied to a node root.
func RewriteCommand() *cobra.Command {
	var files []string
	var planFile, dir, format string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "rewrite --plan FILE -f MC... --root DIR [--dry-run] [--format text|json]",
		Short: "Rewrite the paths a revert plan names, under a node's root, from the MachineConfigs",
		Long: `Rewrite makes each planned path under DIR exactly what the MachineConfigs
want. Content comes from the MachineConfigs, never from the plan alone: every
plan entry must match them (type, mode, owners, digest or target), otherwise
nothing is written. Writes are atomic (temporary file, fsync, rename, fsync of
the directory); no path component is followed outside DIR (openat2 with
RESOLVE_IN_ROOT). A second run writes nothing.`,
		Example: `  mcbake plan --base oci:rhcos:4.18 --image oci:layered:latest -o plan.json
  mcbake rewrite --plan plan.json -f worker.yaml --root /sysroot/ostree/deploy/rhcos/deploy/NEW --dry-run`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			p, err := revert.ReadPlan(planFile)
			if err != nil {
				return err
			}
			in, err := openNode(cmd, files, dir)
			if err != nil {
				return err
			}
			acts, err := node.Rewrite(cmd.Context(), in.root, p, in.mcs, node.RewriteOptions{DryRun: dryRun})
			if err = errors.Join(err, in.root.Close()); err != nil {
				return err
			}
			if format == "json" {
				return writeJSON(cmd.OutOrStdout(), RewriteResult{SchemaVersion: RewriteSchemaVersion, DryRun: dryRun, Actions: acts})
			}
			printActions(cmd, acts, dryRun)
			return nil
		},
	}
	AddMachineConfigFlag(cmd, &files)
	cmd.Flags().StringVar(&planFile, "plan", "", "revert plan (from mcbake plan)")
	cmd.Flags().StringVar(&dir, "root", "", "the node's root directory")
	cmd.Flags().BoolVar(&dryRun, "dry-run", false, "say what would be written, write nothing")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	CompleteFormat(cmd)
	_ = cmd.MarkFlagRequired("plan")
	_ = cmd.MarkFlagRequired("root")
	return cmd
}

// RewriteSchemaVersion is the version of RewriteResult's JSON format.
const RewriteSchemaVersion = 1

// RewriteResult is rewrite's JSON output: what was done (or, with
// --dry-run, would be done) to each planned path.
type RewriteResult struct {
	SchemaVersion int           `json:"schemaVersion"`
	DryRun        bool          `json:"dryRun,omitempty"`
	Actions       []node.Action `json:"actions"`
}

func printActions(cmd *cobra.Command, acts []node.Action, dryRun bool) {
	w := cmd.OutOrStdout()
	changed := 0
	for _, a := range acts {
		if a.Op == node.Unchanged {
			continue
		}
		changed++
		verb := a.Op
		if dryRun {
			verb = "would " + verb
		}
		fmt.Fprintf(w, "%s %s (%v)\n", verb, a.Path, a.Kinds)
	}
	switch {
	case changed == 0 && len(acts) > 0:
		fmt.Fprintf(w, "nothing to do: all %d planned path(s) already match\n", len(acts))
	case changed == 0:
		fmt.Fprintln(w, "nothing to do: the plan is empty")
	case dryRun:
		fmt.Fprintf(w, "%d of %d planned path(s) would be rewritten\n", changed, len(acts))
	default:
		fmt.Fprintf(w, "rewrote %d of %d planned path(s)\n", changed, len(acts))
	}
}

// OnDiskCommand is `ondisk`: a root validated against MachineConfigs.
func OnDiskCommand() *cobra.Command {
	var files []string
	var dir, format string
	cmd := &cobra.Command{
		Use:   "ondisk -f MC... --root DIR [--format text|json]",
		Short: "Validate a node's root directory against MachineConfigs",
		Long: `Ondisk checks what the machine-config-daemon's on-disk validation checks,
and what it misses: file content, mode and owner; unit files, drop-ins, masks
and enablement symlinks (including units without contents, and links a
disabled unit must not have); core's SSH keys. Exit 0 when DIR matches, 1 with
every mismatch listed.`,
		Example: `  mcbake ondisk -f worker.yaml --root /
  mcbake ondisk -f machineconfigs/ --root /mnt/node --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			in, err := openNode(cmd, files, dir)
			if err != nil {
				return err
			}
			rep, err := node.Validate(cmd.Context(), in.root, in.mcs)
			if err = errors.Join(err, in.root.Close()); err != nil {
				return err
			}
			if format == "json" {
				err = rep.WriteJSON(cmd.OutOrStdout())
			} else {
				err = rep.WriteText(cmd.OutOrStdout())
			}
			if err == nil && len(rep.Mismatches) > 0 {
				return Findings()
			}
			return err
		},
	}
	AddMachineConfigFlag(cmd, &files)
	cmd.Flags().StringVar(&dir, "root", "", "the node's root directory")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	CompleteFormat(cmd)
	_ = cmd.MarkFlagRequired("root")
	return cmd
}
