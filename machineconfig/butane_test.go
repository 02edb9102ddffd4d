package machineconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestButaneGolden loads a Butane config of the openshift variant and
// compares the MachineConfig it makes with the golden file.
func TestButaneGolden(t *testing.T) {
	in := filepath.Join("testdata", "butane", "worker.bu")
	mcs, err := Load([]string{in}, nil)
	if err != nil {
		t.Fatalf("Load(%s) = %v", in, err)
	}
	if len(mcs) != 1 || mcs[0].File != in {
		t.Fatalf("Load(%s) = %d MachineConfigs (file %q), want 1 from %s", in, len(mcs), mcs[0].File, in)
	}
	mc := mcs[0]
	spec := mc.Spec
	spec.Config = nil
	got, err := json.MarshalIndent(map[string]any{"name": mc.Name, "labels": mc.Labels, "spec": spec, "ignition": mc.Ignition}, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	got = append(got, '\n')
	golden := filepath.Join("testdata", "butane", "worker.golden.json")
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("reading golden file (go test -update writes it): %v", err)
	}
	if string(got) != string(want) {
		t.Errorf("Load(%s) differs from %s (go test -update rewrites it):\n%s", in, golden, got)
	}
}

// TestButaneInputs: Butane configs are found by extension in directories
// and by their variant on stdin; their errors name the Butane file, the
// config's name, the Butane field and its line.
func TestButaneInputs(t *testing.T) {
	const good = "variant: openshift\nversion: 4.18.0\nmetadata: {name: 10-bu, labels: {machineconfiguration.openshift.io/role: worker}}\n" +
		"storage: {files: [{path: /etc/bu, contents: {inline: bu}}]}\n"
	t.Chdir(t.TempDir())
	writeFiles(t, ".", map[string]string{
		"d/10-bu.bu":   good,
		"d/20-mc.yaml": "kind: MachineConfig\nmetadata: {name: 20-mc}\n",
		"bad.bu": `variant: openshift
version: 4.18.0
metadata:
  name: 99-bad
  labels: {machineconfiguration.openshift.io/role: worker}
storage:
  files:
    - path: /etc/ok
    - path: etc/relative
      contents: {inline: x}
`,
		"fcos.bu":    "variant: fcos\nversion: 1.5.0\n",
		"mc.bu":      "kind: MachineConfig\nmetadata: {name: 00-mc}\n",
		"unknown.bu": "variant: openshift\nversion: 9.9.0\nmetadata: {name: 99-unknown}\n",
	})
	mcs, err := Load([]string{"d"}, nil)
	if err != nil {
		t.Fatalf("Load(d) = %v", err)
	}
	if got := names(mcs); strings.Join(got, ",") != "10-bu,20-mc" || mcs[0].File != "d/10-bu.bu" {
		t.Errorf("Load(d) = %v from %s, want 10-bu (from d/10-bu.bu), 20-mc", got, mcs[0].File)
	}
	if mcs, err := Load([]string{Stdin}, strings.NewReader(good)); err != nil || len(mcs) != 1 || mcs[0].Name != "10-bu" {
		t.Errorf("Load(- with a Butane config) = %v, %v; want 10-bu", names(mcs), err)
	}
	for _, tt := range []struct{ file, want string }{
		{"bad.bu", "bad.bu: 99-bad: storage.files[1].path: Butane: line 9, column 13: path not absolute"},
		{"fcos.bu", `fcos.bu: <unnamed>: variant: Butane variant "fcos" makes an Ignition config, not a MachineConfig: use variant: openshift`},
		{"mc.bu", "mc.bu: 00-mc: variant: a Butane config (.bu) names its variant: variant: openshift"},
		{"unknown.bu", "unknown.bu: 99-unknown: : Butane: No translator exists for variant openshift with version 9.9.0"},
	} {
		_, err := Load([]string{tt.file}, nil)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Load(%s) = %v, want %s", tt.file, err, tt.want)
		}
	}
}

func TestButaneField(t *testing.T) {
	for in, want := range map[string]string{
		"spec.config.storage.files[0].contents.source":               "storage.files[0].contents.source",
		"spec.config.passwd.users[0].sshAuthorizedKeys[1]":           "passwd.users[0].ssh_authorized_keys[1]",
		"spec.config.systemd.units[myUnit.service].dropins[aB.conf]": "systemd.units[myUnit.service].dropins[aB.conf]",
		"spec.kernelArguments":                                       "openshift.kernel_arguments",
		"spec.kernelType":                                            "openshift.kernel_type",
		"metadata.name":                                              "metadata.name",
	} {
		if got := ButaneField(in); got != want {
			t.Errorf("ButaneField(%q) = %q, want %q", in, got, want)
		}
	}
}
