package main

import (
	"fmt"
	"io"
	"log/slog"
	"runtime"
	"strings"

	"github.com/mcbake/mcbake/internal/cli"
	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/tool/image"

	"github.com/spf13/cobra"
)

// version is set at link time (-X main.version=...).
var version = "dev"

func newRootCommand() *cobra.Command {
	var logLevel string
	root := &cobra.Command{
		Use:           "mcbake",
		Short:         "Bake MachineConfigs into layered OS images and predict what a revert clobbers",
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			return setupLogging(logLevel, cmd.ErrOrStderr())
		},
	}
	root.PersistentFlags().StringVar(&logLevel, "log-level", "warn", "log level: debug, info, warn or error (logs go to stderr; debug includes containers/image's registry requests)")
	_ = root.RegisterFlagCompletionFunc("log-level", cobra.FixedCompletions([]string{"debug", "info", "warn", "error"}, cobra.ShellCompDirectiveNoFileComp))
	root.AddCommand(newVersionCommand(), newRenderCommand(), newBuildCommand(), newManifestCommand(), newDiffCommand(), newPlanCommand(), cli.RewriteCommand(), cli.OnDiskCommand(), cli.NodeCommand(), newVerifyCommand(), newGuardTreeCommand(), newIndexCommand())
	root.AddCommand(newManCommand(root))
	root.SetVersionTemplate("mcbake {{.Version}}\n")
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() == "completion" {
			addCompletionExamples(c)
		}
	}
	return root
}

// completionExamples are the Example sections of cobra's completion
// commands, which have none of their own.
var completionExamples = map[string]string{
	"bash":       `  source <(mcbake completion bash)`,
	"zsh":        `  mcbake completion zsh > "${fpath[1]}/_mcbake"`,
	"fish":       `  mcbake completion fish > ~/.config/fish/completions/mcbake.fish`,
	"powershell": `  mcbake completion powershell | Out-String | Invoke-Expression`,
}

func addCompletionExamples(c *cobra.Command) {
	c.Example = completionExamples["bash"] + "\n" + completionExamples["zsh"] + "\n" + completionExamples["fish"]
	for _, sub := range c.Commands() {
		sub.Example = completionExamples[sub.Name()]
	}
}

// setupLogging sends warnings (and what level adds) to the command's
// stderr.
func setupLogging(level string, stderr io.Writer) error {
	var l slog.Level
	if err := l.UnmarshalText([]byte(strings.ToLower(level))); err != nil {
		return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
	}
	slog.SetDefault(slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: l})))
	image.SetLog(stderr, l)
	return nil
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:     "version",
		Short:   "Print mcbake's version",
		Example: `  mcbake version`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// The gzip decoder is the binary's and the machine's: ISA-L's
			// needs the isal build tag and libisal.so.2. The Go release
			// names the experiments the binary was built with (make
			// build: jsonv2).
			_, err := fmt.Fprintf(cmd.OutOrStdout(), "mcbake %s\ngo: %s\ngzip decoder: %s\n", version, runtime.Version(), decompress.GzipDecoder())
			return err
		},
	}
}
