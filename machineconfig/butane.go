package machineconfig

import (
	"errors"
	"fmt"
	"path/filepath"
	"strings"

	butane "github.com/coreos/butane/config"
	butanecommon "github.com/coreos/butane/config/common"
	"github.com/coreos/vcontext/report"
	"gopkg.in/yaml.v3"
)

// ButaneExt is the file name extension of Butane configs; a directory
// contributes its *.bu files too.
const ButaneExt = ".bu"

// ButaneVariant is the Butane variant that makes a MachineConfig.
const ButaneVariant = "openshift"

// butaneHead is what tells a Butane config from a MachineConfig.
type butaneHead struct {
	Variant  string `yaml:"variant"`
	Version  string `yaml:"version"`
	Metadata struct {
		Name string `yaml:"name"`
	} `yaml:"metadata"`
}

// IsButane reports whether an input is a Butane config: its name ends in
// .bu, or it is a YAML mapping with a top-level variant (a MachineConfig
// has none).
func IsButane(file string, data []byte) bool {
	if isButaneFile(file) {
		return true
	}
	if _, variant, ok := jsonDocuments(data); ok && !variant {
		return false // a JSON stream whose first object has no variant
	}
	return hasVariant(data)
}

// hasVariant reports whether data's first YAML document is a mapping
// with a top-level variant.
func hasVariant(data []byte) bool {
	var h butaneHead
	return yaml.Unmarshal(data, &h) == nil && h.Variant != ""
}

func isButaneFile(file string) bool { return strings.EqualFold(filepath.Ext(file), ButaneExt) }

// fromButane translates a Butane config of the openshift variant with
// Butane's own library, as `butane` does (inline resources are compressed
// the same way; local files resolve against the config's directory, none
// for stdin), to the MachineConfig YAML it makes. Butane's errors name the
// file, the config's metadata.name, the Butane field and its line and
// column.
func fromButane(file string, data []byte) ([]byte, []*FieldError, error) {
	var h butaneHead
	_ = yaml.Unmarshal(data, &h)
	name := orUnnamed(h.Metadata.Name)
	ferr := func(field, msg string) error {
		return &FieldError{File: file, MachineConfig: name, Field: field, Reason: ReasonInvalid, Msg: msg}
	}
	if h.Variant == "" {
		return nil, nil, ferr("variant", fmt.Sprintf("a Butane config (%s) names its variant: variant: %s", ButaneExt, ButaneVariant))
	}
	if h.Variant != ButaneVariant {
		return nil, nil, ferr("variant", fmt.Sprintf("Butane variant %q makes an Ignition config, not a MachineConfig: use variant: %s", h.Variant, ButaneVariant))
	}
	opts := butanecommon.TranslateBytesOptions{}
	if file != "<stdin>" {
		opts.FilesDir = filepath.Dir(file)
	}
	if errs := butaneLocals(file, name, data, opts.FilesDir); len(errs) > 0 {
		return nil, nil, errors.Join(errs...)
	}
	out, rpt, err := butane.TranslateBytes(data, opts)
	if err == nil {
		return out, butaneWarnings(rpt, file, name), nil
	}
	errs := butaneErrors(rpt, file, name)
	if len(errs) == 0 {
		field := ""
		if errors.As(err, new(butanecommon.ErrUnknownVersion)) {
			field = "version"
		}
		errs = append(errs, ferr(field, "Butane: "+err.Error()))
	}
	return nil, nil, errors.Join(errs...)
}

// butaneErrors turns the fatal entries of a Butane report into field
// errors at the Butane field, with the line and column in the message.
func butaneErrors(rpt report.Report, file, name string) []error {
	var errs []error
	for _, e := range butaneEntries(rpt, file, name, ReasonInvalid, func(e report.Entry) bool { return e.Kind.IsFatal() }) {
		errs = append(errs, e)
	}
	return errs
}

// butaneWarnings are the unused keys of a Butane report (`butane`
// prints them, `butane --strict` refuses them), of ReasonUnused. Its
// other warnings (an enabled unit without [Install], …) are verify's own
// rules.
func butaneWarnings(rpt report.Report, file, name string) []*FieldError {
	return butaneEntries(rpt, file, name, ReasonUnused, func(e report.Entry) bool { return !e.Kind.IsFatal() && isUnusedKey(e.Message) })
}

// isUnusedKey reports whether a report message is Ignition's or Butane's
// "unused key" warning.
func isUnusedKey(msg string) bool { return strings.HasPrefix(strings.ToLower(msg), "unused key") }

// butaneEntries turns the entries of a Butane report that keep selects
// into field errors of reason.
func butaneEntries(rpt report.Report, file, name string, reason Reason, keep func(report.Entry) bool) []*FieldError {
	var out []*FieldError
	for _, e := range rpt.Entries {
		if !keep(e) {
			continue
		}
		msg := e.Message
		if msg == butanecommon.ErrNoFilesDir.Error() {
			// Butane's flag is not mcbake's: the files directory is the
			// config's own, which stdin has none of.
			msg = "local file paths are relative to the Butane config's directory: give the config as a file, not on stdin"
		}
		if line, col := e.Marker.Start(); line > 0 {
			msg = fmt.Sprintf("line %d, column %d: %s", line, col, msg)
		}
		out = append(out, &FieldError{File: file, MachineConfig: name, Field: butaneField(e.Context.Path), Reason: reason, Msg: "Butane: " + msg})
	}
	return out
}

// butaneField renders a Butane context path ([storage files 0 mode]) as
// storage.files[0].mode.
func butaneField(p []interface{}) string {
	var b strings.Builder
	for _, e := range p {
		if n, ok := e.(int); ok {
			fmt.Fprintf(&b, "[%d]", n)
			continue
		}
		if b.Len() > 0 {
			b.WriteByte('.')
		}
		fmt.Fprintf(&b, "%v", e)
	}
	return b.String()
}

// ButaneField returns where a field of the MachineConfig a Butane config
// makes is written in the Butane config, as Butane itself falls back to
// when it reports a translated field: spec.config.X is X with its
// camelCase names in snake_case, and spec.kernelArguments, extensions,
// fips and kernelType are under openshift. Sugar that Butane expands
// (trees, local files, …) is not followed back: such a field gets the path
// of its nearest written ancestor when a line is looked up.
func ButaneField(field string) string {
	switch {
	case strings.HasPrefix(field, "spec.config."):
		return snake(strings.TrimPrefix(field, "spec.config."))
	case field == "spec.config":
		return ""
	case strings.HasPrefix(field, "spec."):
		return "openshift." + snake(strings.TrimPrefix(field, "spec."))
	}
	return field
}

// snake converts the camelCase names of a field path to snake_case,
// leaving what is inside [brackets] (indexes, unit names) alone.
func snake(field string) string {
	var b strings.Builder
	depth := 0
	for _, r := range field {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0 && r >= 'A' && r <= 'Z':
			b.WriteByte('_')
			r += 'a' - 'A'
		}
		b.WriteRune(r)
	}
	return b.String()
}
