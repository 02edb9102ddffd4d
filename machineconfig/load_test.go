package machineconfig

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	sigsyaml "sigs.k8s.io/yaml"
)

// mcJSON returns a MachineConfig object in JSON whose spec.config is the
// given JSON (an Ignition config).
func mcJSON(name, config string) string {
	return fmt.Sprintf(`{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":%q},"spec":{"config":%s}}`, name, config)
}

// ign returns an Ignition config of the given version with extra top-level
// members (JSON, without braces), e.g. `"storage":{...}`.
func ign(version, extra string) string {
	if extra == "" {
		return fmt.Sprintf(`{"ignition":{"version":%q}}`, version)
	}
	return fmt.Sprintf(`{"ignition":{"version":%q},%s}`, version, extra)
}

// writeFiles creates the files (name -> content) under dir; a name ending
// in "/" is a directory.
func writeFiles(t *testing.T, dir string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if strings.HasSuffix(name, "/") {
			if err := os.MkdirAll(p, 0o755); err != nil {
				t.Fatal(err)
			}
			continue
		}
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loaded is what the tests compare of a loaded MachineConfig.
type loaded struct {
	File, Name string
	Version    string
	Files      []string
	Units      []string
	KernelArgs []string
}

func summarize(mcs []*MachineConfig) []loaded {
	var out []loaded
	for _, mc := range mcs {
		l := loaded{File: mc.File, Name: mc.Name, Version: mc.Ignition.Ignition.Version, KernelArgs: mc.Spec.KernelArguments}
		for _, f := range mc.Ignition.Storage.Files {
			l.Files = append(l.Files, f.Path)
		}
		for _, u := range mc.Ignition.Systemd.Units {
			l.Units = append(l.Units, u.Name)
		}
		out = append(out, l)
	}
	return out
}

const yamlMC = `# a worker MachineConfig
apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata:
  name: 50-yaml
  labels:
    machineconfiguration.openshift.io/role: worker
spec:
  kernelArguments:
    - nosmt
  config:
    ignition:
      version: 3.4.0
    storage:
      files:
        - path: /etc/yaml.conf
          mode: 0644
          contents:
            source: data:,hello
    systemd:
      units:
        - name: yaml.service
          enabled: true
          contents: |
            [Service]
            ExecStart=/bin/true
            [Install]
            WantedBy=multi-user.target
`

// yamlWant2 is yamlMC as loaded from file.
func yamlWant2(file string) loaded {
	return loaded{File: file, Name: "50-yaml", Version: "3.5.0", Files: []string{"/etc/yaml.conf"}, Units: []string{"yaml.service"}, KernelArgs: []string{"nosmt"}}
}

// ocGetYAML is what `oc get machineconfigs -o yaml` prints: a List whose
// items carry the metadata the API server sets (managedFields, uid,
// resourceVersion, generation, creationTimestamp, ownerReferences) and a
// status.
const ocGetYAML = `apiVersion: v1
items:
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfig
  metadata:
    annotations:
      machineconfiguration.openshift.io/generated-by-controller-version: 5d3f2a0
    creationTimestamp: "2026-11-30T10:00:00Z"
    generation: 1
    labels:
      machineconfiguration.openshift.io/role: worker
    managedFields:
    - apiVersion: machineconfiguration.openshift.io/v1
      fieldsType: FieldsV1
      fieldsV1:
        f:metadata:
          f:labels:
            .: {}
            f:machineconfiguration.openshift.io/role: {}
        f:spec:
          .: {}
          f:config: {}
      manager: machine-config-operator
      operation: Update
      time: "2026-11-30T10:00:00Z"
    name: 00-worker
    ownerReferences:
    - apiVersion: machineconfiguration.openshift.io/v1
      blockOwnerDeletion: true
      controller: true
      kind: ControllerConfig
      name: machine-config-controller
      uid: 0b6f9d7c-0000-4000-8000-000000000001
    resourceVersion: "12345"
    uid: 7d0c8e4e-0000-4000-8000-000000000002
  spec:
    config:
      ignition:
        version: 3.5.0
      storage:
        files:
        - contents:
            source: data:,a
          mode: 0644
          overwrite: true
          path: /etc/a
    extensions: null
    fips: false
    kernelArguments: null
    kernelType: ""
    osImageURL: ""
  status: {}
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfig
  metadata:
    creationTimestamp: "2026-11-30T10:00:00Z"
    generation: 1
    labels:
      machineconfiguration.openshift.io/role: worker
    managedFields:
    - apiVersion: machineconfiguration.openshift.io/v1
      fieldsType: FieldsV1
      fieldsV1:
        f:spec: {}
      manager: kubectl-client-side-apply
      operation: Update
      time: "2026-11-30T10:00:00Z"
    name: 99-worker-ssh
    resourceVersion: "12346"
    uid: 7d0c8e4e-0000-4000-8000-000000000003
  spec:
    config:
      ignition:
        version: 3.2.0
kind: List
metadata:
  resourceVersion: ""
`

// ocGetJSON is what ` + "`oc get machineconfigs -o json`" + ` prints for the same
// objects (abridged the same way).
const ocGetJSON = `{
    "apiVersion": "v1",
    "items": [
        {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {
                "creationTimestamp": "2026-11-30T10:00:00Z",
                "generation": 1,
                "labels": {"machineconfiguration.openshift.io/role": "worker"},
                "managedFields": [{"apiVersion": "machineconfiguration.openshift.io/v1", "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {".": {}, "f:config": {}}}, "manager": "machine-config-operator",
                    "operation": "Update", "time": "2026-11-30T10:00:00Z"}],
                "name": "00-worker",
                "resourceVersion": "12345",
                "uid": "7d0c8e4e-0000-4000-8000-000000000002"
            },
            "spec": {
                "config": {"ignition": {"version": "3.5.0"},
                    "storage": {"files": [{"contents": {"source": "data:,a"}, "mode": 420, "overwrite": true, "path": "/etc/a"}]}},
                "extensions": null, "fips": false, "kernelArguments": null, "kernelType": "", "osImageURL": ""
            },
            "status": {}
        },
        {
            "apiVersion": "machineconfiguration.openshift.io/v1",
            "kind": "MachineConfig",
            "metadata": {"name": "99-worker-ssh", "labels": {"machineconfiguration.openshift.io/role": "worker"}, "resourceVersion": "12346"},
            "spec": {"config": {"ignition": {"version": "3.2.0"}}}
        }
    ],
    "kind": "List",
    "metadata": {"resourceVersion": ""}
}
`

func TestLoad(t *testing.T) {
	fileA := ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}`)
	yamlWant := loaded{File: "mc.yaml", Name: "50-yaml", Version: "3.5.0", Files: []string{"/etc/yaml.conf"}, Units: []string{"yaml.service"}, KernelArgs: []string{"nosmt"}}
	tests := []struct {
		name  string
		files map[string]string
		args  []string
		want  []loaded
	}{{
		name:  "json single",
		files: map[string]string{"a.json": mcJSON("00-a", fileA)},
		args:  []string{"a.json"},
		want:  []loaded{{File: "a.json", Name: "00-a", Version: "3.5.0", Files: []string{"/etc/a"}}},
	}, {
		name:  "yaml single with spec.config as an object",
		files: map[string]string{"mc.yaml": yamlMC},
		args:  []string{"mc.yaml"},
		want:  []loaded{yamlWant},
	}, {
		name: "kind List",
		files: map[string]string{"l.json": `{"apiVersion":"v1","kind":"List","items":[` +
			mcJSON("20-b", ign("3.2.0", "")) + "," + mcJSON("10-a", fileA) + `]}`},
		args: []string{"l.json"},
		want: []loaded{
			{File: "l.json", Name: "10-a", Version: "3.5.0", Files: []string{"/etc/a"}},
			{File: "l.json", Name: "20-b", Version: "3.5.0"},
		},
	}, {
		name: "kind MachineConfigList in YAML",
		files: map[string]string{"l.yaml": `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfigList
items:
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfig
  metadata: {name: 01-x}
  spec: {config: {ignition: {version: 3.1.0}}}
- apiVersion: machineconfiguration.openshift.io/v1
  kind: MachineConfig
  metadata: {name: 02-y}
  spec: {config: {ignition: {version: 3.3.0}}, kernelArguments: [a=1]}
`},
		args: []string{"l.yaml"},
		want: []loaded{
			{File: "l.yaml", Name: "01-x", Version: "3.5.0"},
			{File: "l.yaml", Name: "02-y", Version: "3.5.0", KernelArgs: []string{"a=1"}},
		},
	}, {
		name: "multi-document yaml with separators and comment-only documents",
		files: map[string]string{"m.yaml": "---\n# only a comment\n---\n" + yamlMC +
			"---   \n   # indented comment\n\n---\n" + mcJSON("40-json-doc", fileA) + "\n---\n"},
		args: []string{"m.yaml"},
		want: []loaded{
			{File: "m.yaml", Name: "40-json-doc", Version: "3.5.0", Files: []string{"/etc/a"}},
			{File: "m.yaml", Name: "50-yaml", Version: "3.5.0", Files: []string{"/etc/yaml.conf"}, Units: []string{"yaml.service"}, KernelArgs: []string{"nosmt"}},
		},
	}, {
		name: "multi-document yaml with CRLF line ends",
		files: map[string]string{"crlf.yaml": strings.ReplaceAll("kind: MachineConfig\nmetadata:\n  name: 01-crlf\n---\n"+
			"kind: MachineConfig\nmetadata:\n  name: 02-crlf\n", "\n", "\r\n")},
		args: []string{"crlf.yaml"},
		want: []loaded{
			{File: "crlf.yaml", Name: "01-crlf", Version: "3.5.0"},
			{File: "crlf.yaml", Name: "02-crlf", Version: "3.5.0"},
		},
	}, {
		name: "a separator with a comment starts the next document (it used to drop it)",
		files: map[string]string{"c.yaml": "kind: MachineConfig\nmetadata: {name: 01-a}\n--- # the second one\n" +
			"kind: MachineConfig\nmetadata: {name: 02-b}\n---\t# a tab, then a comment\nkind: MachineConfig\nmetadata: {name: 03-c}\n"},
		args: []string{"c.yaml"},
		want: []loaded{
			{File: "c.yaml", Name: "01-a", Version: "3.5.0"},
			{File: "c.yaml", Name: "02-b", Version: "3.5.0"},
			{File: "c.yaml", Name: "03-c", Version: "3.5.0"},
		},
	}, {
		name: "a document on the separator line",
		files: map[string]string{"i.yaml": "--- {kind: MachineConfig, metadata: {name: 01-inline}}\n--- " +
			mcJSON("02-json-inline", fileA) + "\n"},
		args: []string{"i.yaml"},
		want: []loaded{
			{File: "i.yaml", Name: "01-inline", Version: "3.5.0"},
			{File: "i.yaml", Name: "02-json-inline", Version: "3.5.0", Files: []string{"/etc/a"}},
		},
	}, {
		name: "document end markers",
		files: map[string]string{"e.yaml": "kind: MachineConfig\nmetadata: {name: 01-a}\n...\n" +
			"---\nkind: MachineConfig\nmetadata: {name: 02-b}\n...\n# trailing comment\n"},
		args: []string{"e.yaml"},
		want: []loaded{
			{File: "e.yaml", Name: "01-a", Version: "3.5.0"},
			{File: "e.yaml", Name: "02-b", Version: "3.5.0"},
		},
	}, {
		name:  "a byte-order mark, CRLF line ends and a separator with a comment",
		files: map[string]string{"bom.yaml": "\ufeff" + strings.ReplaceAll(yamlMC+"--- # next\n"+"kind: MachineConfig\nmetadata: {name: 60-bom}\n", "\n", "\r\n")},
		args:  []string{"bom.yaml"},
		want:  []loaded{yamlWant2("bom.yaml"), {File: "bom.yaml", Name: "60-bom", Version: "3.5.0"}},
	}, {
		name:  "a byte-order mark in JSON",
		files: map[string]string{"bom.json": "\ufeff" + mcJSON("00-a", fileA)},
		args:  []string{"bom.json"},
		want:  []loaded{{File: "bom.json", Name: "00-a", Version: "3.5.0", Files: []string{"/etc/a"}}},
	}, {
		name:  "oc get machineconfigs -o yaml: a List with managedFields, status and server metadata",
		files: map[string]string{"oc.yaml": ocGetYAML},
		args:  []string{"oc.yaml"},
		want: []loaded{
			{File: "oc.yaml", Name: "00-worker", Version: "3.5.0", Files: []string{"/etc/a"}},
			{File: "oc.yaml", Name: "99-worker-ssh", Version: "3.5.0"},
		},
	}, {
		name:  "oc get machineconfigs -o json",
		files: map[string]string{"oc.json": ocGetJSON},
		args:  []string{"oc.json"},
		want: []loaded{
			{File: "oc.json", Name: "00-worker", Version: "3.5.0", Files: []string{"/etc/a"}},
			{File: "oc.json", Name: "99-worker-ssh", Version: "3.5.0"},
		},
	}, {
		name: "directory: yaml, yml and json files only, not recursing",
		files: map[string]string{
			"d/b.yml":        strings.Replace(yamlMC, "50-yaml", "30-yml", 1),
			"d/a.json":       mcJSON("90-json", ign("3.0.0", "")),
			"d/c.YAML":       mcJSON("10-upper", ign("3.5.0", "")),
			"d/notes.txt":    "not a MachineConfig",
			"d/sub/x.yaml":   mcJSON("00-nested", ign("3.5.0", "")),
			"d/dir.yaml/":    "",
			"d/.hidden.json": mcJSON("05-hidden", ign("3.5.0", "")),
		},
		args: []string{"d"},
		want: []loaded{
			{File: "d/.hidden.json", Name: "05-hidden", Version: "3.5.0"},
			{File: "d/c.YAML", Name: "10-upper", Version: "3.5.0"},
			{File: "d/b.yml", Name: "30-yml", Version: "3.5.0", Files: []string{"/etc/yaml.conf"}, Units: []string{"yaml.service"}, KernelArgs: []string{"nosmt"}},
			{File: "d/a.json", Name: "90-json", Version: "3.5.0"},
		},
	}, {
		name: "several paths, sorted by name",
		files: map[string]string{
			"z.json":  mcJSON("00-first", ign("3.5.0", "")),
			"mc.yaml": yamlMC,
		},
		args: []string{"mc.yaml", "z.json"},
		want: []loaded{{File: "z.json", Name: "00-first", Version: "3.5.0"}, yamlWant},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			writeFiles(t, ".", tt.files)
			mcs, err := Load(tt.args, nil)
			if err != nil {
				t.Fatalf("Load(%q) = %v", tt.args, err)
			}
			if diff := cmp.Diff(tt.want, summarize(mcs)); diff != "" {
				t.Errorf("Load(%q) mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
}

func TestLoadStdin(t *testing.T) {
	in := strings.NewReader(yamlMC + "---\n" + mcJSON("00-first", ign("3.5.0", "")))
	mcs, err := Load([]string{Stdin}, in)
	if err != nil {
		t.Fatalf("Load(-) = %v", err)
	}
	want := []loaded{
		{File: "<stdin>", Name: "00-first", Version: "3.5.0"},
		{File: "<stdin>", Name: "50-yaml", Version: "3.5.0", Files: []string{"/etc/yaml.conf"}, Units: []string{"yaml.service"}, KernelArgs: []string{"nosmt"}},
	}
	if diff := cmp.Diff(want, summarize(mcs)); diff != "" {
		t.Errorf("Load(-) mismatch (-want +got):\n%s", diff)
	}
}

func TestLoadIgnitionVersions(t *testing.T) {
	for _, v := range []string{"3.0.0", "3.1.0", "3.2.0", "3.3.0", "3.4.0", "3.5.0"} {
		t.Run(v, func(t *testing.T) {
			cfg := ign(v, `"storage":{"files":[{"path":"/etc/v","mode":420,"contents":{"source":"data:,v"}}]},`+
				`"systemd":{"units":[{"name":"v.service","enabled":true,"contents":"[Unit]\n"}]}`)
			mcs, err := Parse("v.json", []byte(mcJSON("00-v", cfg)))
			if err != nil {
				t.Fatalf("Parse(spec %s) = %v", v, err)
			}
			want := []loaded{{File: "v.json", Name: "00-v", Version: "3.5.0", Files: []string{"/etc/v"}, Units: []string{"v.service"}}}
			if diff := cmp.Diff(want, summarize(mcs)); diff != "" {
				t.Errorf("Parse(spec %s) mismatch (-want +got):\n%s", v, diff)
			}
			if got := *mcs[0].Ignition.Storage.Files[0].Contents.Source; got != "data:,v" {
				t.Errorf("Parse(spec %s) file source = %q, want %q", v, got, "data:,v")
			}
		})
	}
}

func TestLoadErrors(t *testing.T) {
	tests := []struct {
		name  string
		files map[string]string
		args  []string
		want  string
		// wantV2 is want where encoding/json runs on encoding/json/v2
		// (jsonV2), when its words differ.
		wantV2 string
	}{{
		name: "duplicate names across files",
		files: map[string]string{
			"a.json": mcJSON("00-dup", ign("3.5.0", "")),
			"b.json": mcJSON("00-dup", ign("3.5.0", "")),
		},
		args: []string{"a.json", "b.json"},
		want: "b.json: 00-dup: metadata.name: MachineConfig name already defined in a.json",
	}, {
		name: "duplicate names in one List",
		files: map[string]string{"l.json": `{"kind":"List","items":[` +
			mcJSON("00-dup", ign("3.5.0", "")) + "," + mcJSON("00-dup", ign("3.4.0", "")) + `]}`},
		args: []string{"l.json"},
		want: "l.json: 00-dup: metadata.name: MachineConfig name already defined in l.json",
	}, {
		name:  "unsupported spec version",
		files: map[string]string{"a.json": mcJSON("00-a", ign("9.9.9", ""))},
		args:  []string{"a.json"},
		want:  "a.json: 00-a: spec.config.ignition.version: unsupported config version",
	}, {
		name:  "spec 2.3 config (the MCO converts only up to 2.2)",
		files: map[string]string{"a.json": mcJSON("00-a", ign("2.3.0", ""))},
		args:  []string{"a.json"},
		want:  "a.json: 00-a: spec.config.ignition.version: unsupported config version",
	}, {
		name:  "experimental spec",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.6.0-experimental", ""))},
		args:  []string{"a.json"},
		want:  "a.json: 00-a: spec.config.ignition.version: unsupported config version",
	}, {
		name:  "unparsable spec version",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.1", ""))},
		args:  []string{"a.json"},
		want:  "a.json: 00-a: spec.config.ignition.version: invalid config version (couldn't parse)",
	}, {
		name: "duplicate file paths",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.1.0",
			`"storage":{"files":[{"path":"/etc/a"},{"path":"/etc/b"},{"path":"/etc/a"}]}`))},
		args: []string{"a.json"},
		want: "a.json: 00-a: spec.config.storage.files[2]: duplicate entry defined",
	}, {
		name: "file and directory at one path",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.5.0",
			`"storage":{"files":[{"path":"/etc/a"}],"directories":[{"path":"/etc/a"}]}`))},
		args: []string{"a.json"},
		want: "a.json: 00-a: spec.config.storage.files[0]: duplicate entry defined",
	}, {
		name: "file under a link of the same config",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.5.0",
			`"storage":{"files":[{"path":"/etc/l/f"}],"links":[{"path":"/etc/l","target":"/etc/x"}]}`))},
		args: []string{"a.json"},
		want: "a.json: 00-a: spec.config.storage.files[0]: file path includes link in config",
	}, {
		name: "several invalid fields in one config",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.5.0",
			`"storage":{"files":[{"path":"/etc/a","user":{"id":1,"name":"x"}},{"path":"/etc/b","contents":{"source":"data:,b","verification":{"hash":"md5-00"}}}]}`))},
		args: []string{"a.json"},
		want: "a.json: 00-a: spec.config.storage.files[0].user: cannot set both id and name\n" +
			"a.json: 00-a: spec.config.storage.files[1].contents.verification.hash: unrecognized hash function",
	}, {
		name:  "not a MachineConfig",
		files: map[string]string{"a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n"},
		args:  []string{"a.yaml"},
		want:  `a.yaml: cm: kind: kind "ConfigMap" is not MachineConfig (or a List of them)`,
	}, {
		name:  "no name",
		files: map[string]string{"a.yaml": "kind: MachineConfig\nspec: {}\n"},
		args:  []string{"a.yaml"},
		want:  "a.yaml: <unnamed>: metadata.name: MachineConfig has no name",
	}, {
		name: "a value of the wrong type is reported at its field",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.5.0",
			`"storage":{"files":[{"path":"/etc/a"},{"path":"/etc/b","mode":"0644"}]},"systemd":{"units":[{"name":"u.service","dropins":[{"name":"d.conf"}]}]}`))},
		args:   []string{"a.json"},
		want:   "a.json: 00-a: spec.config.storage.files[1].mode: json: cannot unmarshal string into Go struct field File.storage.files.FileEmbedded1.mode of type int",
		wantV2: "a.json: 00-a: spec.config.storage.files[1].mode: json: cannot unmarshal string into Go struct field Config.storage.files.1.mode of type int",
	}, {
		name: "an object where a string belongs",
		files: map[string]string{"a.json": mcJSON("00-a", ign("3.5.0",
			`"storage":{"files":[{"path":"/etc/a","contents":{"source":{"x":"y"}}}]}`))},
		args:   []string{"a.json"},
		want:   "a.json: 00-a: spec.config.storage.files[0].contents.source: json: cannot unmarshal object into Go struct field Resource.storage.files.FileEmbedded1.contents.source of type string",
		wantV2: "a.json: 00-a: spec.config.storage.files[0].contents.source: json: cannot unmarshal object into Go struct field Config.storage.files.0.contents.source of type string",
	}, {
		name:   "a value of the wrong type in a unit",
		files:  map[string]string{"a.yaml": "kind: MachineConfig\nmetadata: {name: 00-a}\nspec:\n  config:\n    ignition: {version: 3.4.0}\n    systemd:\n      units: [{name: u.service, dropins: [{name: d.conf, contents: 5}]}]\n"},
		args:   []string{"a.yaml"},
		want:   "a.yaml: 00-a: spec.config.systemd.units[u.service].dropins[d.conf].contents: json: cannot unmarshal number into Go struct field Dropin.systemd.units.dropins.contents of type string",
		wantV2: "a.yaml: 00-a: spec.config.systemd.units[u.service].dropins[d.conf].contents: json: cannot unmarshal number into Go struct field Config.systemd.units.0.dropins.0.contents of type string",
	}, {
		name:  "a List item that is not an object",
		files: map[string]string{"a.yaml": "apiVersion: v1\nkind: List\nitems: [{kind: MachineConfig, metadata: {name: a}}, 42]\n"},
		args:  []string{"a.yaml"},
		want:  "a.yaml: document 1: items[1]: not an object: 42",
	}, {
		name:  "a name with a line break",
		files: map[string]string{"a.yaml": "kind: MachineConfig\nmetadata: {name: \"a\\nb\"}\nspec: {}\n"},
		args:  []string{"a.yaml"},
		want:  `a.yaml: "a\nb": metadata.name: name "a\nb" is not one the API server accepts: it must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit)`,
	}, {
		name:  "a name with a slash",
		files: map[string]string{"a.yaml": "kind: MachineConfig\nmetadata: {name: ../../a}\nspec: {}\n"},
		args:  []string{"a.yaml"},
		want:  `a.yaml: "../../a": metadata.name: name "../../a" is not one the API server accepts: it must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit)`,
	}, {
		name:  "a name too long",
		files: map[string]string{"a.yaml": "kind: MachineConfig\nmetadata: {name: " + strings.Repeat("a", 254) + "}\nspec: {}\n"},
		args:  []string{"a.yaml"},
		want:  `a.yaml: "` + strings.Repeat("a", 254) + `": metadata.name: name "` + strings.Repeat("a", 254) + `" is not one the API server accepts: 254 characters, more than 253`,
	}, {
		name:  "only comments",
		files: map[string]string{"a.yaml": "# nothing here\n---\n# nor here\n"},
		args:  []string{"a.yaml"},
		want:  "no MachineConfig found in a.yaml",
	}, {
		name:  "directory without config files",
		files: map[string]string{"d/readme.txt": "x"},
		args:  []string{"d"},
		want:  "d: no *.yaml, *.yml, *.json or *.bu file in directory",
	}, {
		name: "no paths",
		want: "no MachineConfig given (a file, a directory, or - for stdin)",
	}, {
		name: "missing file",
		args: []string{"missing.yaml"},
		want: "stat missing.yaml: no such file or directory",
	}, {
		name: "errors from several files are all reported",
		files: map[string]string{
			"a.json": mcJSON("00-a", ign("9.9.9", "")),
			"b.yaml": "kind: MachineConfig\nspec: {}\n",
			"c.json": mcJSON("00-c", ign("3.5.0", "")),
		},
		args: []string{"a.json", "b.yaml", "c.json"},
		want: "a.json: 00-a: spec.config.ignition.version: unsupported config version\n" +
			"b.yaml: <unnamed>: metadata.name: MachineConfig has no name",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			writeFiles(t, ".", tt.files)
			mcs, err := Load(tt.args, nil)
			if err == nil {
				t.Fatalf("Load(%q) = %d MachineConfigs, want error %q", tt.args, len(mcs), tt.want)
			}
			want := tt.want
			if jsonV2 && tt.wantV2 != "" {
				want = tt.wantV2
			}
			if got := err.Error(); got != want {
				t.Errorf("Load(%q) = %q, want %q", tt.args, got, want)
			}
			if mcs != nil {
				t.Errorf("Load(%q) returned %d MachineConfigs with an error, want none", tt.args, len(mcs))
			}
		})
	}
}

// TestParseSyntaxErrors checks errors whose text comes from the YAML and
// JSON libraries: only the part mcbake adds is compared exactly.
func TestParseSyntaxErrors(t *testing.T) {
	tests := []struct {
		name, data, wantPrefix string
	}{
		{"yaml syntax in the second document", mcJSON("00-a", ign("3.5.0", "")) + "\n---\nkind: [unclosed\n", "s.yaml: document 2: "},
		{"scalar document", "just a string\n", "s.yaml: document 1: not an object: "},
		{"spec.config not an object", mcJSON("00-a", `"a string"`), "s.yaml: 00-a: spec.config: "},
		{"wrongly typed ignition field", mcJSON("00-a", ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","mode":"0644"}]}`)), "s.yaml: 00-a: spec.config.storage.files[0].mode: "},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("s.yaml", []byte(tt.data))
			if err == nil || !strings.HasPrefix(err.Error(), tt.wantPrefix) {
				t.Errorf("Parse(%q) = %v, want an error starting with %q", tt.data, err, tt.wantPrefix)
			}
		})
	}
}

func TestParseDigest(t *testing.T) {
	fromYAML, err := Parse("mc.yaml", []byte(yamlMC))
	if err != nil {
		t.Fatal(err)
	}
	asJSON := `{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig",
	  "metadata":{"labels":{"machineconfiguration.openshift.io/role":"worker"},"name":"50-yaml"},
	  "spec":{"kernelArguments":["nosmt"],"config":{"ignition":{"version":"3.4.0"},
	    "storage":{"files":[{"path":"/etc/yaml.conf","mode":420,"contents":{"source":"data:,hello"}}]},
	    "systemd":{"units":[{"name":"yaml.service","enabled":true,
	      "contents":"[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"}]}}}}`
	fromJSON, err := Parse("mc.json", []byte(asJSON))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := fromJSON[0].Digest, fromYAML[0].Digest; got != want {
		t.Errorf("Parse(JSON form).Digest = %s, want %s (the YAML form's)", got, want)
	}
	if !strings.HasPrefix(string(fromYAML[0].Digest), "sha256:") || len(fromYAML[0].Digest) != len("sha256:")+64 {
		t.Errorf("Parse(yaml).Digest = %q, want sha256:<64 hex>", fromYAML[0].Digest)
	}
	changed, err := Parse("mc.yaml", []byte(strings.Replace(yamlMC, "nosmt", "smt", 1)))
	if err != nil {
		t.Fatal(err)
	}
	if changed[0].Digest == fromYAML[0].Digest {
		t.Errorf("Parse(changed).Digest = %s, the same as before the change", changed[0].Digest)
	}
}

// fieldErrors returns every *FieldError in err's tree, in order.
func fieldErrors(err error) []FieldError {
	var out []FieldError
	for _, e := range Errors(err) {
		var fe *FieldError
		if errors.As(e, &fe) {
			out = append(out, *fe)
		}
	}
	return out
}

// TestIgnitionErrorsNameUnits: ignition reports units by index; mcbake
// names them, as in every other field path.
func TestIgnitionErrorsNameUnits(t *testing.T) {
	_, err := Parse("units.yaml", []byte(`kind: MachineConfig
metadata: {name: 99-units}
spec:
  config:
    ignition: {version: 3.5.0}
    systemd:
      units:
      - {name: a.service, contents: "[Unit]\n"}
      - {name: b.service, dropins: [{name: 10-x.conf, contents: "x"}, {name: 10-x.conf, contents: "y"}]}
`))
	want := "units.yaml: 99-units: spec.config.systemd.units[b.service].dropins[10-x.conf]"
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Parse() = %v, want an error at %s", err, want)
	}
}

// TestDocumentsJSONIsYAMLToJSON: a document's JSON, which digests are
// taken of, is byte for byte what sigs.k8s.io/yaml's YAMLToJSON (what
// kubectl and oc apply) makes of it, for every fixture and for YAML 1.1
// scalars.
func TestDocumentsJSONIsYAMLToJSON(t *testing.T) {
	inputs := map[string][]byte{
		"yaml 1.1 scalars": []byte("kind: MachineConfig\nmetadata: {name: x}\nspec:\n  mode: 0644\n  on: yes\n  n: ~\n  f: 1.5e3\n  big: 9007199254740993\n  s: '0644'\n  1: int key\n"),
		"yamlMC":           []byte(yamlMC),
		"oc get -o json":   []byte(ocGetJSON),
	}
	fixtures, err := filepath.Glob("../testdata/machineconfigs/*.json")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range fixtures {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs[f] = b
	}
	for name, in := range inputs {
		want, err := sigsyaml.YAMLToJSON(in)
		if err != nil {
			t.Fatalf("%s: YAMLToJSON: %v", name, err)
		}
		docs, err := Documents(in)
		if err != nil || len(docs) != 1 {
			t.Fatalf("Documents(%s) = %d documents, %v; want 1", name, len(docs), err)
		}
		if got := string(docs[0].JSON); got != string(want) {
			t.Errorf("Documents(%s) JSON = %s, want %s", name, got, want)
		}
	}
}

// TestReadInputsTotal: the inputs are bounded together, not one by one:
// files that fit alone but not together are refused at the one that goes
// over, before it is read.
func TestReadInputsTotal(t *testing.T) {
	dir := t.TempDir()
	for name, size := range map[string]int64{"a.yaml": MaxInput - 1<<20, "b.yaml": 2 << 20} {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(p, size); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := ReadInputs([]string{filepath.Join(dir, "b.yaml")}, nil); err != nil {
		t.Fatalf("ReadInputs(b.yaml) = %v, want it read", err)
	}
	_, err := ReadInputs([]string{dir}, nil)
	want := filepath.Join(dir, "b.yaml") + ": the inputs are larger than 64 MiB together, with the files before it: no pool's MachineConfigs are that large"
	if err == nil || err.Error() != want {
		t.Errorf("ReadInputs(a.yaml, b.yaml) = %v, want %s", err, want)
	}
}

// The MachineConfig the machine-config-daemon stores on a node
// (/etc/machine-config-daemon/currentconfig) has no apiVersion and no
// kind, and carries server metadata: it is the same MachineConfig as the
// rendered object it came from.
func TestLoadStoredByDaemon(t *testing.T) {
	stored, err := Load([]string{"../testdata/currentconfig/worker-aws.json"}, nil)
	if err != nil {
		t.Fatalf("the MCD's stored form: %v", err)
	}
	rendered, err := Load([]string{"../testdata/machineconfigs/rendered-worker-aws.json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) != 1 || stored[0].Name != rendered[0].Name {
		t.Fatalf("got %d MachineConfigs (%v), want one named %s", len(stored), stored, rendered[0].Name)
	}
	if diff := cmp.Diff(rendered[0].Ignition, stored[0].Ignition); diff != "" {
		t.Errorf("the stored form's Ignition config differs (-rendered +stored):\n%s", diff)
	}
	if len(stored[0].Warnings) != 0 {
		t.Errorf("warnings on the MCD's stored form: %v", stored[0].Warnings)
	}
}

// Objects of no kind are MachineConfigs only when they have a spec: a
// raw Ignition config gets a hint.
func TestLoadNoKind(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"ignition":{"version":"3.4.0"},"storage":{}}`, `i.json: <unnamed>: kind: this is an Ignition config, not a MachineConfig: put it in a MachineConfig's spec.config`},
		{`{"metadata":{"name":"x"}}`, `i.json: x: kind: kind "" is not MachineConfig (or a List of them)`},
		{`{"apiVersion":"v1","metadata":{"name":"x"},"spec":{}}`, `i.json: x: kind: kind "" is not MachineConfig (or a List of them)`},
	} {
		_, err := Parse("i.json", []byte(tc.doc))
		if err == nil || err.Error() != tc.want {
			t.Errorf("Parse(%s): %v, want %s", tc.doc, err, tc.want)
		}
	}
}

// TestLoadDirectorySkipsOtherKinds: a GitOps directory holds
// KubeletConfigs and MachineConfigPools beside the MachineConfigs: they
// are skipped, each told to Skipped with its kind; named as a file, one is
// an error.
func TestLoadDirectorySkipsOtherKinds(t *testing.T) {
	dir := t.TempDir()
	writeFiles(t, dir, map[string]string{
		"a.json":  mcJSON("00-a", ign("3.5.0", "")),
		"kc.yaml": "apiVersion: machineconfiguration.openshift.io/v1\nkind: KubeletConfig\nmetadata:\n  name: kc\nspec:\n  kubeletConfig: {maxPods: 500}\n",
		"pools.yaml": "apiVersion: machineconfiguration.openshift.io/v1\nkind: MachineConfigPool\nmetadata:\n  name: infra\n---\n" +
			"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: cm\n",
	})
	var skipped []string
	mcs, err := LoadWith([]string{dir}, nil, LoadOptions{Skipped: func(fe *FieldError) {
		skipped = append(skipped, filepath.Base(fe.File)+" "+fe.MachineConfig+" "+fe.Kind)
	}})
	if err != nil || len(mcs) != 1 || mcs[0].Name != "00-a" {
		t.Fatalf("LoadWith(dir) = %v, %v; want 00-a", mcs, err)
	}
	if want := []string{"kc.yaml kc KubeletConfig", "pools.yaml infra MachineConfigPool", "pools.yaml cm ConfigMap"}; !slices.Equal(skipped, want) {
		t.Errorf("skipped %q, want %q", skipped, want)
	}
	_, err = LoadWith([]string{filepath.Join(dir, "a.json"), filepath.Join(dir, "kc.yaml")}, nil, LoadOptions{Skipped: func(*FieldError) { t.Error("a file given is skipped") }})
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Reason != ReasonOtherKind || !strings.Contains(err.Error(), `kind "KubeletConfig" is not MachineConfig`) {
		t.Errorf("LoadWith(kc.yaml as a file) = %v, want the other-kind error", err)
	}
	if hint := OtherKindHint("MachineConfigPool"); !strings.Contains(hint, "--pool") {
		t.Errorf("OtherKindHint(MachineConfigPool) = %q", hint)
	}
}
