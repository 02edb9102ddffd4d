package main

import (
	"errors"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/cli"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/render"
)

func newRenderCommand() *cobra.Command {
	var files []string
	var out, root string
	cmd := &cobra.Command{
		Use:   "render -f MC... -o DIR [--root DIR]",
		Short: "Render MachineConfigs to the files the machine-config-daemon writes, with an ownership manifest",
		Long: `Render merges the MachineConfigs and writes what the machine-config-daemon
would write on a node to DIR/rootfs, and the ownership manifest to
DIR/manifest.json. --root is a directory where owner names resolve
(etc/passwd, usr/lib/passwd), presets and base unit files are read, and
parent symlinks are followed.`,
		Example: `  mcbake render -f worker.yaml -o out/
  mcbake render -f worker.yaml -f 99-extra.yaml -o out/ --root /srv/rhcos-rootfs`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			var r fstree.Tree
			if root != "" {
				d, err := fstree.Open(root)
				if err != nil {
					return fmt.Errorf("--root: %w", err)
				}
				defer func() { err = errors.Join(err, d.Close()) }()
				r = d
			}
			mcs, err := cli.LoadMachineConfigs(cmd, files, "")
			if err != nil {
				return err
			}
			res, err := render.Render(cmd.Context(), machineconfig.Merge(mcs), r)
			if err != nil {
				return err
			}
			m := res.Manifest(mcs)
			if err := render.WriteTree(cmd.Context(), out, res, m, render.WriteOptions{Chown: os.Geteuid() == 0}); err != nil {
				return fmt.Errorf("writing %s: %w", out, err)
			}
			return printSummary(cmd.OutOrStdout(), out, m)
		},
	}
	addMachineConfigFlag(cmd, &files)
	cmd.Flags().StringVarP(&out, "output", "o", "", "output directory (rootfs/ and manifest.json)")
	cmd.Flags().StringVar(&root, "root", "", "directory where owner names resolve and presets are read")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}

func addMachineConfigFlag(cmd *cobra.Command, files *[]string) { cli.AddMachineConfigFlag(cmd, files) }
