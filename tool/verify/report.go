package verify

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/manifest"
)

// SchemaVersion is the version of the JSON report format.
const SchemaVersion = 1

// Finding is one problem a rule found.
type Finding struct {
	Rule     string   `json:"rule"`
	Name     string   `json:"name"`
	Severity Severity `json:"severity"`
	// Path is the filesystem path concerned, as the MachineConfig asks
	// for it ("" when the finding is not about one path).
	Path string `json:"path,omitempty"`
	// MachineConfig, File and Field locate the finding in the input: the
	// MachineConfig's name, the file it was read from and the JSON path
	// of the Ignition field (spec.config.storage.files[3].mode).
	MachineConfig string `json:"machineConfig,omitempty"`
	File          string `json:"file,omitempty"`
	Field         string `json:"field,omitempty"`
	// Line is the 1-based line of Field in File (0 = unknown): the line of
	// the deepest part of the field's path that the file has.
	Line    int    `json:"line,omitempty"`
	Message string `json:"message"`
	// Paths lists the paths of a finding about several (revert-clobber).
	Paths []string `json:"paths,omitempty"`
}

// Input names one MachineConfig that was checked.
type Input struct {
	Name   string        `json:"name"`
	File   string        `json:"file"`
	Digest digest.Digest `json:"digest"`
}

// NotRun is a rule that did not run, and why.
type NotRun struct {
	Rule   string `json:"rule"`
	Name   string `json:"name"`
	Reason string `json:"reason"`
}

// Summary counts findings by severity.
type Summary struct {
	Errors   int `json:"error"`
	Warnings int `json:"warning"`
	Infos    int `json:"info"`
}

// Tool names the program that wrote a report.
type Tool struct {
	Name    string `json:"name"`
	Version string `json:"version"`
}

// Report is the result of a verification. Its JSON encoding is the
// documented report format (docs/verify.md).
type Report struct {
	SchemaVersion  int                `json:"schemaVersion"`
	Tool           Tool               `json:"tool"`
	MachineConfigs []Input            `json:"machineConfigs"`
	Base           *manifest.ImageRef `json:"base,omitempty"`
	Image          *manifest.ImageRef `json:"image,omitempty"`
	// FailOn is the threshold; Failed says whether a finding reaches it.
	FailOn   Threshold `json:"failOn"`
	Failed   bool      `json:"failed"`
	Summary  Summary   `json:"summary"`
	Findings []Finding `json:"findings"`
	NotRun   []NotRun  `json:"notRun"`
}

// Threshold is the least severity that fails a verification.
type Threshold string

// Thresholds.
const (
	FailOnError   Threshold = "error"
	FailOnWarning Threshold = "warning"
	FailOnInfo    Threshold = "info"
	FailNever     Threshold = "never"
)

// ParseThreshold reads a threshold by name.
func ParseThreshold(s string) (Threshold, error) {
	switch t := Threshold(s); t {
	case FailOnError, FailOnWarning, FailOnInfo, FailNever:
		return t, nil
	}
	return "", fmt.Errorf("threshold %q: want error, warning, info or never", s)
}

// Fails reports whether a finding of severity s reaches the threshold.
func (t Threshold) Fails(s Severity) bool {
	if t == FailNever {
		return false
	}
	return s.rank() >= Severity(t).rank()
}

// finish sorts the findings and fills in the summary and verdict.
func (r *Report) finish() {
	slices.SortStableFunc(r.Findings, compareFindings)
	r.Summary = Summary{}
	r.Failed = false
	for _, f := range r.Findings {
		switch f.Severity {
		case Error:
			r.Summary.Errors++
		case Warning:
			r.Summary.Warnings++
		case Info:
			r.Summary.Infos++
		}
		r.Failed = r.Failed || r.FailOn.Fails(f.Severity)
	}
	if r.Findings == nil {
		r.Findings = []Finding{}
	}
	if r.NotRun == nil {
		r.NotRun = []NotRun{}
	}
	if r.MachineConfigs == nil {
		r.MachineConfigs = []Input{}
	}
	slices.SortFunc(r.NotRun, func(a, b NotRun) int { return strings.Compare(a.Rule, b.Rule) })
}

// compareFindings orders by severity (most serious first), rule, file,
// line, MachineConfig, field, path and message.
func compareFindings(a, b Finding) int {
	return cmp.Or(
		b.Severity.rank()-a.Severity.rank(),
		strings.Compare(a.Rule, b.Rule),
		strings.Compare(a.File, b.File),
		a.Line-b.Line,
		strings.Compare(a.MachineConfig, b.MachineConfig),
		strings.Compare(a.Field, b.Field),
		strings.Compare(a.Path, b.Path),
		strings.Compare(a.Message, b.Message),
	)
}

// ByRule returns the findings of one rule.
func (r *Report) ByRule(id string) []Finding {
	var out []Finding
	for _, f := range r.Findings {
		if f.Rule == id {
			out = append(out, f)
		}
	}
	return out
}

// notRunReason returns why a rule did not run, or "".
func (r *Report) notRunReason(id string) string {
	for _, n := range r.NotRun {
		if n.Rule == id {
			return n.Reason
		}
	}
	return ""
}
