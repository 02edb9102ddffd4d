// Command mcbake bakes MachineConfigs into layered OS images offline and
// predicts what a revert to the base image clobbers. See README.md.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/mcbake/mcbake/build/buildah"
	"github.com/mcbake/mcbake/image"
)

// Exit codes.
const (
	exitOK       = 0
	exitFindings = 1 // a check ran and found problems
	exitInput    = 2 // usage, input or I/O error
)

func main() {
	// containers-storage (and buildah) re-execute this binary for helper
	// work; when this process is such a child, it has done its job.
	if buildah.InitReexec() || image.InitReexec() {
		return
	}
	os.Exit(run())
}

func run() int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return execute(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
}

// execute runs the command line args and returns the exit code; errors
// go to stderr, one line each, prefixed with "mcbake: ".
func execute(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	cmd := newRootCommand()
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	code := exitInput
	var ec *exitCodeError
	if errors.As(err, &ec) {
		code, err = ec.code, ec.err
	}
	if err != nil {
		for _, line := range strings.Split(err.Error(), "\n") {
			fmt.Fprintln(stderr, "mcbake:", line)
		}
	}
	return code
}

// exitCodeError carries a specific exit code out of a command.
type exitCodeError struct {
	code int
	err  error
}

func (e *exitCodeError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}
