package verify

import (
	"bufio"
	"fmt"
	"io"
	"strings"
)

// severityColor is the ANSI colour of each severity's heading.
var severityColor = map[Severity]string{Error: "1;31", Warning: "1;33", Info: "1;36"}

// WriteText writes the report for people: findings grouped by severity,
// most serious first, then the rules that did not run and the verdict.
// color adds ANSI colours (for terminals only).
func (r *Report) WriteText(w io.Writer, color bool) error {
	bw := bufio.NewWriter(w)
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	for _, sev := range []Severity{Error, Warning, Info} {
		group := r.bySeverity(sev)
		if len(group) == 0 {
			continue
		}
		fmt.Fprintln(bw, paint(severityColor[sev], fmt.Sprintf("%s (%d)", sev, len(group))))
		for _, f := range group {
			writeTextFinding(bw, f)
		}
		fmt.Fprintln(bw)
	}
	if len(r.NotRun) > 0 {
		var parts []string
		for _, n := range r.NotRun {
			parts = append(parts, fmt.Sprintf("%s %s (%s)", n.Rule, n.Name, n.Reason))
		}
		fmt.Fprintf(bw, "not run: %s\n", strings.Join(parts, ", "))
	}
	verdict := paint("1;32", "PASS")
	if r.Failed {
		verdict = paint("1;31", "FAIL")
	}
	fmt.Fprintf(bw, "%s: %d error(s), %d warning(s), %d info (fail on %s) in %d MachineConfig(s)\n",
		verdict, r.Summary.Errors, r.Summary.Warnings, r.Summary.Infos, r.FailOn, len(r.MachineConfigs))
	return bw.Flush()
}

func (r *Report) bySeverity(s Severity) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Severity == s {
			out = append(out, f)
		}
	}
	return out
}

// writeTextFinding writes one finding: the rule and where, then the
// message, then the paths it lists.
func writeTextFinding(w io.Writer, f Finding) {
	head := "  " + f.Rule + " " + f.Name
	if where := f.where(); where != "" {
		head += "  " + where
	}
	fmt.Fprintln(w, head)
	fmt.Fprintf(w, "      %s\n", f.Message)
	for _, p := range f.Paths {
		fmt.Fprintf(w, "        %s\n", p)
	}
}

// where is FILE:LINE MACHINECONFIG FIELD, as much as is known.
func (f Finding) where() string {
	var parts []string
	if f.File != "" {
		loc := f.File
		if f.Line > 0 {
			loc = fmt.Sprintf("%s:%d", f.File, f.Line)
		}
		parts = append(parts, loc)
	}
	for _, s := range []string{f.MachineConfig, f.Field} {
		if s != "" {
			parts = append(parts, s)
		}
	}
	return strings.Join(parts, " ")
}
