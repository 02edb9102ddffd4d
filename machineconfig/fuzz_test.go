package machineconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// FuzzLoad parses arbitrary bytes as a MachineConfig stream. Parsing must
// never panic; a stream that parses without error must hold only
// acceptable MachineConfigs, and their merged current config must parse
// back to the same Ignition config.
func FuzzLoad(f *testing.F) {
	f.Add([]byte(yamlMC))
	f.Add([]byte(mcJSON("00-a", ign("3.0.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}`))))
	f.Add([]byte("---\n# c\n---\n" + yamlMC + "---\n" + mcJSON("10-b", ign("3.3.0", `"systemd":{"units":[{"name":"b.service","mask":true}]}`))))
	f.Add([]byte(`{"kind":"List","items":[` + mcJSON("00-x", ign("3.1.0", `"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k"]}]}`)) + `]}`))
	f.Add([]byte(mcJSON("00-r", ign("3.5.0", `"storage":{"links":[{"path":"/etc/l","target":"../../x"}],"files":[{"path":"/etc/f","append":[{"source":"data:,x"}]}]}`))))
	f.Add([]byte("kind: MachineConfigList\nitems: [{kind: MachineConfig, metadata: {name: a}}]\n"))
	f.Add(fixtureSeed(f, "rendered-worker-none.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mcs, err := Parse("fuzz", data)
		for _, mc := range mcs {
			if mc.Name == "" || mc.File != "fuzz" {
				t.Fatalf("Parse() returned MachineConfig with name %q, file %q", mc.Name, mc.File)
			}
		}
		if err != nil || len(mcs) == 0 {
			return
		}
		for _, mc := range mcs {
			if rerr := Refusals(mc.Ignition); rerr != nil {
				t.Fatalf("Parse() = nil error for %s, but Refusals() = %v", mc.Name, rerr)
			}
		}
		m := Merge(mcs)
		b, err := m.JSON()
		if err != nil {
			t.Fatalf("Merged.JSON() = %v", err)
		}
		back, err := Parse("currentconfig", b)
		if err != nil || len(back) != 1 {
			t.Fatalf("Parse(Merged.JSON()) = %d MachineConfigs, %v; want 1, nil\n%s", len(back), err, b)
		}
		if diff := cmp.Diff(m.Ignition(), back[0].Ignition); diff != "" {
			t.Fatalf("Parse(Merged.JSON()).Ignition mismatch (-want +got):\n%s", diff)
		}
	})
}

// fixtureSeed returns a fixture cut down to its first three files and units
// (whole fixtures make every fuzz execution slow).
func fixtureSeed(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join("..", "testdata", "machineconfigs", name))
	if err != nil {
		f.Fatal(err)
	}
	var obj map[string]any
	if err := json.Unmarshal(b, &obj); err != nil {
		f.Fatal(err)
	}
	cfg := obj["spec"].(map[string]any)["config"].(map[string]any)
	storage := cfg["storage"].(map[string]any)
	storage["files"] = storage["files"].([]any)[:3]
	systemd := cfg["systemd"].(map[string]any)
	systemd["units"] = systemd["units"].([]any)[:3]
	out, err := json.Marshal(obj)
	if err != nil {
		f.Fatal(err)
	}
	return out
}
