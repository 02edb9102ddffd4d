// Command mcbake bakes MachineConfigs into layered OS images, offline.
//
// It also checks MachineConfigs and images before a rollout (verify) and
// predicts what a revert to the base image clobbers (diff, plan). See
// README.md and docs/usage.md.
package main

import (
	"context"
	"io"
	"os"

	"github.com/mcbake/mcbake/internal/gcpolicy"

	"github.com/mcbake/mcbake/internal/cli"
	"github.com/mcbake/mcbake/tool/build/buildah"
	"github.com/mcbake/mcbake/tool/image"
)

// Exit codes.
const (
	exitOK       = cli.ExitOK
	exitFindings = cli.ExitFindings
	exitInput    = cli.ExitInput
)

func main() {
	// containers-storage (and buildah) re-execute this binary for helper
	// work; when this process is such a child, it has done its job.
	if buildah.InitReexec() || image.InitReexec() {
		return
	}
	gcpolicy.Defer()
	os.Exit(run())
}

func run() int {
	ctx, stop := cli.SignalContext(cli.StopGrace, os.Stderr, "mcbake")
	defer stop()
	return execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// execute runs the command line args and returns the exit code; errors
// go to stderr, one line each, prefixed with "mcbake: ".
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, newRootCommand(), args, stdin, stdout, stderr)
}
