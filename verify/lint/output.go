package lint

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Formats a report can be written in.
const (
	FormatText  = "text"
	FormatJSON  = "json"
	FormatJUnit = "junit"
	FormatSARIF = "sarif"
)

var formats = []string{FormatText, FormatJSON, FormatJUnit, FormatSARIF}

// Output is one report to write: a format and a file ("" = standard
// output).
type Output struct {
	Format string
	File   string
}

// ParseOutputs reads --format values (FORMAT or FORMAT=FILE, repeatable)
// and --report FILE, the file for the one format given without a file.
// No format means text. At most one report goes to standard output, and
// no two to the same file.
func ParseOutputs(values []string, report string) ([]Output, error) {
	if len(values) == 0 {
		values = []string{FormatText}
	}
	var outs []Output
	var bare []int
	for _, v := range values {
		name, file, hasFile := strings.Cut(v, "=")
		if !knownFormat(name) {
			return nil, fmt.Errorf("--format %q: want text, json, junit or sarif, optionally =FILE", v)
		}
		if hasFile && file == "" {
			return nil, fmt.Errorf("--format %q: empty file name", v)
		}
		if !hasFile {
			bare = append(bare, len(outs))
		}
		outs = append(outs, Output{Format: name, File: file})
	}
	if len(bare) > 1 {
		return nil, errors.New("several --format values without =FILE: give each but one a file")
	}
	if report != "" {
		if len(bare) == 0 {
			return nil, errors.New("--report names a file for the --format given without =FILE, and there is none")
		}
		outs[bare[0]].File = report
	}
	seen := map[string]bool{}
	for _, o := range outs {
		if o.File != "" && seen[o.File] {
			return nil, fmt.Errorf("two reports would be written to %s", o.File)
		}
		seen[o.File] = true
	}
	return outs, nil
}

func knownFormat(name string) bool {
	for _, f := range formats {
		if f == name {
			return true
		}
	}
	return false
}

// Encode returns the report in one format; color applies to text only.
func (r *Report) Encode(format string, color bool) ([]byte, error) {
	var b bytes.Buffer
	var err error
	switch format {
	case FormatText:
		err = r.WriteText(&b, color)
	case FormatJSON:
		err = r.WriteJSON(&b)
	case FormatJUnit:
		err = r.WriteJUnit(&b)
	case FormatSARIF:
		err = r.WriteSARIF(&b)
	default:
		err = fmt.Errorf("unknown format %q", format)
	}
	return b.Bytes(), err
}

// WriteRules writes the rule table --list-rules prints.
func WriteRules(w io.Writer) error {
	var b bytes.Buffer
	for _, r := range rules {
		needs := ""
		if r.Needs != NeedsNothing {
			needs = " (needs " + r.Needs.text() + ")"
		}
		fmt.Fprintf(&b, "%s  %-24s %-8s %s%s\n", r.ID, r.Name, r.Severity, r.Summary, needs)
	}
	_, err := w.Write(b.Bytes())
	return err
}
