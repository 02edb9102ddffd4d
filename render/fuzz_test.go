package render

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"testing"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// FuzzRender parses arbitrary bytes as MachineConfigs, merges whatever
// parsed (refusals included: Render must not rely on Load's checks) and
// renders with an empty root. It must never panic, and a successful render
// must give a manifest whose paths are absolute, clean and unique, whose
// every entry has a directory entry as parent, and whose encoding
// round-trips.
func FuzzRender(f *testing.F) {
	f.Add([]byte(mcDoc("00-a", `"storage":{"files":[{"path":"/etc/a","mode":384,"contents":{"source":"data:,a"}}],`+
		`"directories":[{"path":"/etc/d"}],"links":[{"path":"/etc/l","target":"a"},{"path":"/etc/h","target":"/etc/a","hard":true}]}`)))
	f.Add([]byte(mcDoc("00-u", `"systemd":{"units":[{"name":"a.service","enabled":true,"contents":"[Install]\nWantedBy=multi-user.target\nAlias=b.service\nAlso=c.service\n"},`+
		`{"name":"c.service","contents":"[Install]\nRequiredBy=x.target\n"},{"name":"t@.service","enabled":true,"contents":"[Install]\nWantedBy=a.target\nDefaultInstance=i\n"},`+
		`{"name":"m.service","mask":true},{"name":"d.service","dropins":[{"name":"1.conf","contents":"[Service]\n"}]}]}`)))
	f.Add([]byte(mcDoc("00-g", fmt.Sprintf(`"storage":{"files":[{"path":"/usr/local/bin/x","contents":{"compression":"gzip","source":%q}}]}`,
		base64URL(gz(f, []byte("gzipped")))))))
	f.Add([]byte(mcDoc("00-a", `"storage":{"files":[{"path":"/etc/x"}]}`) + "\n---\n" + mcDoc("01-b", `"storage":{"directories":[{"path":"/etc/x"}]}`)))
	f.Add([]byte(mcDoc("00-r", `"storage":{"files":[{"path":"/","append":[{"source":"data:,x"}]}],"links":[{"path":"/etc/l","target":"../../x"}]}`)))
	f.Add(fixtureSeed(f, "rendered-master-vsphere.json"))
	f.Fuzz(func(t *testing.T, data []byte) {
		mcs, _ := machineconfig.Parse("fuzz.yaml", data)
		if len(mcs) == 0 {
			return
		}
		res, err := Render(context.Background(), machineconfig.Merge(mcs), nil)
		if err != nil {
			return
		}
		m := res.Manifest(mcs)
		b, err := manifest.Marshal(m)
		if err != nil {
			t.Fatalf("manifest.Marshal() = %v", err)
		}
		types := map[string]manifest.Type{}
		for _, e := range m.Entries {
			if !path.IsAbs(e.Path) || path.Clean(e.Path) != e.Path || e.Path == "/" {
				t.Fatalf("entry path %q is not absolute and clean", e.Path)
			}
			if _, dup := types[e.Path]; dup {
				t.Fatalf("two entries for %s", e.Path)
			}
			types[e.Path] = e.Type
		}
		for _, e := range m.Entries {
			if d := path.Dir(e.Path); d != "/" && types[d] != manifest.Directory {
				t.Fatalf("entry %s: parent %s is a %q entry, want a directory", e.Path, d, types[d])
			}
		}
		back, err := manifest.Unmarshal(b)
		if err != nil {
			t.Fatalf("manifest.Unmarshal(manifest.Marshal()) = %v", err)
		}
		again, err := manifest.Marshal(back)
		if err != nil || string(again) != string(b) {
			t.Fatalf("manifest encoding does not round-trip (%v)", err)
		}
	})
}

// fixtureSeed returns a fixture cut down to its first three files and units
// (whole fixtures make every fuzz execution slow).
func fixtureSeed(f *testing.F, name string) []byte {
	b, err := os.ReadFile(filepath.Join(fixtureDir, name))
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
