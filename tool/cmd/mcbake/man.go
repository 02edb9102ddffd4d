package main

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime/debug"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCommand is the hidden `man DIR` that `make man` runs: one man page
// per command (mcbake.1, mcbake-build.1, ...), generated from the same
// help text, examples and flags as --help, each titled after its command,
// with EXIT STATUS, ENVIRONMENT and SEE ALSO sections. The date is
// SOURCE_DATE_EPOCH's, else the commit's the binary was built from, so
// the pages are reproducible.
func newManCommand(root *cobra.Command) *cobra.Command {
	return &cobra.Command{
		Use:     "man DIR",
		Short:   "Write mcbake's man pages to DIR",
		Example: `  mcbake man man/`,
		Hidden:  true,
		Args:    cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			date, err := manDate()
			if err != nil {
				return err
			}
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return err
			}
			root.DisableAutoGenTag = true
			header := &doc.GenManHeader{Section: "1", Source: "mcbake " + version, Manual: "mcbake manual", Date: &date}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			if err := addManSections(root, args[0]); err != nil {
				return fmt.Errorf("writing man pages: %w", err)
			}
			_, err = fmt.Fprintf(cmd.OutOrStdout(), "%s: man pages written\n", args[0])
			return err
		},
	}
}

// manDate is SOURCE_DATE_EPOCH, else the time of the commit the binary
// was built from (go build records it), else the epoch.
func manDate() (time.Time, error) {
	if os.Getenv("SOURCE_DATE_EPOCH") != "" {
		return buildTime("")
	}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.time" {
				if t, err := time.Parse(time.RFC3339, s.Value); err == nil {
					return t.UTC(), nil
				}
			}
		}
	}
	return time.Unix(0, 0).UTC(), nil
}

// manExitStatus is every command's EXIT STATUS.
const manExitStatus = `.SH EXIT STATUS
.TP
.B 0
Success (for a check: nothing found at or above the threshold).
.TP
.B 1
A check found problems: ondisk, verify (findings at or above \-\-fail\-on), node check, node finalized without \-\-repair, diff \-\-exit\-code (a revert clobbers a path).
.TP
.B 2
A usage, input or I/O error: one line on stderr naming the file, the MachineConfig and the field. Nothing half\-written is left where an output goes.
.TP
.B 128+N
Stopped by signal N (SIGINT, SIGTERM).
`

// manEnvironment is every command's ENVIRONMENT.
const manEnvironment = `.SH ENVIRONMENT
.TP
.B REGISTRY_AUTH_FILE
The registry credentials file, when \-\-authfile is not given (containers\-auth.json(5)).
.TP
.B CONTAINERS_STORAGE_CONF, CONTAINERS_REGISTRIES_CONF
The containers\-storage and registries configuration files (containers\-storage.conf(5), containers\-registries.conf(5)).
.TP
.B SOURCE_DATE_EPOCH
build: the image's creation time, in Unix seconds, when \-\-timestamp is not given.
.TP
.B TMPDIR
Where large temporary files go.
.TP
.B MCBAKE_GZIP_DECODER
go: decode gzip layers in Go, not with ISA\-L.
.TP
.B NO_COLOR, TERM
NO_COLOR set, or TERM=dumb: no colour and no progress bars.
`

// manSeeAlso are the pages of the containers configuration mcbake reads,
// added to SEE ALSO.
const manSeeAlso = `.BR containers\-auth.json (5),
.BR containers\-policy.json (5),
.BR containers\-registries.conf (5),
.BR containers\-certs.d (5),
.BR containers\-storage.conf (5),
.BR containers\-transports (5)
`

// addManSections inserts EXIT STATUS and ENVIRONMENT before SEE ALSO in
// every page cobra wrote under dir, and the containers pages into SEE ALSO.
func addManSections(c *cobra.Command, dir string) error {
	if !c.IsAvailableCommand() && c.HasParent() {
		return nil
	}
	file := filepath.Join(dir, strings.ReplaceAll(c.CommandPath(), " ", "-")+".1")
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	page := string(b)
	before, after, ok := strings.Cut(page, ".SH SEE ALSO\n")
	if !ok {
		page = strings.TrimRight(page, "\n") + "\n" + manExitStatus + manEnvironment + ".SH SEE ALSO\n" + manSeeAlso
	} else {
		page = before + manExitStatus + manEnvironment + ".SH SEE ALSO\n" + strings.TrimRight(after, "\n") + ",\n" + manSeeAlso
	}
	if err := os.WriteFile(file, []byte(page), 0o644); err != nil {
		return err
	}
	for _, sub := range c.Commands() {
		if err := addManSections(sub, dir); err != nil {
			return err
		}
	}
	return nil
}
