package main

import (
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/mcbake/mcbake/cmd/internal/cli"
	"github.com/mcbake/mcbake/image"

	"github.com/spf13/cobra"
)

// version is set at link time (-X main.version=...).
var version = "dev"

func newRootCommand() *cobra.Command {
	var logLevel string
	root := &cobra.Command{
		Use:           "mcbake",
		Short:         "Bake MachineConfigs into layered OS images and predict what a revert clobbers",
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return setupLogging(logLevel)
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn or error (logs go to stderr)")
	root.AddCommand(newVersionCommand(), newRenderCommand(), newBuildCommand(), newManifestCommand(), newDiffCommand(), newPlanCommand(), cli.RewriteCommand(), cli.OnDiskCommand(), cli.NodeCommand(), newVerifyCommand())
	return root
}

func setupLogging(level string) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: l})))
	image.SetLog(os.Stderr, l)
	return nil
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print mcbake's version",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "mcbake %s\n", version)
			return err
		},
	}
}
