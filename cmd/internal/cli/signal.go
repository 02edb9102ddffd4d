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
	ctx, cancel := context.WithCancel(context.Background())
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		var sig os.Signal
		select {
		case sig = <-sigs:
			cancel()
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
		fmt.Fprintf(stderr, "%s: stopped by %v\n", name, sig)
		code := 128 + 15
		if s, ok := sig.(syscall.Signal); ok {
			code = 128 + int(s)
		}
		os.Exit(code)
	}()
	return ctx, func() {
		signal.Stop(sigs)
		close(done)
		cancel()
	}
}
