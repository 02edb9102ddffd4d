package main

import (
	"encoding/json"
	"encoding/xml"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/schematest"
)

// TestVerifyExitCodes runs the gate as a pipeline would: clean inputs pass,
// findings at or above --fail-on fail with 1, input errors exit 2, and
// several formats are written in one run.
func TestVerifyExitCodes(t *testing.T) {
	e := newEnv(t)
	img := "oci:" + filepath.Join(e.dir, "layered") + ":latest"
	e.mustBuild(t, e.base, img, workerMC)
	junit, sarif := filepath.Join(e.dir, "junit.xml"), filepath.Join(e.dir, "out.sarif")
	tests := []struct {
		name string
		args []string
		want int
	}{
		{"clean, with base and image", append([]string{"-f", workerMC, "--base", e.base, "--image", img, "--quiet",
			"--format", "junit=" + junit, "--format", "sarif=" + sarif, "--format", "json"}, e.imageArgs()...), exitOK},
		{"a stock rendered config passes --fail-on warning", []string{"-f", workerMC, "--fail-on", "warning", "--format", "json"}, exitOK},
		{"warnings fail with --fail-on warning", []string{"-f", workerMC, "--fail-on", "warning", "--severity", "MCB004=warning", "--format", "json"}, exitFindings},
		{"a severity that is none", []string{"-f", workerMC, "--severity", "MCB004=fatal"}, exitInput},
		{"an unknown rule's severity", []string{"-f", workerMC, "--severity", "MCB999=info"}, exitInput},
		{"refused content is a finding", []string{"-f", "testdata/refused.yaml", "--format", "json"}, exitFindings},
		{"refused content ignored with --fail-on never", []string{"-f", "testdata/refused.yaml", "--fail-on", "never"}, exitOK},
		{"unknown format", []string{"-f", workerMC, "--format", "yaml"}, exitInput},
		{"missing file", []string{"-f", filepath.Join(e.dir, "nope.yaml")}, exitInput},
		{"unknown rule", []string{"-f", workerMC, "--disable", "MCB999"}, exitInput},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, stdout, stderr := e.run(append([]string{"verify"}, tc.args...)...)
			if code != tc.want {
				t.Fatalf("verify %v: exit %d, want %d\nstdout:\n%s\nstderr:\n%s", tc.args, code, tc.want, stdout, stderr)
			}
			if strings.Contains(strings.Join(tc.args, " "), "json") && code != exitInput {
				var v map[string]any
				if err := json.Unmarshal([]byte(stdout), &v); err != nil {
					t.Errorf("stdout is not JSON: %v\n%s", err, stdout)
				}
				schematest.Validate(t, "verify-report", []byte(stdout))
			}
		})
	}
	b, err := os.ReadFile(junit)
	if err != nil {
		t.Fatal(err)
	}
	if err := xml.Unmarshal(b, new(struct{})); err != nil {
		t.Errorf("junit.xml is not XML: %v", err)
	}
	b, err = os.ReadFile(sarif)
	if err != nil {
		t.Fatal(err)
	}
	var s struct {
		Version string `json:"version"`
	}
	if err := json.Unmarshal(b, &s); err != nil || s.Version != "2.1.0" {
		t.Errorf("out.sarif: version %q, err %v; want 2.1.0", s.Version, err)
	}
}
