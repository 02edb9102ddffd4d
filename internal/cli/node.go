package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/node"
	"github.com/mcbake/mcbake/revert"
)

// NodeCommand is `node`, the commands a node runs around a revert:
// prepare-revert, finalized and check.
func NodeCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "node",
		Short: "Prepare a node's revert to its base image, and check it (run on the node)",
		Long: `The node commands run on an ostree node that reverts from a layered image to its
base: prepare-revert after the rebase is staged and before the reboot, finalized
at shutdown after ostree-finalize-staged.service (the safety net), check on the
first boot of the base. See docs/node.md.`,
		Example: `  mcbake node prepare-revert -f machineconfigs/ --dry-run
  mcbake node check --format json`,
	}
	cmd.AddCommand(PrepareRevertCommand(), FinalizedCommand(), CheckCommand(), GuardCommand())
	return cmd
}

// GuardTimeout bounds the revert guard's computation at shutdown; the
// unit's TimeoutStopSec (longer) bounds the whole run.
const GuardTimeout = 90 * time.Second

// GuardCommand is `node guard`, the revert guard that
// mcbake-revert-guard.service runs at shutdown.
func GuardCommand() *cobra.Command {
	var sysroot string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "guard [--sysroot DIR]",
		Short: "At shutdown, prepare the staged deployment for the config the machine-config-daemon stored (the revert guard)",
		Long: `Guard is what mcbake-revert-guard.service, baked into every image mcbake build
makes, runs at shutdown before ostree finalizes a staged deployment. When the
staged deployment is the image of the config the machine-config-daemon stored
(/etc/machine-config-daemon/currentconfig and currentimage), it writes into it
what prepare-revert would, so that the node boots it with every MachineConfig
path in place. Nothing staged, or another image staged: it does nothing. It
prints one line, keeps a report in /var/lib/mcbake/guard.json, and exits 0
whatever happens: it never fails a shutdown. See docs/node.md.`,
		Example: `  mcbake-node guard          # what the unit runs
  cat /var/lib/mcbake/guard.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, cancel := context.WithTimeoutCause(cmd.Context(), timeout, fmt.Errorf("the guard's --timeout %v passed", timeout))
			defer cancel()
			rep, err := node.Guard(ctx, sysroot, nil)
			line := rep.Line()
			if err != nil && rep.Action != node.GuardFailed {
				line += " (" + err.Error() + ")"
			}
			_, perr := fmt.Fprintln(cmd.OutOrStdout(), "mcbake revert guard: "+line)
			return perr
		},
	}
	cmd.Flags().StringVar(&sysroot, "sysroot", "/", "the ostree sysroot (/ on a booted node)")
	cmd.Flags().DurationVar(&timeout, "timeout", GuardTimeout, "give up, writing nothing, when the writes are not computed by then")
	return cmd
}

// PrepareRevertCommand is `node prepare-revert`.
func PrepareRevertCommand() *cobra.Command {
	var files []string
	var sysroot, planFile, format string
	var dryRun bool
	cmd := &cobra.Command{
		Use:   "prepare-revert -f MC... [--sysroot DIR] [--plan FILE] [--dry-run]",
		Short: "Write into the staged deployment the MachineConfig paths its finalization would leave wrong",
		Long: `Prepare-revert runs after the rebase to the base image is staged and before the
reboot. It finds the booted and the staged deployment, computes for every path
the MachineConfigs own what ostree's finalization will leave in the new /etc
(from the booted defaults, the live /etc and the staged /etc), and writes into
the staged /etc exactly the paths that would end wrong and that the node did not
modify, with the machine-config-daemon's modes and owners and the SELinux labels
of the staged deployment's policy; in one transaction, never outside the
deployment. With --plan (from mcbake plan in CI) it refuses, writing nothing,
unless the plan names the booted and staged images and the same paths. One line
per owned path; a record goes to /etc/mcbake/revert/record.json of the staged
deployment (replacing an earlier run's) and to the history under
/var/lib/mcbake/revert. A second run writes nothing.`,
		Example: `  rpm-ostree rebase ostree-unverified-registry:quay.io/openshift/base@sha256:...
  mcbake-node prepare-revert -f /etc/mcbake/machineconfigs/
  systemctl reboot`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			mcs, err := LoadMachineConfigs(cmd, files, "")
			if err != nil {
				return err
			}
			opts := node.PrepareOptions{Sysroot: sysroot, MachineConfigs: mcs, DryRun: dryRun}
			if planFile != "" {
				if opts.Plan, err = revert.ReadPlan(planFile); err != nil {
					return err
				}
			}
			rec, err := node.PrepareRevert(cmd.Context(), opts)
			if rec != nil {
				if perr := printRecord(cmd.OutOrStdout(), rec, format); err == nil {
					err = perr
				}
			}
			return err
		},
	}
	AddMachineConfigFlag(cmd, &files)
	fl := cmd.Flags()
	fl.StringVar(&sysroot, "sysroot", "/", "the ostree sysroot (/ on a booted node)")
	fl.StringVar(&planFile, "plan", "", "the revert plan from CI (mcbake plan) to check the local computation against")
	fl.BoolVar(&dryRun, "dry-run", false, "say what would be written, write nothing")
	fl.StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

func checkFormat(format string) error {
	if format != "text" && format != "json" {
		return fmt.Errorf("--format %q: want text or json", format)
	}
	return nil
}

// printRecord prints one line per owned path and a summary, or the record
// as JSON.
func printRecord(w io.Writer, rec *node.Record, format string) error {
	if format == "json" {
		return writeJSON(w, rec)
	}
	for _, c := range rec.Changes {
		fmt.Fprintln(w, changeLine(c, rec.DryRun))
	}
	verb := "wrote"
	if rec.DryRun {
		verb = "would write"
	}
	_, err := fmt.Fprintf(w, "%s %d of %d owned path(s) into %s/%s (staged, from booted %s)\n",
		verb, len(rec.Written()), len(rec.Changes), rec.Staged.Stateroot, rec.Staged.Name(), rec.Booted.Name())
	if rec.Error != "" {
		fmt.Fprintf(w, "the writes failed and were undone: %s\n", rec.Error)
	}
	for _, n := range rec.Notes {
		fmt.Fprintf(w, "note: %s\n", n)
	}
	return err
}

// changeLine is one path's line: op, path, what was wrong, why skipped.
func changeLine(c node.Change, dryRun bool) string {
	op := c.Op
	if dryRun && op != node.Unchanged && op != node.OpSkipped {
		op = "would " + op
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%-10s %s", op, c.Path)
	if len(c.Kinds) > 0 {
		fmt.Fprintf(&b, " %v", c.Kinds)
	}
	if c.Node != "" && c.Node != node.Unmodified {
		fmt.Fprintf(&b, " node: %s", c.Node)
	}
	if c.Reason != "" {
		fmt.Fprintf(&b, " (%s)", c.Reason)
	}
	if c.State == node.StateOld || c.State == node.StateUnknown {
		fmt.Fprintf(&b, " [%s]", c.State)
	}
	return b.String()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// FinalizedCommand is `node finalized`, the shutdown safety net.
func FinalizedCommand() *cobra.Command {
	var sysroot, format string
	var repair bool
	cmd := &cobra.Command{
		Use:   "finalized [--sysroot DIR] [--repair]",
		Short: "After ostree finalized the staged deployment, check (and repair) its MachineConfig paths",
		Long: `Finalized is the safety net of a prepared revert. It runs at shutdown after
ostree-finalize-staged.service (mcbake-revert-finalized.service orders it) and
compares the /etc of the deployment the next boot starts with the MachineConfigs
prepare-revert stored; with --repair it writes every owned path still wrong,
e.g. after something staged again after prepare-revert. One line per path. It
does nothing when no revert was prepared from the booted deployment. Exit 1
when paths are wrong and --repair is not given.`,
		Example: `  mcbake-node finalized            # report what finalization left wrong
  mcbake-node finalized --repair   # and write it (the shutdown unit does this)`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			// The shutdown safety net runs to its end: a signal does not
			// skip the repair.
			rep, err := node.Finalized(context.WithoutCancel(cmd.Context()), node.FinalizedOptions{Sysroot: sysroot, Repair: repair})
			w := cmd.OutOrStdout()
			if rep == nil {
				if err == nil {
					fmt.Fprintln(w, "no prepared revert was finalized: nothing to check")
				}
				return err
			}
			if format == "json" {
				err = errors.Join(err, writeJSON(w, rep))
			} else {
				for _, c := range rep.Changes {
					if !repair {
						c.Op = "wrong"
					}
					fmt.Fprintln(w, changeLine(c, false))
				}
				restaged := ""
				if rep.Restaged {
					restaged = " (staged again after prepare-revert)"
				}
				fmt.Fprintf(w, "%s%s: %d owned path(s) checked, %d wrong\n", rep.Pending.Name(), restaged, rep.Checked, len(rep.Changes))
			}
			if err == nil && !repair && len(rep.Changes) > 0 {
				return Findings()
			}
			return err
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&sysroot, "sysroot", "/", "the ostree sysroot: / on a booted node, where it runs at shutdown (on another sysroot the boot entries stand for both the booted and the next deployment, so nothing is found finalized)")
	fl.BoolVar(&repair, "repair", false, "write the paths that are wrong")
	fl.StringVar(&format, "format", "text", "output format: text or json")
	return cmd
}

// CheckCommand is `node check`, the first-boot check.
func CheckCommand() *cobra.Command {
	var sysroot, format string
	cmd := &cobra.Command{
		Use:   "check [--sysroot DIR]",
		Short: "On the first boot after a prepared revert, validate the node against the MachineConfigs",
		Long: `Check runs on the first boot after a revert prepared with prepare-revert
(mcbake-revert-check.service): it validates the running system against the
stored MachineConfigs as ondisk does, writes the report next to the record
under /var/lib/mcbake/revert and retires the record, so it runs once. Run
before that boot (the prepared deployment still staged, or waiting for the
next boot), it checks nothing and keeps the record for the safety net. It
only reads and reports. Exit 1 when paths are wrong.`,
		Example: `  mcbake-node check
  mcbake-node check --format json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFormat(format); err != nil {
				return err
			}
			bc, err := node.Check(cmd.Context(), node.CheckOptions{Sysroot: sysroot, Now: time.Now})
			w := cmd.OutOrStdout()
			if err != nil || bc == nil {
				if err == nil {
					fmt.Fprintln(w, "no prepared revert: nothing to check")
				}
				return err
			}
			if format == "json" {
				err = writeJSON(w, bc)
			} else if bc.Awaiting != nil {
				fmt.Fprintf(w, "the revert prepared for %s is not booted yet: nothing checked, the record is kept\n", bc.Awaiting.Name())
				return nil
			} else {
				if !bc.Prepared {
					fmt.Fprintf(w, "note: the booted deployment %s is not the one the revert was prepared for\n", bc.Booted.Name())
				}
				if fr := bc.Finalized; fr != nil {
					restaged := ""
					if fr.Restaged {
						restaged = " (staged again after prepare-revert)"
					}
					fmt.Fprintf(w, "the safety net at shutdown: %s%s: %d owned path(s) checked, %d repaired\n", fr.Pending.Name(), restaged, fr.Checked, len(fr.Changes))
					for _, c := range fr.Changes {
						fmt.Fprintln(w, "  "+changeLine(c, false))
					}
					if fr.Error != "" {
						fmt.Fprintf(w, "  its repair failed: %s\n", fr.Error)
					}
				}
				err = bc.Report.WriteText(w)
			}
			if err == nil && bc.Report != nil && len(bc.Report.Mismatches) > 0 {
				return Findings()
			}
			return err
		},
	}
	cmd.Flags().StringVar(&sysroot, "sysroot", "/", "the ostree sysroot: / on a booted node (on another sysroot the deployment's own /var is checked, which ostree leaves empty: /var paths are reported missing)")
	cmd.Flags().StringVar(&format, "format", "text", "output format: text or json")
	CompleteFormat(cmd)
	return cmd
}
