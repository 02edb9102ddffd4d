package verify

import (
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/url"
	"path/filepath"
	"strings"

	"github.com/owenrumney/go-sarif/v3/pkg/report/v210/sarif"
)

// informationURI is where the tool's rules are documented.
const informationURI = "https://github.com/mcbake/mcbake/blob/main/docs/rules.md"

// sarifLevel maps severities to SARIF result levels.
var sarifLevel = map[Severity]string{Error: sarif.LevelError, Warning: sarif.LevelWarning, Info: sarif.LevelNote}

// WriteSARIF writes a SARIF 2.1.0 log with one run: every rule in
// tool.driver.rules (with its default level, description and fix), every
// finding as a result at the MachineConfig file and line. A finding about
// the image as a whole (no file) is placed at the first MachineConfig
// file, since code-scanning services need a file location for each result.
func (r *Report) WriteSARIF(w io.Writer) error {
	run := sarif.NewRunWithInformationURI(r.Tool.Name, informationURI)
	run.Tool.Driver.WithVersion(r.Tool.Version)
	for _, rule := range rules {
		addSARIFRule(run, rule)
	}
	for _, f := range r.Findings {
		r.addSARIFResult(run, f)
	}
	log := sarif.NewReport()
	log.AddRun(run)
	return log.PrettyWrite(w)
}

func addSARIFRule(run *sarif.Run, rule Rule) {
	help := rule.Description + "\n\nFix: " + rule.Fix
	props := sarif.NewPropertyBag().Add("needs", string(rule.Needs)).AddTag("machineconfig")
	run.AddRule(rule.ID).
		WithName(sarifName(rule.Name)).
		WithDescription(rule.Summary).
		WithFullDescription(sarif.NewMultiformatMessageString().WithText(rule.Description)).
		WithHelp(sarif.NewMultiformatMessageString().WithText(help).WithMarkdown(help)).
		WithHelpURI(informationURI + "#" + strings.ToLower(rule.ID)).
		WithDefaultConfiguration(sarif.NewReportingConfiguration().WithLevel(sarifLevel[rule.Severity])).
		WithProperties(props)
}

// sarifName turns a slug into the PascalCase SARIF recommends for names.
func sarifName(slug string) string {
	var b strings.Builder
	for _, part := range strings.Split(slug, "-") {
		if part != "" {
			b.WriteString(strings.ToUpper(part[:1]) + part[1:])
		}
	}
	return b.String()
}

func (r *Report) addSARIFResult(run *sarif.Run, f Finding) {
	props := sarif.NewPropertyBag()
	for k, v := range map[string]string{"path": f.Path, "machineConfig": f.MachineConfig, "field": f.Field} {
		if v != "" {
			props.Add(k, v)
		}
	}
	if len(f.Paths) > 0 {
		props.Add("paths", f.Paths)
	}
	res := run.CreateResultForRule(f.Rule).
		WithLevel(sarifLevel[f.Severity]).
		WithMessage(sarif.NewTextMessage(f.Message)).
		WithProperties(props).
		WithPartialFingerprints(map[string]string{"mcbake/v1": fingerprint(f)})
	if loc := r.sarifLocation(f); loc != nil {
		res.AddLocation(loc)
	}
}

// sarifLocation places a finding at its file and line; findings without a
// file go to the first MachineConfig file, without a line. Findings read
// from stdin have a logical location only.
func (r *Report) sarifLocation(f Finding) *sarif.Location {
	file, line := f.File, f.Line
	if file == "" && len(r.MachineConfigs) > 0 {
		file, line = r.MachineConfigs[0].File, 0
	}
	loc := sarif.NewLocation()
	if f.MachineConfig != "" {
		name := f.MachineConfig
		full := name
		if f.Field != "" {
			full += "/" + f.Field
		}
		loc.AddLogicalLocation(sarif.NewLogicalLocation().WithName(name).WithFullyQualifiedName(full).WithKind("object"))
	}
	if file == "" || file == "<stdin>" {
		if len(loc.LogicalLocations) == 0 {
			return nil
		}
		return loc
	}
	phys := sarif.NewPhysicalLocation().WithArtifactLocation(sarif.NewSimpleArtifactLocation(fileURI(file)))
	if line > 0 {
		phys.WithRegion(sarif.NewRegion().WithStartLine(line))
	}
	return loc.WithPhysicalLocation(phys)
}

// fileURI turns a file name into a URI reference: a relative path stays
// relative (code-scanning services resolve it against the checkout), an
// absolute one becomes a file: URI.
func fileURI(name string) string {
	slash := filepath.ToSlash(name)
	if filepath.IsAbs(name) {
		return (&url.URL{Scheme: "file", Path: slash}).String()
	}
	return (&url.URL{Path: strings.TrimPrefix(slash, "./")}).String()
}

// fingerprint identifies a finding across runs: rule, MachineConfig,
// field and path (not the message, which carries digests and counts).
func fingerprint(f Finding) string {
	sum := sha256.Sum256([]byte(strings.Join([]string{f.Rule, f.MachineConfig, f.Field, f.Path}, "\x00")))
	return hex.EncodeToString(sum[:16])
}
