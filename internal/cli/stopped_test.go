package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestExecuteStopped: a command that returns once a signal cancelled its
// context (SignalContext's cause) is reported as stopped by the signal,
// with 128+signal, as when the grace runs out; not as "context canceled"
// with exit 2. An error of its own is printed too.
func TestExecuteStopped(t *testing.T) {
	for _, tt := range []struct {
		name string
		err  func(ctx context.Context) error
		want string
	}{
		{"cancellation", func(ctx context.Context) error { return ctx.Err() }, "x: stopped by interrupt\n"},
		{"wrapped cancellation", func(ctx context.Context) error { return errors.Join(errors.New("reading base"), ctx.Err()) }, "x: stopped by interrupt\n"},
		{"a failure of its own", func(context.Context) error { return errors.New("rollback failed") }, "x: rollback failed\nx: stopped by interrupt\n"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithCancelCause(context.Background())
			cancel(&Stopped{Signal: os.Interrupt})
			cmd := &cobra.Command{Use: "x", SilenceErrors: true, SilenceUsage: true, RunE: func(cmd *cobra.Command, _ []string) error { return tt.err(cmd.Context()) }}
			var stderr bytes.Buffer
			code := Execute(ctx, cmd, nil, strings.NewReader(""), &bytes.Buffer{}, &stderr)
			if code != 130 || stderr.String() != tt.want {
				t.Errorf("Execute = %d, stderr %q; want 130, %q", code, stderr.String(), tt.want)
			}
		})
	}
	cmd := &cobra.Command{Use: "x", SilenceErrors: true, SilenceUsage: true, RunE: func(*cobra.Command, []string) error { return context.Canceled }}
	var stderr bytes.Buffer
	if code := Execute(context.Background(), cmd, nil, strings.NewReader(""), &bytes.Buffer{}, &stderr); code != ExitInput || stderr.String() != "x: context canceled\n" {
		t.Errorf("Execute without a signal = %d, %q; want %d and the error", code, stderr.String(), ExitInput)
	}
}
