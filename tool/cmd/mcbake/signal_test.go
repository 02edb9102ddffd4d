package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/mcbake/mcbake/internal/cli"
)

// TestSignalStopsABlockedCommand: a command blocked where it cannot watch
// its context (reading MachineConfigs from a stdin that stays open) is
// ended after SIGTERM (once cli.StopGrace has passed) and after a second
// SIGINT, with one line and 128+signal, and leaves no output. A generous
// bound stops the test if the command hangs; how long it took is logged,
// not asserted (a loaded machine is slow).
func TestSignalStopsABlockedCommand(t *testing.T) {
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		sigs []syscall.Signal
		code int
	}{
		{"SIGTERM", []syscall.Signal{syscall.SIGTERM}, 128 + 15},
		{"SIGINT twice", []syscall.Signal{syscall.SIGINT, syscall.SIGINT}, 128 + 2},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			cmd := exec.Command(self, "render", "-f", "-", "-o", out)
			cmd.Env = append(os.Environ(), "MCBAKE_TEST_AS_CLI=1")
			stdin, err := cmd.StdinPipe() // held open: the read blocks
			if err != nil {
				t.Fatal(err)
			}
			defer stdin.Close()
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			time.Sleep(500 * time.Millisecond) // the signal handler is installed
			start := time.Now()
			for _, s := range tt.sigs {
				if err := cmd.Process.Signal(s); err != nil {
					t.Fatal(err)
				}
				time.Sleep(50 * time.Millisecond)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			select {
			case err = <-exited:
			case <-time.After(cli.StopGrace + time.Minute):
				cmd.Process.Kill()
				t.Fatalf("still running %v after %v", time.Since(start).Round(time.Millisecond), tt.sigs)
			}
			t.Logf("exited %v after the first signal", time.Since(start).Round(time.Millisecond))
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			}
			if code != tt.code {
				t.Errorf("exit %d, want %d; stderr:\n%s", code, tt.code, stderr.String())
			}
			if !strings.Contains(stderr.String(), "mcbake: stopped by ") {
				t.Errorf("stderr %q, want a line saying it was stopped", stderr.String())
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output %s exists after the command was stopped (err %v)", out, err)
			}
		})
	}
}
