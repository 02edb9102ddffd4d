package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCommand is the hidden `man DIR` that `make man` runs: one man page
// per command (mcbake.1, mcbake-build.1, ...), generated from the same
// help text, examples and flags as --help. The date is SOURCE_DATE_EPOCH's
// (else the epoch), so the pages are reproducible.
func newManCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:     "man DIR",
		Short:   "Write mcbake's man pages to DIR",
		Example: `  mcbake man man/`,
		Hidden:  true,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			date, err := buildTime("")
			if err != nil {
				return err
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root.DisableAutoGenTag = true
			header := &doc.GenManHeader{Title: "MCBAKE", Section: "1", Source: "mcbake " + version, Manual: "mcbake manual", Date: &date}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: man pages written\n", args[0])
			return err
		},
	}
}
