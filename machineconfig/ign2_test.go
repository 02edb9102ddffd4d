package machineconfig

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// ign2Golden is what a golden file holds for one spec 2 MachineConfig.
type ign2Golden struct {
	// Ignition is the converted config.
	Ignition any `json:"ignition"`
	// Sources are the fields merged items record, by item.
	Sources map[string]string `json:"sources"`
}

// TestIgnition2Golden converts the spec 2 MachineConfigs of testdata/ign2
// as the MCO does and compares the result with the golden files.
func TestIgnition2Golden(t *testing.T) {
	all, err := filepath.Glob("testdata/ign2/*.*")
	if err != nil {
		t.Fatal(err)
	}
	var inputs []string
	for _, p := range all {
		if ext := filepath.Ext(p); (ext == ".yaml" || ext == ".json") && !strings.HasSuffix(p, ".golden.json") {
			inputs = append(inputs, p)
		}
	}
	if len(inputs) != 3 {
		t.Fatalf("found %d inputs in testdata/ign2, want 3", len(inputs))
	}
	for _, in := range inputs {
		name := strings.TrimSuffix(filepath.Base(in), filepath.Ext(in))
		t.Run(name, func(t *testing.T) {
			mcs, err := Load([]string{in}, nil)
			if err != nil {
				t.Fatalf("Load(%s) = %v", in, err)
			}
			got, err := json.MarshalIndent(ign2GoldenOf(t, mcs[0]), "", "  ")
			if err != nil {
				t.Fatal(err)
			}
			got = append(got, '\n')
			golden := filepath.Join("testdata", "ign2", name+".golden.json")
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
				t.Errorf("Load(%s) converted config differs from %s (go test -update rewrites it):\n%s", in, golden, got)
			}
		})
	}
}

func ign2GoldenOf(t *testing.T, mc *MachineConfig) ign2Golden {
	b, err := json.Marshal(mc.Ignition)
	if err != nil {
		t.Fatal(err)
	}
	var cfg any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	g := ign2Golden{Ignition: cfg, Sources: map[string]string{}}
	m := Merge([]*MachineConfig{mc})
	for _, f := range m.Files {
		g.Sources["file "+f.Path] = f.Source.Field
	}
	for _, d := range m.Directories {
		g.Sources["directory "+d.Path] = d.Source.Field
	}
	for _, l := range m.Links {
		g.Sources["link "+l.Path] = l.Source.Field
	}
	for _, u := range m.Units {
		g.Sources["unit "+u.Name] = u.Source.Field
	}
	for _, k := range m.SSHKeys {
		g.Sources["ssh key "+k.Key] = k.Source.Field
	}
	return g
}

// TestIgnition2Refusals: what the converter, the MCO's folding or the
// machine-config-daemon refuses in a spec 2 config, at the field as written.
func TestIgnition2Refusals(t *testing.T) {
	tests := []struct {
		name, config, want string
	}{{
		name:   "networkd units",
		config: `{"ignition":{"version":"2.2.0"},"networkd":{"units":[{"name":"eth0.network","contents":"[Match]\n"}]}}`,
		want:   "spec.config.networkd.units: converting Ignition spec 2 to 3 (as the MCO does): config includes deprecated networkd section - use Files instead",
	}, {
		name:   "a filesystem other than root",
		config: `{"ignition":{"version":"2.2.0"},"storage":{"filesystems":[{"name":"var","mount":{"device":"/dev/vdb","format":"xfs"}}],"files":[{"filesystem":"var","path":"/x","contents":{"source":"data:,x"}}]}}`,
		want:   `spec.config.storage.filesystems[0]: converting Ignition spec 2 to 3 (as the MCO does): Config defined filesystem "var" but no mapping was defined.Please specify a path to be used as the filesystem mountpoint.`,
	}, {
		name:   "a file and a directory at one path",
		config: `{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/x","contents":{"source":"data:,x"}}],"directories":[{"filesystem":"root","path":"/etc/x"}]}}`,
		want:   `spec.config.storage.directories[0]: converting Ignition spec 2 to 3 (as the MCO does): Config has conflicting inodes: "File: /etc/x" and "Directory: /etc/x". All files, directories and links must specify a unique ` + "`path`.",
	}, {
		name:   "a file under a link of the same config",
		config: `{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/l/f","contents":{"source":"data:,x"}}],"links":[{"filesystem":"root","path":"/etc/l","target":"/etc/x"}]}}`,
		want:   `spec.config.storage.files[0]: converting Ignition spec 2 to 3 (as the MCO does): File: /etc/l/f uses link defined in config "/etc/l". Please use a link not defined in Storage:Links`,
	}, {
		name:   "a deprecated field",
		config: `{"ignition":{"version":"2.2.0"},"storage":{"disks":[{"device":"/dev/vdb","partitions":[{"label":"p","size":2048}]}]}}`,
		want:   "spec.config: converting Ignition spec 2 to 3 (as the MCO does): Invalid input config: deprecated: size is deprecated; use sizeMB instead deprecated: start is deprecated; use startMB instead",
	}, {
		name:   "a user other than core",
		config: `{"ignition":{"version":"2.2.0"},"passwd":{"users":[{"name":"core"},{"name":"admin"}]}}`,
		want:   `spec.config.passwd.users[1].name: user "admin": only the core user is supported by the machine-config-daemon`,
	}, {
		name:   "append, after the conversion, at the file as written",
		config: `{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","append":true,"contents":{"source":"data:,x"}},{"filesystem":"root","path":"/etc/b","contents":{"source":"data:,b"}}]}}`,
		want:   "spec.config.storage.files[0].append: appending is not supported by the machine-config-daemon",
	}, {
		name:   "remote content",
		config: `{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"/etc/a","contents":{"source":"https://example.com/a"}},{"filesystem":"root","path":"/etc/b","contents":{"source":"data:,b"}}]}}`,
		want:   "spec.config.storage.files[0].contents.source: remote content (https) is not supported: the build is offline; inline it as a data: URL",
	}, {
		name:   "invalid in spec 2",
		config: `{"ignition":{"version":"2.2.0"},"storage":{"files":[{"filesystem":"root","path":"etc/relative","contents":{"source":"data:,x"}}]}}`,
		want:   "spec.config: Ignition spec 2: path not absolute",
	}, {
		name:   "spec 2.3 (the MCO's parser knows only up to 2.2)",
		config: `{"ignition":{"version":"2.3.0"}}`,
		want:   "spec.config.ignition.version: unsupported config version",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse("ign2.json", []byte(mcJSON("00-ign2", tt.config)))
			want := "ign2.json: 00-ign2: " + tt.want
			if err == nil || err.Error() != want {
				t.Errorf("Parse(%s) = %v, want %s", tt.config, err, want)
			}
		})
	}
}
