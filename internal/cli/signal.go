package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
	"time"
)

// StopGrace is how long a command has, after SIGINT or SIGTERM, to stop
// by itself before it is ended.
const StopGrace = 3 * time.Second

// SignalContext returns a context that SIGINT and SIGTERM cancel, so
// that a command stops at its next check of it and removes its temporary
// files. A command that has not returned grace after the signal (blocked
// in a read that does not watch the context: a terminal, a pipe that
// stays open) is ended with exit code 128+signal and a line on stderr,
// as is any command at a second signal: its outputs are written aside
// and renamed into place at the end, so nothing half-written is left
// where an output goes, and the next run sweeps the temporary files
// (their locks end with the process). Call stop when the command
// returned.
func SignalContext(grace time.Duration, stderr io.Writer, name string) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var sig os.Signal
		select {
		case sig = <-sigs:
			cancel(&Stopped{Signal: sig})
		case <-done:
			return
		}
		timer := time.NewTimer(grace)
		defer timer.Stop()
		select {
		case <-done:
			return
		case <-sigs:
		case <-timer.C:
		}
		st := &Stopped{Signal: sig}
		fmt.Fprintf(stderr, "%s: %v\n", name, st)
		os.Exit(st.ExitCode())
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel(nil)
	}
}

// Stopped is the cause of a SignalContext's cancellation: the signal.
// Execute reports a command that failed once its context was so
// cancelled (most often with the context's own error) as stopped by it,
// with exit code 128+signal, as when the grace runs out.
type Stopped struct{ Signal os.Signal }

func (s *Stopped) Error() string { return fmt.Sprintf("stopped by %v", s.Signal) }

// ExitCode is 128 plus the signal's number.
func (s *Stopped) ExitCode() int {
	if n, ok := s.Signal.(syscall.Signal); ok {
		return 128 + int(n)
	}
	return 128 + int(syscall.SIGTERM)
}
