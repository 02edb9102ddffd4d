// Command mcbake-node is mcbake's node side as a static binary.
//
// Built with CGO_ENABLED=0, it runs on every RHCOS (RHEL 8 based ones
// with glibc 2.28 included): prepare-revert, finalized and check around a
// revert to the base image, and rewrite and ondisk. It links nothing from
// containers/*. See docs/node.md.
package main

import (
	"fmt"
	"os"

	"github.com/mcbake/mcbake/internal/gcpolicy"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/internal/cli"
)

// version is set at link time (-X main.version=...).
var version = "dev"

func main() {
	gcpolicy.Defer()
	ctx, stop := cli.SignalContext(cli.StopGrace, os.Stderr, "mcbake-node")
	code := cli.Execute(ctx, rootCommand(), os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

func rootCommand() *cobra.Command {
	root := &cobra.Command{
		Use:           "mcbake-node",
		Short:         "mcbake on the node: prepare a revert to the base image, check it, rewrite and validate /etc",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.AddCommand(cli.PrepareRevertCommand(), cli.FinalizedCommand(), cli.CheckCommand(), cli.GuardCommand(),
		cli.RewriteCommand(), cli.OnDiskCommand(), &cobra.Command{
			Use:   "version",
			Short: "Print mcbake-node's version",
			Args:  cobra.NoArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				_, err := fmt.Fprintf(cmd.OutOrStdout(), "mcbake-node %s\n", version)
				return err
			},
		})
	return root
}
