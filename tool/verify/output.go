package verify

import (
	"bytes"
	"fmt"
	"io"
)

// Formats a report can be written in.
const (
	FormatText  = "text"
	FormatJSON  = "json"
	FormatJUnit = "junit"
	FormatSARIF = "sarif"
)

var formats = []string{FormatText, FormatJSON, FormatJUnit, FormatSARIF}

// Formats lists the formats Encode writes.
func Formats() []string { return append([]string(nil), formats...) }

// KnownFormat reports whether Encode writes the format name.
func KnownFormat(name string) bool {
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
