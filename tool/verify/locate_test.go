package verify

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/machineconfig"
)

// locateYAML has two documents, the second a List, with fields on known
// lines (the line numbers are in the comments of the table below).
const locateYAML = `# two documents
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 10-first
spec:
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - path: /etc/a
          contents:
            source: data:,a
        - path: /etc/b
          mode: 420
          append:
            - source: data:,b
    systemd:
      units:
        - name: a.service
          dropins:
            - name: x.conf
              contents: "[Unit]"
---
apiVersion: v1
kind: List
items:
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfig
  metadata:
    name: 20-second
  spec:
    config:
      ignition: {version: 3.5.0}
      storage:
        files: [{path: /etc/c, contents: {source: "data:,c"}}]
`

func TestLocatorLines(t *testing.T) {
	l := newLocator([]machineconfig.Input{{Name: "mc.yaml", Data: []byte(locateYAML)}})
	tests := []struct {
		mc, field string
		want      int
	}{
		{"10-first", "", 5},
		{"10-first", "spec.config.storage.files[0]", 12},
		{"10-first", "spec.config.storage.files[0].contents.source", 14},
		{"10-first", "spec.config.storage.files[1].mode", 16},
		{"10-first", "spec.config.storage.files[1].append", 17},
		{"10-first", "spec.config.storage.files[1].user.name", 15}, // not written: its item
		{"10-first", "spec.config.storage.files[7]", 11},           // no such item: the list
		{"10-first", "spec.config.systemd.units[a.service]", 21},
		{"10-first", "spec.config.systemd.units[a.service].dropins[x.conf]", 23},
		{"10-first", "spec.config.systemd.units[a.service].enabled", 21},
		{"10-first", "spec.config.systemd.units[b.service]", 20},
		{"20-second", "spec.config.storage.files[0]", 37},
		{"20-second", "metadata.name", 32},
		{"30-none", "spec", 0},
	}
	for _, tt := range tests {
		if got := l.line("mc.yaml", tt.mc, tt.field); got != tt.want {
			t.Errorf("line(%s, %s) = %d, want %d", tt.mc, tt.field, got, tt.want)
		}
	}
	if got := l.line("other.yaml", "10-first", ""); got != 0 {
		t.Errorf("line in an unknown file = %d, want 0", got)
	}
}

func TestParseField(t *testing.T) {
	got := parseField("spec.config.systemd.units[kubelet.service].dropins[10-a.conf].contents")
	want := []segment{{key: "spec", index: -1}, {key: "config", index: -1}, {key: "systemd", index: -1}, {key: "units", index: -1},
		{index: -1, name: "kubelet.service"}, {key: "dropins", index: -1}, {index: -1, name: "10-a.conf"}, {key: "contents", index: -1}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(segment{})); diff != "" {
		t.Errorf("parseField (-want +got):\n%s", diff)
	}
	got = parseField("spec.config.storage.files[12].mode")
	if got[4].index != 12 || got[5].key != "mode" {
		t.Errorf("parseField(files[12].mode) = %+v", got)
	}
}

// TestFindingLines: a refusal in a YAML file is reported at its line,
// through Run.
func TestFindingLines(t *testing.T) {
	e := newEnv(t)
	p := filepath.Join(t.TempDir(), "mc.yaml")
	if err := os.WriteFile(p, []byte(locateYAML), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.run(Options{MachineConfigs: []string{p}})
	got := r.ByRule(RuleUnsupportedIgnition)
	if len(got) != 1 || got[0].Field != "spec.config.storage.files[1].append" || got[0].Line != 17 || got[0].File != p {
		t.Errorf("append refusal = %+v, want %s line 17", got, p)
	}
}
