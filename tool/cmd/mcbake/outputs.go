package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/mcbake/mcbake/tool/verify"
)

// Output is one report to write: a format and a file ("" = standard
// output).
type Output struct {
	Format string
	File   string
	// Flag names where File was given, for errors: "--format F=" or
	// "--report".
	Flag string
}

// parseOutputs reads --format values (FORMAT or FORMAT=FILE, repeatable)
// and --report FILE, the file for the one format given without a file.
// No format means text. At most one report goes to standard output, and
// no two to the same file.
func parseOutputs(values []string, report string) ([]Output, error) {
	if len(values) == 0 {
		values = []string{verify.FormatText}
	}
	var outs []Output
	var bare []int
	for _, v := range values {
		name, file, hasFile := strings.Cut(v, "=")
		if !verify.KnownFormat(name) {
			return nil, fmt.Errorf("--format %q: want text, json, junit or sarif, optionally =FILE", v)
		}
		if hasFile && file == "" {
			return nil, fmt.Errorf("--format %q: empty file name", v)
		}
		if !hasFile {
			bare = append(bare, len(outs))
		}
		outs = append(outs, Output{Format: name, File: file, Flag: "--format " + name + "="})
	}
	if len(bare) > 1 {
		return nil, errors.New("several --format values without =FILE: give each but one a file")
	}
	if report != "" {
		if len(bare) == 0 {
			return nil, errors.New("--report names a file for the --format given without =FILE, and there is none")
		}
		outs[bare[0]].File, outs[bare[0]].Flag = report, "--report"
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
