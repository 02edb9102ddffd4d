// Package cli holds what mcbake's two command-line programs share.
//
// That is the exit codes, running a cobra root command with one error
// line per problem, and the node commands, which both the mcbake and the
// static mcbake-node binary have.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"sync"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/machineconfig"
)

// Exit codes.
const (
	ExitOK       = 0
	ExitFindings = 1 // a check ran and found problems
	ExitInput    = 2 // usage, input or I/O error
)

// ExitError carries a specific exit code out of a command; Err, when set,
// is printed.
type ExitError struct {
	Code int
	Err  error
}

func (e *ExitError) Error() string {
	if e.Err == nil {
		return fmt.Sprintf("exit status %d", e.Code)
	}
	return e.Err.Error()
}

// Findings is the error of a command whose check found problems (exit 1).
func Findings() error { return &ExitError{Code: ExitFindings} }

// Execute runs cmd with args and returns the exit code; errors go to
// stderr, one line each, prefixed with the command's name.
func Execute(ctx context.Context, cmd *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	// Logs, progress and errors share stderr, from several goroutines: a
	// writer that is not a file (a test's buffer) is locked.
	if _, isFile := stderr.(*os.File); !isFile {
		stderr = &syncWriter{w: stderr}
	}
	cmd.SetArgs(args)
	cmd.SetIn(stdin)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	err := cmd.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	if st := (*Stopped)(nil); errors.As(context.Cause(ctx), &st) {
		if !errors.Is(err, context.Canceled) { // a failure of its own, besides
			printError(stderr, cmd.Name(), err)
		}
		fmt.Fprintln(stderr, cmd.Name()+":", st)
		return st.ExitCode()
	}
	code := ExitInput
	var ec *ExitError
	if errors.As(err, &ec) {
		code, err = ec.Code, ec.Err
	}
	if err != nil {
		printError(stderr, cmd.Name(), err)
	}
	return code
}

// printError writes err to stderr, one line each, prefixed with name.
func printError(stderr io.Writer, name string, err error) {
	for _, line := range strings.Split(err.Error(), "\n") {
		fmt.Fprintln(stderr, name+":", line)
	}
}

// syncWriter serialises writes to w.
type syncWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (s *syncWriter) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.w.Write(p)
}

// CompleteFormat makes --format complete to text and json.
func CompleteFormat(cmd *cobra.Command) {
	_ = cmd.RegisterFlagCompletionFunc("format", cobra.FixedCompletions([]string{"text", "json"}, cobra.ShellCompDirectiveNoFileComp))
}

// AddMachineConfigFlag adds the required, repeatable -f/--machineconfig,
// and --pool (read by Pool and LoadMachineConfigs).
func AddMachineConfigFlag(cmd *cobra.Command, files *[]string) {
	cmd.Flags().StringArrayVarP(files, "machineconfig", "f", nil, "MachineConfig file or directory (YAML, JSON or Butane; - for stdin); repeatable")
	_ = cmd.MarkFlagRequired("machineconfig")
	AddPoolFlag(cmd)
}

// AddPoolFlag adds --pool.
func AddPoolFlag(cmd *cobra.Command) {
	cmd.Flags().String("pool", "", "the MachineConfigPool the MachineConfigs are merged for (default: from their "+machineconfig.RoleLabel+
		" labels); a custom pool merges the worker ones first, and MachineConfigs without the label are the pool's own")
}

// Pool returns the value of --pool ("" when the command has none).
func Pool(cmd *cobra.Command) string {
	p, _ := cmd.Flags().GetString("pool")
	return p
}

// SkippedPrinter prints, on the command's stderr, one line for each
// object of another kind skipped in a directory (LoadOptions.Skipped).
func SkippedPrinter(cmd *cobra.Command) func(*machineconfig.FieldError) {
	w := cmd.ErrOrStderr()
	return func(fe *machineconfig.FieldError) {
		fmt.Fprintf(w, "mcbake: skipping %s: %s is a %s, not a MachineConfig (%s)\n", fe.File, fe.MachineConfig, fe.Kind, machineconfig.OtherKindHint(fe.Kind))
	}
}

// LoadMachineConfigs loads the MachineConfigs the files name for the pool
// --pool names (see machineconfig.LoadForPool); objects of other kinds in
// a directory are skipped with a line on stderr.
// cacheDir, when set, is mcbake's cache directory: Ignition configs that
// parsed cleanly are remembered there (machineconfig.LoadOptions).
// Fields nothing reads (a misspelt key) are logged as warnings.
func LoadMachineConfigs(cmd *cobra.Command, files []string, cacheDir string) ([]*machineconfig.MachineConfig, error) {
	mcs, err := machineconfig.LoadWith(files, cmd.InOrStdin(), machineconfig.LoadOptions{Pool: Pool(cmd), CacheDir: cacheDir, Skipped: SkippedPrinter(cmd)})
	for _, mc := range mcs {
		for _, w := range mc.Warnings {
			slog.Warn(w.Error(), "rule", "MCB023")
		}
	}
	return mcs, err
}
