package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/machineconfig"
)

func TestThreshold(t *testing.T) {
	tests := []struct {
		t    Threshold
		fail []Severity
	}{
		{FailOnError, []Severity{Error}},
		{FailOnWarning, []Severity{Error, Warning}},
		{FailOnInfo, []Severity{Error, Warning, Info}},
		{FailNever, nil},
	}
	for _, tt := range tests {
		var got []Severity
		for _, s := range []Severity{Error, Warning, Info} {
			if tt.t.Fails(s) {
				got = append(got, s)
			}
		}
		if diff := cmp.Diff(tt.fail, got); diff != "" {
			t.Errorf("%s fails (-want +got):\n%s", tt.t, diff)
		}
		if p, err := ParseThreshold(string(tt.t)); err != nil || p != tt.t {
			t.Errorf("ParseThreshold(%s) = %s, %v", tt.t, p, err)
		}
	}
	if _, err := ParseThreshold("fatal"); err == nil {
		t.Error("ParseThreshold(fatal) succeeded")
	}
}

// TestVerdicts runs one input with a warning and an info finding under
// each threshold, --disable and --strict-revert.
func TestVerdicts(t *testing.T) {
	e := newEnv(t)
	mc := e.MC("mc", `{"storage": {"files": [`+file("/var/lib/x", "x")+`, `+file("/etc/x", "x")+`]}}`)
	tests := []struct {
		name       string
		o          Options
		wantFailed bool
		want       Summary
	}{
		{"default", Options{}, false, Summary{Infos: 2}},
		{"fail on warning", Options{FailOn: FailOnWarning}, false, Summary{Infos: 2}},
		{"fail on info", Options{FailOn: FailOnInfo}, true, Summary{Infos: 2}},
		{"var content a warning", Options{FailOn: FailOnWarning, Severity: []string{"var-content=warning"}}, true, Summary{Warnings: 1, Infos: 1}},
		{"both errors", Options{Severity: []string{"MCB004=error, revert-clobber=error"}}, true, Summary{Errors: 2}},
		{"disabled", Options{FailOn: FailOnInfo, Disable: []string{"var-content"}}, true, Summary{Infos: 1}},
		{"strict revert", Options{FailOn: FailOnWarning, Disable: []string{"MCB004"}, StrictRevert: true}, true, Summary{Warnings: 1}},
		{"both disabled", Options{FailOn: FailOnInfo, Disable: []string{"MCB004,revert-clobber"}}, false, Summary{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.MachineConfigs, o.Base = []string{mc}, e.Base
			r := e.run(o)
			if r.Failed != tt.wantFailed || r.Summary != tt.want {
				t.Errorf("failed %v summary %+v, want %v %+v", r.Failed, r.Summary, tt.wantFailed, tt.want)
			}
			for _, d := range o.Disable {
				for _, name := range strings.Split(d, ",") {
					rule, _ := LookupRule(name)
					if r.notRunReason(rule.ID) != "disabled" {
						t.Errorf("%s is not reported as disabled: %v", name, r.NotRun)
					}
				}
			}
		})
	}
}

// TestStockConfigsPassWarnings: the MCO's own rendered configs (the
// fixtures in testdata/, against RHCOS's layout) pass --fail-on warning:
// their /usr/local/bin scripts are information (MCB004), as every node
// gets them from the daemon anyway.
func TestStockConfigsPassWarnings(t *testing.T) {
	fixtures, err := filepath.Glob("../../testdata/machineconfigs/rendered-*.json")
	if err != nil || len(fixtures) < 8 {
		t.Fatalf("fixtures: %v, %v", fixtures, err)
	}
	e := newEnv(t)
	for _, f := range fixtures {
		r := e.run(Options{MachineConfigs: []string{f}, FailOn: FailOnWarning})
		if r.Failed || r.Summary.Warnings > 0 || r.Summary.Errors > 0 {
			t.Errorf("%s: %+v; want no warning or error:\n%v", filepath.Base(f), r.Summary, r.Findings)
		}
		if len(r.ByRule(RuleVarContent)) == 0 {
			t.Errorf("%s: no MCB004 information for its /usr/local/bin scripts", filepath.Base(f))
		}
	}
}

// TestInputErrors: what makes Run fail instead of reporting findings.
func TestInputErrors(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	good := e.MC("good", `{}`)
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"unknown rule", Options{MachineConfigs: []string{good}, Disable: []string{"MCB999"}}, "rule MCB999: no such rule"},
		{"unknown rule's severity", Options{MachineConfigs: []string{good}, Severity: []string{"MCB999=info"}}, "rule MCB999: no such rule"},
		{"a severity that is none", Options{MachineConfigs: []string{good}, Severity: []string{"MCB004=fatal"}}, `severity "MCB004=fatal"`},
		{"a severity without a rule", Options{MachineConfigs: []string{good}, Severity: []string{"warning"}}, `severity "warning"`},
		{"no file", Options{MachineConfigs: []string{filepath.Join(dir, "absent.yaml")}}, "no such file"},
		{"no MachineConfig given", Options{}, "no MachineConfig given"},
		{"YAML syntax", Options{MachineConfigs: []string{write("bad.yaml", "kind: [\n")}}, "bad.yaml"},
		{"empty directory", Options{MachineConfigs: []string{t.TempDir()}}, "no *.yaml, *.yml, *.json or *.bu file"},
		{"two with one name", Options{MachineConfigs: []string{good, writeMC(t, t.TempDir(), "good", `{}`)}}, "already defined"},
		{"bad base", Options{MachineConfigs: []string{good}, Base: "oci:" + filepath.Join(dir, "nothing")}, "nothing"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := e.tryRun(tt.o)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Run error = %v, want %q", err, tt.wantErr)
			}
		})
	}
	// Not MachineConfigs, and Ignition that does not validate, are
	// findings, not input errors.
	r := e.run(Options{MachineConfigs: []string{write("cm.yaml", "kind: ConfigMap\nmetadata:\n  name: x\n"),
		write("v.yaml", "kind: MachineConfig\nmetadata:\n  name: v\nspec:\n  config:\n    ignition:\n      version: 9.9.9\n")}})
	if diff := cmp.Diff([]string{"x kind ", "v spec.config.ignition.version "}, fieldsOf(r.ByRule(RuleUnsupportedIgnition))); diff != "" {
		t.Errorf("MCB001 findings (-want +got):\n%s", diff)
	}
}

// TestDirectorySkipsOtherKinds: in a directory, a KubeletConfig is
// skipped (told to Skipped), not an MCB001 finding.
func TestDirectorySkipsOtherKinds(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	writeMC(t, dir, "good", `{}`)
	if err := os.WriteFile(filepath.Join(dir, "kc.yaml"), []byte("apiVersion: machineconfiguration.openshift.io/v1\nkind: KubeletConfig\nmetadata:\n  name: kc\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	var skipped []string
	r := e.run(Options{MachineConfigs: []string{dir}, Skipped: func(fe *machineconfig.FieldError) { skipped = append(skipped, fe.Kind) }})
	if len(r.ByRule(RuleUnsupportedIgnition)) > 0 || len(skipped) != 1 || skipped[0] != "KubeletConfig" {
		t.Errorf("MCB001 %v, skipped %v; want none, and the KubeletConfig skipped", r.ByRule(RuleUnsupportedIgnition), skipped)
	}
}
