package main

import (
	"fmt"
	"os"
	"runtime"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/tool/guard"
)

func newGuardTreeCommand() *cobra.Command {
	var out, binary, arch string
	cmd := &cobra.Command{
		Use:   "guard-tree -o DIR [--arch ARCH] [--guard-binary FILE]",
		Short: "Write the revert guard's files as a tree, to COPY into an image built by others",
		Long: `Guard-tree writes the revert guard that mcbake build bakes into every image
(` + guard.BinaryPath + `, ` + guard.UnitPath + ` and the link that
enables it from /usr) under DIR, with their parent directories, so that a
Containerfile can add it to an image mcbake did not build:

    COPY DIR/ /

mcbake's own container image holds the same tree at ` + guard.ToolImageDir + `
(COPY --from=MCBAKE_IMAGE ` + guard.ToolImageDir + `/ /). DIR is made aside
and renamed in: it must be absent, empty, or an earlier guard tree.`,
		Example: `  mcbake guard-tree -o guard/
  mcbake guard-tree -o guard/ --guard-binary bin/mcbake-node`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			guardFor, err := guardBinaryFor(false, binary, 0)
			if err != nil {
				return err
			}
			b, err := guardFor(arch)
			if err != nil {
				return err
			}
			if err := guard.CheckArch(b, arch); err != nil {
				return err
			}
			if err := guard.WriteTree(cmd.Context(), out, b, render.WriteOptions{Chown: os.Geteuid() == 0}); err != nil {
				return fmt.Errorf("-o %s: %w", out, err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "wrote the revert guard to %s: %s, %s, %s\n", out, guard.BinaryPath, guard.UnitPath, guard.WantsPath)
			return err
		},
	}
	cmd.Flags().StringVarP(&out, "output", "o", "", "output directory (the tree to copy onto an image's /)")
	cmd.Flags().StringVar(&binary, "guard-binary", "", "the revert guard's static node binary (default: the one built into mcbake for --arch)")
	cmd.Flags().StringVar(&arch, "arch", runtime.GOARCH, "the architecture (GOARCH) of the images the tree goes into")
	completeValues(cmd, "arch", "amd64", "arm64", "ppc64le", "s390x")
	_ = cmd.MarkFlagRequired("output")
	return cmd
}
