package verify

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/opencontainers/go-digest"
)

// Options say what to verify and how.
type Options struct {
	// MachineConfigs are files, directories or "-" (Stdin), as for
	// machineconfig.Load.
	MachineConfigs []string
	Stdin          io.Reader
	// Skipped is told of the objects of other kinds skipped in a
	// directory (machineconfig.LoadOptions.Skipped); elsewhere they are
	// MCB001 findings.
	Skipped func(*machineconfig.FieldError)
	// Pool is the MachineConfigPool they are merged for ("" = from their
	// role labels; see machineconfig.ForPool).
	Pool string
	// Base and Image are containers-transport references ("" = not given).
	Base, Image string
	Images      image.Options
	// CacheDir holds the base index cache ("" = no cache).
	CacheDir string
	// Progress, when set, is told of the bytes read from each base layer.
	Progress func(layer string, total, n int64)
	// SharedIndex says where the base's index is published and read
	// from (image.SharedIndex); the layered image's is not.
	SharedIndex image.SharedIndex
	// StrictRevert makes revert-clobber findings warnings.
	StrictRevert bool
	// Disable lists rules (IDs or names) whose findings are dropped.
	Disable []string
	// Severity gives rules (IDs or names) another severity than their
	// default: RULE=error, warning or info; comma-separated lists allowed
	// (the CLI's --severity). It applies after StrictRevert.
	Severity []string
	// FailOn is the threshold the report's verdict uses (default error).
	FailOn Threshold
	// Tool names the program in reports (default mcbake, version dev).
	Tool Tool
}

// Run verifies the MachineConfigs, and the base and image when given. The
// problems it finds are in the Report; an error means the verification
// could not run (an unknown rule, an unreadable file, YAML that does not
// parse, an image that cannot be opened). An image without mcbake's
// manifest (built by others) skips the manifest rules, and its revert
// analysis derives the owned paths from the MachineConfigs
// (revert.PredictDerived). MachineConfig content that the loader refuses
// is not an error but MCB001 findings.
func Run(ctx context.Context, o Options) (_ *Report, err error) {
	disabled, err := disabledRules(o.Disable)
	if err != nil {
		return nil, err
	}
	severity, err := severityOverrides(o.Severity)
	if err != nil {
		return nil, err
	}
	if o.FailOn == "" {
		o.FailOn = FailOnError
	}
	in, err := load(o.MachineConfigs, o.Stdin, o.Pool, o.Skipped)
	if err != nil {
		return nil, err
	}
	var b *baseInput
	if o.Base != "" {
		bi, err := image.OpenBase(ctx, o.Base, image.BaseOptions{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress, Shared: o.SharedIndex})
		if err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, bi.Close()) }()
		b = &baseInput{ref: o.Base, digest: bi.Digest(), tree: bi.Tree()}
	}
	var img *imageInput
	if o.Image != "" {
		var baseDigest digest.Digest
		if b != nil {
			baseDigest = b.digest
		}
		bo := image.BaseOptions{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress}
		if img, err = readImage(ctx, o.Image, bo, baseDigest); err != nil {
			return nil, err
		}
		defer func() { err = errors.Join(err, img.closeImage()) }()
	}
	c := newChecker(in, b, img, o.StrictRevert)
	c.run(ctx)
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return c.report(o, disabled, severity), nil
}

// UnknownRuleError names a rule to disable (Option "disable") or give a
// severity (Option "severity") that does not exist.
type UnknownRuleError struct{ Name, Option string }

func (e *UnknownRuleError) Error() string { return fmt.Sprintf("rule %s: no such rule", e.Name) }

// disabledRules resolves the Disable values (IDs or names, comma-separated
// lists allowed) to rule IDs.
func disabledRules(names []string) (map[string]bool, error) {
	out := map[string]bool{}
	var errs []error
	for _, v := range names {
		for _, n := range strings.Split(v, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			r, ok := LookupRule(n)
			if !ok {
				errs = append(errs, &UnknownRuleError{Name: n, Option: "disable"})
				continue
			}
			out[r.ID] = true
		}
	}
	return out, errors.Join(errs...)
}

// SeverityError is a --severity value that is not RULE=error, warning or
// info.
type SeverityError struct{ Value string }

func (e *SeverityError) Error() string {
	return fmt.Sprintf("severity %q: want RULE=error, RULE=warning or RULE=info (RULE an ID or a name)", e.Value)
}

// severityOverrides resolves the Severity values to rule IDs.
func severityOverrides(values []string) (map[string]Severity, error) {
	out := map[string]Severity{}
	var errs []error
	for _, v := range values {
		for _, kv := range strings.Split(v, ",") {
			kv = strings.TrimSpace(kv)
			if kv == "" {
				continue
			}
			name, level, ok := strings.Cut(kv, "=")
			sev := Severity(strings.TrimSpace(level))
			if !ok || sev.rank() == 0 {
				errs = append(errs, &SeverityError{Value: kv})
				continue
			}
			r, ok := LookupRule(strings.TrimSpace(name))
			if !ok {
				errs = append(errs, &UnknownRuleError{Name: strings.TrimSpace(name), Option: "severity"})
				continue
			}
			out[r.ID] = sev
		}
	}
	return out, errors.Join(errs...)
}

// report assembles the Report: findings of enabled rules with their
// lines, the rules that did not run, the verdict.
func (c *checker) report(o Options, disabled map[string]bool, severity map[string]Severity) *Report {
	r := &Report{SchemaVersion: SchemaVersion, Tool: o.Tool, FailOn: o.FailOn}
	if r.Tool.Name == "" {
		r.Tool = Tool{Name: "mcbake", Version: "dev"}
	}
	for _, mc := range c.in.mcs {
		r.MachineConfigs = append(r.MachineConfigs, Input{Name: mc.Name, File: mc.File, Digest: mc.Digest})
	}
	if c.base != nil {
		r.Base = &manifest.ImageRef{Reference: c.base.ref, Digest: c.base.digest}
	}
	if c.image != nil {
		r.Image = &manifest.ImageRef{Reference: c.image.ref, Digest: c.image.digest}
	}
	loc := newLocator(c.in.sources)
	for _, f := range c.findings {
		if disabled[f.Rule] {
			continue
		}
		if sev, ok := severity[f.Rule]; ok {
			f.Severity = sev
		}
		if f.File != "" {
			f.Line = loc.line(f.File, f.MachineConfig, f.Field)
		}
		r.Findings = append(r.Findings, f)
	}
	for _, rule := range rules {
		reason, skipped := c.notRun[rule.ID]
		if disabled[rule.ID] {
			reason, skipped = "disabled", true
		}
		if skipped {
			r.NotRun = append(r.NotRun, NotRun{Rule: rule.ID, Name: rule.Name, Reason: reason})
		}
	}
	r.finish()
	return r
}
