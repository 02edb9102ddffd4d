package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
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
	mc := e.mc("mc", `{"storage": {"files": [`+file("/var/lib/x", "x")+`, `+file("/etc/x", "x")+`]}}`)
	tests := []struct {
		name       string
		o          Options
		wantFailed bool
		want       Summary
	}{
		{"default", Options{}, false, Summary{Warnings: 1, Infos: 1}},
		{"fail on warning", Options{FailOn: FailOnWarning}, true, Summary{Warnings: 1, Infos: 1}},
		{"fail on info", Options{FailOn: FailOnInfo}, true, Summary{Warnings: 1, Infos: 1}},
		{"disabled warning", Options{FailOn: FailOnWarning, Disable: []string{"var-content"}}, false, Summary{Infos: 1}},
		{"strict revert", Options{FailOn: FailOnWarning, Disable: []string{"MCB004"}, StrictRevert: true}, true, Summary{Warnings: 1}},
		{"both disabled", Options{FailOn: FailOnInfo, Disable: []string{"MCB004,revert-clobber"}}, false, Summary{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := tt.o
			o.MachineConfigs, o.Base = []string{mc}, e.base
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
	good := e.mc("good", `{}`)
	tests := []struct {
		name    string
		o       Options
		wantErr string
	}{
		{"unknown rule", Options{MachineConfigs: []string{good}, Disable: []string{"MCB999"}}, "rule MCB999: no such rule"},
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
