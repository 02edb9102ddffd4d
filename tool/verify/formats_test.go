package verify

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	junit "github.com/joshdk/go-junit"
	"github.com/owenrumney/go-sarif/v3/pkg/report/v210/sarif"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/mcbake/mcbake/internal/testing/schematest"
)

var goldenInputs = []string{"testdata/golden/input/50-other.json", "testdata/golden/input/99-bad.yaml"}

// goldenReport verifies the golden inputs against the default base.
func goldenReport(t *testing.T) (*Report, *env) {
	t.Helper()
	e := newEnv(t)
	return e.run(Options{MachineConfigs: goldenInputs, Base: e.Base, Tool: Tool{Name: "mcbake", Version: "test"}}), e
}

// TestGoldenReports compares each format with its golden file (the
// temporary directory of the base replaced by $TMP); -update rewrites them.
func TestGoldenReports(t *testing.T) {
	r, e := goldenReport(t)
	for _, tt := range []struct{ format, file string }{
		{FormatText, "report.txt"}, {FormatJSON, "report.json"}, {FormatJUnit, "report.junit.xml"}, {FormatSARIF, "report.sarif"},
	} {
		t.Run(tt.format, func(t *testing.T) {
			b, err := r.Encode(tt.format, false)
			if err != nil {
				t.Fatal(err)
			}
			got := bytes.ReplaceAll(b, []byte(e.Dir), []byte("$TMP"))
			if tt.format == FormatJSON {
				schematest.Validate(t, "verify-report", got)
			}
			golden := filepath.Join("testdata", "golden", tt.file)
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("%s report (-want +got):\n%s", tt.format, diff)
			}
		})
	}
	t.Run("text in colour", func(t *testing.T) {
		b, err := r.Encode(FormatText, true)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(b, []byte("\x1b[1;31merror (")) {
			t.Errorf("coloured text has no red error heading:\n%s", b)
		}
	})
}

// TestGoldenFindings pins what the golden inputs must fire, independently
// of the golden files, so that -update cannot bless a lost finding.
func TestGoldenFindings(t *testing.T) {
	r, _ := goldenReport(t)
	count := map[string]int{}
	for _, f := range r.Findings {
		count[f.Rule]++
	}
	want := map[string]int{RuleUnsupportedIgnition: 2, RuleConflict: 1, RuleUsrContent: 1, RuleVarContent: 1, RuleDroppedContent: 1,
		RuleFileDirClash: 1, RuleRevertClobber: 1, RuleUnitNotFound: 1, RuleUnknownOwner: 1, RuleEnabledNoInstall: 1, RuleRenderFailure: 1}
	if diff := cmp.Diff(want, count); diff != "" {
		t.Errorf("findings per rule (-want +got):\n%s\n%v", diff, r.Findings)
	}
	if !r.Failed || r.Summary != (Summary{Errors: 7, Warnings: 3, Infos: 2}) {
		t.Errorf("failed %v, summary %+v", r.Failed, r.Summary)
	}
}

// TestJUnitParsesBack reads the JUnit report with a JUnit library: one
// test case per rule, failed when a finding reaches --fail-on, skipped
// when the rule did not run, findings below the threshold in system-out.
func TestJUnitParsesBack(t *testing.T) {
	r, _ := goldenReport(t)
	for _, tt := range []struct {
		failOn Threshold
		failed []string
	}{
		{FailOnError, []string{"MCB001", "MCB003", "MCB005", "MCB006", "MCB011", "MCB014"}},
		{FailOnWarning, []string{"MCB001", "MCB002", "MCB003", "MCB005", "MCB006", "MCB010", "MCB011", "MCB013", "MCB014"}},
		{FailNever, nil},
	} {
		t.Run(string(tt.failOn), func(t *testing.T) {
			r.FailOn = tt.failOn
			r.finish()
			b, err := r.Encode(FormatJUnit, false)
			if err != nil {
				t.Fatal(err)
			}
			suites, err := junit.Ingest(b)
			if err != nil {
				t.Fatal(err)
			}
			if len(suites) != 1 || len(suites[0].Tests) != len(rules) {
				t.Fatalf("JUnit: %d suites, want 1 with %d tests", len(suites), len(rules))
			}
			var failed, skipped []string
			for i, tc := range suites[0].Tests {
				id := rules[i].ID
				if !strings.HasPrefix(tc.Name, id+" ") {
					t.Errorf("test case %d is %q, want rule %s", i, tc.Name, id)
				}
				switch tc.Status {
				case junit.StatusFailed:
					failed = append(failed, id)
					for _, f := range r.ByRule(id) {
						if tt.failOn.Fails(f.Severity) && !strings.Contains(tc.Error.Error(), f.Message) {
							t.Errorf("%s failure does not carry %q", id, f.Message)
						}
					}
				case junit.StatusSkipped:
					skipped = append(skipped, id+" "+tc.Message)
				}
				for _, f := range r.ByRule(id) {
					if !tt.failOn.Fails(f.Severity) && !strings.Contains(tc.SystemOut, f.Message) {
						t.Errorf("%s system-out does not carry %q", id, f.Message)
					}
				}
			}
			if diff := cmp.Diff(tt.failed, failed); diff != "" {
				t.Errorf("failed rules (-want +got):\n%s", diff)
			}
			wantSkipped := []string{"MCB008 needs --image", "MCB009 needs --image", "MCB012 needs --image", "MCB015 needs --image", "MCB025 needs --image", "MCB026 needs --image"}
			if diff := cmp.Diff(wantSkipped, skipped); diff != "" {
				t.Errorf("skipped rules (-want +got):\n%s", diff)
			}
		})
	}
}

// sarifSchema compiles the vendored SARIF 2.1.0 schema, with format
// assertions (uri, uri-reference) on.
func sarifSchema(t *testing.T) *jsonschema.Schema {
	t.Helper()
	f, err := os.Open("testdata/sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, err := jsonschema.UnmarshalJSON(f)
	if err != nil {
		t.Fatal(err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	if err := c.AddResource("sarif-schema-2.1.0.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	return sch
}

func validateSARIF(t *testing.T, sch *jsonschema.Schema, b []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	if err := sch.Validate(inst); err != nil {
		t.Errorf("SARIF output is not valid SARIF 2.1.0: %v", err)
	}
}

// TestSARIFValid validates SARIF reports against the SARIF 2.1.0 schema,
// shows the schema check can fail, and reads a report back to check rules
// and locations.
func TestSARIFValid(t *testing.T) {
	sch := sarifSchema(t)
	r, e := goldenReport(t)
	b, err := r.Encode(FormatSARIF, false)
	if err != nil {
		t.Fatal(err)
	}
	validateSARIF(t, sch, b)

	t.Run("the schema check fails on bad SARIF", func(t *testing.T) {
		bad := bytes.Replace(b, []byte(`"version": "2.1.0"`), []byte(`"version": "2.0.0"`), 1)
		inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(bad))
		if err != nil {
			t.Fatal(err)
		}
		if sch.Validate(inst) == nil {
			t.Error("a SARIF log with version 2.0.0 validated")
		}
	})

	t.Run("rules and locations", func(t *testing.T) {
		log, err := sarif.FromBytes(b)
		if err != nil {
			t.Fatal(err)
		}
		run := log.Runs[0]
		var ids []string
		for _, rd := range run.Tool.Driver.Rules {
			ids = append(ids, *rd.ID)
		}
		var wantIDs []string
		for _, rule := range rules {
			wantIDs = append(wantIDs, rule.ID)
		}
		if diff := cmp.Diff(wantIDs, ids); diff != "" {
			t.Errorf("tool.driver.rules (-want +got):\n%s", diff)
		}
		if len(run.Results) != len(r.Findings) {
			t.Fatalf("%d results for %d findings", len(run.Results), len(r.Findings))
		}
		for i, res := range run.Results {
			f := r.Findings[i]
			if *res.RuleID != f.Rule || *run.Tool.Driver.Rules[res.RuleIndex].ID != f.Rule || res.Level != sarifLevel[f.Severity] {
				t.Errorf("result %d: rule %s index %d level %s, want %s %s", i, *res.RuleID, res.RuleIndex, res.Level, f.Rule, sarifLevel[f.Severity])
			}
			phys := res.Locations[0].PhysicalLocation
			wantURI := f.File
			if wantURI == "" {
				wantURI = r.MachineConfigs[0].File
			}
			if *phys.ArtifactLocation.URI != wantURI {
				t.Errorf("result %d at %s, want %s", i, *phys.ArtifactLocation.URI, wantURI)
			}
			if f.Line > 0 && (phys.Region == nil || *phys.Region.StartLine != f.Line) {
				t.Errorf("result %d (%s %s) has no region at line %d", i, f.Rule, f.Field, f.Line)
			}
		}
	})

	t.Run("stdin, absolute paths, no findings", func(t *testing.T) {
		in, err := os.ReadFile("testdata/golden/input/99-bad.yaml")
		if err != nil {
			t.Fatal(err)
		}
		abs, err := filepath.Abs("testdata/golden/input/50-other.json")
		if err != nil {
			t.Fatal(err)
		}
		clean := e.MC("10-clean", `{"storage": {"files": [`+file("/etc/x", "x")+`]}}`)
		for _, o := range []Options{
			{MachineConfigs: []string{"-"}, Stdin: bytes.NewReader(in), Base: e.Base},
			{MachineConfigs: []string{abs}},
			{MachineConfigs: []string{clean}},
		} {
			rep := e.run(o)
			b, err := rep.Encode(FormatSARIF, false)
			if err != nil {
				t.Fatal(err)
			}
			validateSARIF(t, sch, b)
		}
	})
}

// TestJSONReportDocumented decodes the example of docs/verify.md strictly
// into a Report, so that the documented schema and the code agree, and
// checks that every field of a real report is documented.
func TestJSONReportDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/verify.md")
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(doc), "```json\n")
	example, _, ok2 := strings.Cut(rest, "```")
	if !ok || !ok2 {
		t.Fatal("docs/verify.md has no ```json example")
	}
	dec := json.NewDecoder(strings.NewReader(example))
	dec.DisallowUnknownFields()
	var r Report
	if err := dec.Decode(&r); err != nil {
		t.Fatalf("the documented example is not a report: %v", err)
	}
	schematest.Validate(t, "verify-report", []byte(example))
	real, _ := goldenReport(t)
	b, err := real.Encode(FormatJSON, false)
	if err != nil {
		t.Fatal(err)
	}
	finding := func(v any) map[string]any { return schematest.Object(v, "findings", 0) }
	schematest.Invalid(t, "verify-report", b, "a line as a string", func(v any) { finding(v)["line"] = "34" })
	schematest.Invalid(t, "verify-report", b, "a finding without a message", func(v any) { delete(finding(v), "message") })
	schematest.Invalid(t, "verify-report", b, "an unknown severity", func(v any) { finding(v)["severity"] = "fatal" })
	schematest.Invalid(t, "verify-report", b, "no summary", func(v any) { delete(schematest.Object(v), "summary") })
	var fields map[string]any
	if err := json.Unmarshal(b, &fields); err != nil {
		t.Fatal(err)
	}
	for _, key := range jsonKeys(fields, "") {
		if !strings.Contains(string(doc), "`"+key+"`") {
			t.Errorf("docs/verify.md does not document the field `%s`", key)
		}
	}
}

// jsonKeys lists the object keys of a decoded JSON value, recursively.
func jsonKeys(v any, _ string) []string {
	var keys []string
	switch x := v.(type) {
	case map[string]any:
		for k, sub := range x {
			keys = append(keys, k)
			keys = append(keys, jsonKeys(sub, k)...)
		}
	case []any:
		for _, sub := range x {
			keys = append(keys, jsonKeys(sub, "")...)
		}
	}
	return keys
}
