package verify

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// writeDoc writes a MachineConfig document (YAML) as name.yaml.
func writeDoc(t *testing.T, dir, name, doc string) string {
	t.Helper()
	p := filepath.Join(dir, name+".yaml")
	if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestSpecRules: each field an image cannot carry fires its rule at the
// MachineConfig, field and line that set it, and stays silent when the
// field is unset or harmless.
func TestSpecRules(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	set := writeDoc(t, dir, "10-set", `kind: MachineConfig
metadata: {name: 10-set}
spec:
  kernelArguments: [nosmt, "mitigations=auto"]
  extensions: [usbguard]
  kernelType: realtime
  fips: true
  osImageURL: quay.io/example/other@sha256:0000000000000000000000000000000000000000000000000000000000000000
  config:
    ignition: {version: 3.5.0}
    storage:
      disks: [{device: /dev/vdb}]
      luks: [{name: root, device: /dev/disk/by-partlabel/root, clevis: {tpm2: true}}]
`)
	quiet := writeDoc(t, dir, "20-quiet", `kind: MachineConfig
metadata: {name: 20-quiet}
spec:
  kernelArguments: []
  extensions: []
  kernelType: default
  fips: false
  osImageURL: ""
`)
	tests := []struct {
		rule string
		want []string
	}{
		{RuleKernelArguments, []string{"10-set spec.kernelArguments "}},
		{RuleExtensions, []string{"10-set spec.extensions "}},
		{RuleKernelType, []string{"10-set spec.kernelType "}},
		{RuleFIPS, []string{"10-set spec.fips "}},
		{RuleOSImageURL, []string{"10-set spec.osImageURL "}},
		{RuleStorageLayout, []string{"10-set spec.config.storage.disks ", "10-set spec.config.storage.luks "}},
	}
	r := e.run(Options{MachineConfigs: []string{set, quiet}, Base: e.Base})
	wantLine := map[string]int{RuleKernelArguments: 4, RuleExtensions: 5, RuleKernelType: 6, RuleFIPS: 7, RuleOSImageURL: 8, RuleStorageLayout: -1}
	for _, tt := range tests {
		got := r.ByRule(tt.rule)
		if diff := cmp.Diff(tt.want, fieldsOf(got)); diff != "" {
			t.Errorf("%s findings (-want +got):\n%s", tt.rule, diff)
		}
		for _, f := range got {
			if tt.rule == RuleStorageLayout {
				if want := map[string]int{"spec.config.storage.disks": 12, "spec.config.storage.luks": 13}[f.Field]; f.Line != want {
					t.Errorf("%s finding at %s:%d, want line %d", f.Field, f.File, f.Line, want)
				}
				continue
			}
			if f.Line != wantLine[tt.rule] || f.File != set {
				t.Errorf("%s finding at %s:%d, want %s:%d", tt.rule, f.File, f.Line, set, wantLine[tt.rule])
			}
		}
	}
	r = e.run(Options{MachineConfigs: []string{quiet}, Base: e.Base})
	for _, tt := range tests {
		if got := r.ByRule(tt.rule); len(got) > 0 {
			t.Errorf("%s fires on unset or default fields: %v", tt.rule, got)
		}
	}
}

// TestOSImageURLRule: an osImageURL naming the base or the image (by
// digest or reference) is fine, one naming another image is an error,
// a generated MachineConfig's is ignored (the MCO ignores it), and without
// --base the rule does not run.
func TestOSImageURLRule(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	plain := e.MC("00-plain", `{"storage": {"files": [`+file("/etc/a.conf", "x")+`]}}`)
	img, res := e.buildResult(e.Base, "layered", plain)
	base := e.run(Options{MachineConfigs: []string{plain}, Base: e.Base}).Base.Digest
	mc := func(name, url, annotations string) string {
		return writeDoc(t, dir, name, "kind: MachineConfig\nmetadata: {name: "+name+annotations+"}\nspec: {osImageURL: \""+url+"\"}\n")
	}
	tests := []struct {
		name  string
		file  string
		image bool
		fires bool
	}{
		{"the base by digest", mc("50-base", "quay.io/example/base@"+base.String(), ""), false, false},
		{"the image by digest", mc("50-image", "quay.io/example/layered@"+res.Digest.String(), ""), true, false},
		{"another image", mc("50-other", "quay.io/example/other:4.18", ""), false, true},
		{"another digest", mc("50-other-digest", "quay.io/example/base@sha256:1111111111111111111111111111111111111111111111111111111111111111", ""), false, true},
		{"a generated MachineConfig", mc("50-generated", "quay.io/example/other:4.18", ", annotations: {machineconfiguration.openshift.io/generated-by-controller-version: v4.18}"), false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := Options{MachineConfigs: []string{plain, tt.file}, Base: e.Base}
			if tt.image {
				o.Image = img
			}
			got := e.run(o).ByRule(RuleOSImageURL)
			if fires := len(got) > 0; fires != tt.fires {
				t.Errorf("%s fired = %v, want %v: %v", RuleOSImageURL, fires, tt.fires, got)
			}
		})
	}
	r := e.run(Options{MachineConfigs: []string{mc("50-nobase", "quay.io/example/other:4.18", "")}})
	var reason string
	for _, n := range r.NotRun {
		if n.Rule == RuleOSImageURL {
			reason = n.Reason
		}
	}
	if reason != "needs --base" {
		t.Errorf("%s without --base: not run %q, want %q", RuleOSImageURL, reason, "needs --base")
	}
}

// TestButaneFindingLines: findings about a Butane config point at the
// Butane file and the line where Butane writes the field.
func TestButaneFindingLines(t *testing.T) {
	e := newEnv(t)
	bu := filepath.Join(t.TempDir(), "tool.bu")
	if err := os.WriteFile(bu, []byte(`variant: openshift
version: 4.18.0
metadata:
  name: 99-tool
  labels: {machineconfiguration.openshift.io/role: worker}
openshift:
  kernel_arguments: [nosmt]
storage:
  files:
    - path: /etc/ok.conf
      contents: {inline: ok}
    - path: /usr/lib/tool.conf
      contents: {inline: lost}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	r := e.run(Options{MachineConfigs: []string{bu}})
	for _, tt := range []struct {
		rule string
		line int
	}{{RuleKernelArguments, 7}, {RuleUsrContent, 12}} {
		got := r.ByRule(tt.rule)
		if len(got) != 1 || got[0].File != bu || got[0].Line != tt.line {
			t.Errorf("%s findings = %+v, want one at %s:%d", tt.rule, got, bu, tt.line)
		}
	}
}

// TestKubeconfigModeRule: the kubeconfig at a mode other than 0600 (none
// is 0644) is an error at the MachineConfig that wins the merge; at 0600
// it is fine.
func TestKubeconfigModeRule(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	kc := func(name, mode string) string {
		return writeDoc(t, dir, name, "kind: MachineConfig\nmetadata: {name: "+name+"}\nspec:\n  config:\n    ignition: {version: 3.5.0}\n    storage:\n      files:\n      - {path: /etc/kubernetes/kubeconfig"+mode+", contents: {source: \"data:,kc\"}}\n")
	}
	for _, tt := range []struct {
		name string
		mcs  []string
		want []string
	}{
		{"no mode", []string{kc("10-none", "")}, []string{"10-none spec.config.storage.files[0] /etc/kubernetes/kubeconfig"}},
		{"0644", []string{kc("10-rw", ", mode: 0644")}, []string{"10-rw spec.config.storage.files[0] /etc/kubernetes/kubeconfig"}},
		{"0600", []string{kc("10-ok", ", mode: 0600")}, nil},
		{"0600 overridden by a later 0640", []string{kc("10-ok", ", mode: 0600"), kc("20-group", ", mode: 0640")}, []string{"20-group spec.config.storage.files[0] /etc/kubernetes/kubeconfig"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := e.run(Options{MachineConfigs: tt.mcs}).ByRule(RuleKubeconfigMode)
			if diff := cmp.Diff(tt.want, fieldsOf(got)); diff != "" {
				t.Errorf("%s findings (-want +got):\n%s", RuleKubeconfigMode, diff)
			}
		})
	}
}

// TestUnusedFieldRule: a misspelt Ignition key and a field a
// MachineConfig does not have are warnings at their fields; the
// MachineConfig is still checked (and built) without them.
func TestUnusedFieldRule(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	mc := writeDoc(t, dir, "10-typo", "kind: MachineConfig\nmetadata: {name: 10-typo}\nspec:\n  kernelArgs: [x]\n  config:\n    ignition: {version: 3.5.0}\n    storage:\n      files:\n      - {path: /etc/typo.conf, mdoe: 384, contents: {source: \"data:,x\"}}\n")
	rep := e.run(Options{MachineConfigs: []string{mc}})
	got := rep.ByRule(RuleUnusedField)
	want := []string{"10-typo spec.kernelArgs ", "10-typo spec.config.storage.files[0].mdoe "}
	if diff := cmp.Diff(want, fieldsOf(got)); diff != "" {
		t.Errorf("%s findings (-want +got):\n%s", RuleUnusedField, diff)
	}
	for _, f := range got {
		if f.Severity != Warning {
			t.Errorf("%s: severity %s, want warning", f.Field, f.Severity)
		}
	}
}

// TestEnablementCheckRule: a disabled unit whose Also= names an enabled
// one leaves it disabled, which the daemon's on-disk check finds: an
// error at the enabled unit.
func TestEnablementCheckRule(t *testing.T) {
	e := newEnv(t)
	dir := t.TempDir()
	mc := writeDoc(t, dir, "10-also", "kind: MachineConfig\nmetadata: {name: 10-also}\nspec:\n  config:\n    ignition: {version: 3.5.0}\n    systemd:\n      units:\n"+
		"      - {name: a.service, enabled: true, contents: \"[Service]\\nExecStart=/bin/true\\n[Install]\\nWantedBy=multi-user.target\\n\"}\n"+
		"      - {name: b.service, enabled: false, contents: \"[Service]\\nExecStart=/bin/true\\n[Install]\\nWantedBy=multi-user.target\\nAlso=a.service\\n\"}\n")
	got := e.run(Options{MachineConfigs: []string{mc}}).ByRule(RuleEnablementCheck)
	if diff := cmp.Diff([]string{"10-also spec.config.systemd.units[a.service].enabled /etc/systemd/system/a.service"}, fieldsOf(got)); diff != "" {
		t.Errorf("%s findings (-want +got):\n%s", RuleEnablementCheck, diff)
	}
	for _, f := range got {
		if f.Severity != Error || !strings.Contains(f.Message, "says disabled") {
			t.Errorf("%s: %s %q, want an error saying disabled", f.Field, f.Severity, f.Message)
		}
	}
}
