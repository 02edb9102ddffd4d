package machineconfig_test

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/machineconfig"
)

// TestWarnings: fields nothing reads are warnings at their field, for a
// MachineConfig (Ignition's unused keys, fields the object and its spec
// do not have) and for a Butane config (Butane's own warnings); the
// MachineConfig still loads, with the default where a key was misspelt.
// Other warnings (an enabled unit without [Install]) are verify's rules,
// not these. A wrong apiVersion is an error.
func TestWarnings(t *testing.T) {
	dir := t.TempDir()
	write := func(name, s string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	yml := write("typos.yaml", `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 99-typos
extra: 1
spec:
  konfig: {}
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - path: /etc/typo.conf
          mdoe: 384
          contents:
            source: data:,x
    systemd:
      unitz: []
`)
	bu := write("typos.bu", `variant: openshift
version: 4.14.0
metadata:
  name: 99-butane-typos
  labels:
    machineconfiguration.openshift.io/role: worker
storage:
  files:
    - path: /etc/typo.conf
      mdoe: 0600
      contents:
        inline: x
systemd:
  units:
    - name: noinstall.service
      enabled: true
      contents: "[Service]\nExecStart=/bin/true\n"
`)
	want := map[string][]string{
		"99-typos": {
			`extra: unknown field "extra"`,
			`spec.konfig: unknown field "konfig"`,
			"spec.config.storage.files[0].mdoe: unused key mdoe",
			"spec.config.systemd.unitz: unused key unitz",
		},
		"99-butane-typos": {"storage.files[0].mdoe: Butane: line 10, column 7: unused key mdoe"},
	}
	for _, f := range []string{yml, bu} {
		mcs, err := machineconfig.Load([]string{f}, nil)
		if err != nil || len(mcs) != 1 {
			t.Fatalf("Load(%s) = %v, %v; want one MachineConfig", f, mcs, err)
		}
		mc := mcs[0]
		var got []string
		for _, w := range mc.Warnings {
			if w.File != f || w.MachineConfig != mc.Name || w.Reason != machineconfig.ReasonUnused {
				t.Errorf("%s: warning %+v: want file, MachineConfig and reason %q", f, w, machineconfig.ReasonUnused)
			}
			msg, _, _ := strings.Cut(w.Msg, ": Ignition ignores")
			msg, _, _ = strings.Cut(msg, ": a MachineConfig has")
			got = append(got, w.Field+": "+msg)
		}
		if diff := cmp.Diff(want[mc.Name], got); diff != "" {
			t.Errorf("%s: warnings (-want +got):\n%s", f, diff)
		}
		if m := mc.Ignition.Storage.Files[0].Mode; m != nil {
			t.Errorf("%s: the misspelt mode gave mode %o, want none (the default)", f, *m)
		}
	}
	bad := write("v2.yaml", "apiVersion: machineconfiguration.openshift.io/v2\nkind: MachineConfig\nmetadata:\n  name: 99-v2\n")
	if _, err := machineconfig.Load([]string{bad}, nil); err == nil || !strings.Contains(err.Error(), bad+": 99-v2: apiVersion: ") {
		t.Errorf("Load(apiVersion v2) = %v, want an error at apiVersion", err)
	}
}

// TestRefusalsWithInvalidConfig: a config Ignition does not validate still
// gets mcbake's refusals, at the fields Ignition did not name, so that
// every problem is reported at once.
func TestRefusalsWithInvalidConfig(t *testing.T) {
	_, err := machineconfig.Parse("bad.yaml", []byte(`kind: MachineConfig
metadata: {name: 99-bad}
spec:
  kernelType: bogus
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
        - {path: /etc/a, mode: 4644, contents: {source: "data:,x"}}
        - {path: /etc/b, append: [{source: "data:,y"}]}
        - {path: relative, contents: {source: "https://example.com/x"}}
`))
	var got []string
	for _, e := range strings.Split(fmt.Sprint(err), "\n") {
		field, _, _ := strings.Cut(strings.TrimPrefix(e, "bad.yaml: 99-bad: "), ": ")
		got = append(got, field)
	}
	sort.Strings(got)
	want := []string{"spec.config.storage.files[0].mode", "spec.config.storage.files[1].append", "spec.config.storage.files[2].contents.source", "spec.config.storage.files[2].path", "spec.kernelType"}
	if !slices.Equal(got, want) {
		t.Errorf("Parse: errors at %q, want one at each of %q:\n%v", got, want, err)
	}
}

// TestWarningsBounded: a config of many misspelt keys keeps MaxWarnings
// of them and counts the rest in one more; a key with control characters
// is quoted, so that every warning is one printable line.
func TestWarningsBounded(t *testing.T) {
	var keys []string
	for i := range machineconfig.MaxWarnings + 50 {
		keys = append(keys, fmt.Sprintf(`"k%d": 0`, i))
	}
	keys = append(keys, `"bad\nkey\u001b[2J": 0`)
	doc := `{"kind": "MachineConfig", "metadata": {"name": "99-many"}, "spec": {"config": {"ignition": {"version": "3.4.0"}}, ` + strings.Join(keys, ", ") + `}}`
	mcs, err := machineconfig.Parse("many.json", []byte(doc))
	if err != nil || len(mcs) != 1 {
		t.Fatalf("Parse = %v, %v", mcs, err)
	}
	ws := mcs[0].Warnings
	if len(ws) != machineconfig.MaxWarnings+1 || ws[len(ws)-1].Msg != "and 51 more fields nothing reads" {
		t.Fatalf("%d warnings, the last %q; want %d and the count of 51 more", len(ws), ws[len(ws)-1].Msg, machineconfig.MaxWarnings+1)
	}
	mcs, err = machineconfig.Parse("ctl.json", []byte(`{"kind": "MachineConfig", "metadata": {"name": "99-ctl"}, "spec": {"bad\nkey\u001b[2J": 0}}`))
	if err != nil || len(mcs[0].Warnings) != 1 {
		t.Fatalf("Parse = %v, %v", mcs, err)
	}
	if w := mcs[0].Warnings[0]; w.Field != `"spec.bad\nkey\x1b[2J"` || strings.ContainsAny(w.Error(), "\n\x1b") {
		t.Errorf("warning %q at %q, want the field quoted and one printable line", w.Error(), w.Field)
	}
}

// TestKeysMatchExactly: a key that matches a field only in another case
// is not read (the API server drops it, so the cluster never applies it),
// and is a warning.
func TestKeysMatchExactly(t *testing.T) {
	mcs, err := machineconfig.Parse("case.yaml", []byte(`kind: MachineConfig
metadata: {name: 99-case}
spec:
  KernelArguments: [nosmt]
  Config:
    ignition: {version: 3.4.0}
    storage: {files: [{path: /etc/fromConfig, contents: {source: "data:,x"}}]}
`))
	if err != nil || len(mcs) != 1 {
		t.Fatalf("Parse = %v, %v", mcs, err)
	}
	mc := mcs[0]
	if len(mc.Spec.KernelArguments) != 0 || len(mc.Ignition.Storage.Files) != 0 {
		t.Errorf("read KernelArguments %v and %d files from keys in another case, want none", mc.Spec.KernelArguments, len(mc.Ignition.Storage.Files))
	}
	var fields []string
	for _, w := range mc.Warnings {
		fields = append(fields, w.Field)
	}
	if want := []string{"spec.Config", "spec.KernelArguments"}; !slices.Equal(fields, want) {
		t.Errorf("warnings at %q, want %q", fields, want)
	}
}
