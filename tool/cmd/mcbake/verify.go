package main

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/internal/cli"
	"github.com/mcbake/mcbake/tool/internal/progress"
	"github.com/mcbake/mcbake/tool/verify"
)

func newVerifyCommand() *cobra.Command {
	var (
		img              imageFlags
		index            indexFlags
		opts             verify.Options
		formats          []string
		report, failOn   string
		listRules, quiet bool
	)
	cmd := &cobra.Command{
		Use:   "verify -f MC... [--base IMAGE] [--image IMAGE] [--format FORMAT[=FILE]]... [--fail-on LEVEL]",
		Short: "Check MachineConfigs, and the layered image built from them, before they reach a node",
		Long: `Verify checks the MachineConfigs, and with --base the base image they are baked
into, and with --image the layered image built from them, against rules with
stable IDs (--list-rules; docs/rules.md). Every finding names the rule, the
MachineConfig file and line, the Ignition field and the path.

Formats: text (grouped by severity, coloured on a terminal), json, junit (one
test case per rule), sarif (SARIF 2.1.0). --format FORMAT=FILE writes a report
to FILE; several --format flags write several reports in one run; --report FILE
is the file of the one --format given without one. Default: text to stdout.

Exit codes: 0 no finding at or above --fail-on (error, warning, info or never;
default error); 1 findings at or above it; 2 usage or input error (bad flags,
unreadable file, invalid image).`,
		Example: `  mcbake verify -f worker.yaml
  mcbake verify -f worker.yaml --base oci:rhcos:4.18 --image oci:layered:latest \
    --format text --format junit=junit.xml --format sarif=mcbake.sarif --fail-on warning
  mcbake verify --list-rules`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if listRules {
				return verify.WriteRules(cmd.OutOrStdout())
			}
			if len(opts.MachineConfigs) == 0 {
				return errors.New(`required flag "machineconfig" not set (-f FILE, a directory, or - for stdin)`)
			}
			outs, err := parseOutputs(formats, report)
			if err != nil {
				return err
			}
			if opts.FailOn, err = verify.ParseThreshold(failOn); err != nil {
				return fmt.Errorf("--fail-on: %w", err)
			}
			if opts.Base != "" || opts.Image != "" {
				if opts.Images, opts.CacheDir, err = img.options(cmd); err != nil {
					return err
				}
				if opts.SharedIndex, err = index.shared("", cmd.ErrOrStderr(), quiet); err != nil {
					return err
				}
			}
			opts.Stdin, opts.Tool, opts.Pool = cmd.InOrStdin(), verify.Tool{Name: "mcbake", Version: version}, cli.Pool(cmd)
			opts.Skipped = cli.SkippedPrinter(cmd)
			rep := progress.New(cmd.ErrOrStderr(), quiet || opts.Base == "")
			opts.Progress = func(layer string, total, n int64) { rep.Update("read "+short(layer), total, n) }
			r, err := verify.Run(cmd.Context(), opts)
			rep.Wait()
			var unknown *verify.UnknownRuleError
			if errors.As(err, &unknown) {
				return fmt.Errorf("--%s %s: no such rule (see --list-rules)", unknown.Option, unknown.Name)
			}
			var badSeverity *verify.SeverityError
			if errors.As(err, &badSeverity) {
				return fmt.Errorf("--severity %s: want RULE=error, RULE=warning or RULE=info", badSeverity.Value)
			}
			if err != nil {
				return err
			}
			if err := writeReports(cmd, r, outs); err != nil {
				return err
			}
			if r.Failed {
				return cli.Findings()
			}
			return nil
		},
	}
	img.register(cmd)
	index.register(cmd, "")
	fl := cmd.Flags()
	fl.StringArrayVarP(&opts.MachineConfigs, "machineconfig", "f", nil, "MachineConfig file or directory (YAML, JSON or Butane; - for stdin); repeatable")
	cli.AddPoolFlag(cmd)
	fl.StringVar(&opts.Base, "base", "", "the base image the MachineConfigs are baked into (enables the base rules and revert analysis)")
	fl.StringVar(&opts.Image, "image", "", "the layered image built from the MachineConfigs (enables the image rules)")
	fl.StringArrayVar(&formats, "format", nil, "report format text, json, junit or sarif, optionally =FILE; repeatable")
	fl.StringVar(&report, "report", "", "file for the report of the --format given without =FILE (default: stdout)")
	fl.StringVar(&failOn, "fail-on", string(verify.FailOnError), "exit 1 on findings of this severity or above: error, warning, info or never")
	fl.StringArrayVar(&opts.Disable, "disable", nil, "rule ID or name to turn off; repeatable, comma-separated lists accepted")
	fl.StringArrayVar(&opts.Severity, "severity", nil, "RULE=error|warning|info: another severity for a rule (ID or name); repeatable, comma-separated lists accepted")
	fl.BoolVar(&opts.StrictRevert, "strict-revert", false, "report revert clobbers as a warning instead of info")
	fl.BoolVar(&listRules, "list-rules", false, "print the rules and exit")
	fl.BoolVarP(&quiet, "quiet", "q", false, "no progress output")
	completeValues(cmd, "format", verify.FormatText, "json", "junit", "sarif", "junit=", "sarif=", "json=")
	completeImageRefs(cmd, "base")
	completeValues(cmd, "fail-on", "error", "warning", "info", "never")
	_ = cmd.RegisterFlagCompletionFunc("disable", completeRules)
	_ = cmd.RegisterFlagCompletionFunc("severity", completeSeverities)
	return cmd
}

// completeSeverities completes --severity to RULE=LEVEL.
func completeSeverities(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, r := range verify.Rules() {
		for _, s := range []verify.Severity{verify.Error, verify.Warning, verify.Info} {
			if s != r.Severity {
				out = append(out, cobra.CompletionWithDesc(r.ID+"="+string(s), r.Summary))
			}
		}
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeRules completes --disable to the rule IDs, with their summary.
func completeRules(*cobra.Command, []string, string) ([]cobra.Completion, cobra.ShellCompDirective) {
	var out []cobra.Completion
	for _, r := range verify.Rules() {
		out = append(out, cobra.CompletionWithDesc(r.ID, r.Summary))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// writeReports writes each report to its file (atomically) or stdout;
// text is coloured only when stdout is a terminal.
func writeReports(cmd *cobra.Command, r *verify.Report, outs []Output) error {
	stdout := cmd.OutOrStdout()
	for _, o := range outs {
		b, err := r.Encode(o.Format, o.File == "" && isTerminal(stdout))
		if err != nil {
			return err
		}
		if o.File != "" {
			err = writeFileAtomic(o.Flag, o.File, b, stdout)
		} else {
			_, err = stdout.Write(b)
		}
		if err != nil {
			return err
		}
	}
	return nil
}
