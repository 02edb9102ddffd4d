package machineconfig

import (
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/google/go-cmp/cmp"
)

func TestRefusals(t *testing.T) {
	const mcd = "is not supported by the machine-config-daemon"
	tests := []struct {
		name   string
		config string // spec.config
		want   []FieldError
	}{{
		name:   "ignition kernel arguments",
		config: `{"ignition":{"version":"3.5.0"},"kernelArguments":{"shouldExist":["nosmt"]}}`,
		want:   []FieldError{{Field: "spec.config.kernelArguments", Msg: "Ignition kernel arguments are not applied by the machine-config-daemon; use spec.kernelArguments"}},
	}, {
		name:   "append",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/ok"},{"path":"/etc/a","append":[{"source":"data:,x"}]}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[1].append", Msg: "appending " + mcd}},
	}, {
		name:   "http source",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"http://example.com/a"}}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].contents.source", Msg: "remote content (http) is not supported: the build is offline; inline it as a data: URL"}},
	}, {
		name:   "https source",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"https://example.com/a"}}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].contents.source", Msg: "remote content (https) is not supported: the build is offline; inline it as a data: URL"}},
	}, {
		name:   "s3 source",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"s3://bucket/key"}}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].contents.source", Msg: "remote content (s3) is not supported: the build is offline; inline it as a data: URL"}},
	}, {
		name:   "gs source",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"gs://bucket/key"}}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].contents.source", Msg: "remote content (gs) is not supported: the build is offline; inline it as a data: URL"}},
	}, {
		name:   "tftp source",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"tftp://host/a"}}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].contents.source", Msg: "remote content (tftp) is not supported: the build is offline; inline it as a data: URL"}},
	}, {
		name:   "remote certificate authority",
		config: `{"ignition":{"version":"3.5.0","security":{"tls":{"certificateAuthorities":[{"source":"data:,ca"},{"source":"https://example.com/ca.pem"}]}}}}`,
		want:   []FieldError{{Field: "spec.config.ignition.security.tls.certificateAuthorities[1].source", Msg: "remote content (https) is not supported: the build is offline; inline it as a data: URL"}},
	}, {
		name: "owner ids out of range",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","user":{"id":-5}},{"path":"/etc/b","group":{"id":4294967295}}],`+
			`"directories":[{"path":"/etc/d","user":{"id":99999999999}}],"links":[{"path":"/etc/l","target":"/etc/a","group":{"id":-1}}]}`),
		want: []FieldError{
			{Field: "spec.config.storage.files[0].user.id", Msg: "id -5 is out of range (0 to 4294967294)"},
			{Field: "spec.config.storage.files[1].group.id", Msg: "id 4294967295 is out of range (0 to 4294967294)"},
			{Field: "spec.config.storage.directories[0].user.id", Msg: "id 99999999999 is out of range (0 to 4294967294)"},
			{Field: "spec.config.storage.links[0].group.id", Msg: "id -1 is out of range (0 to 4294967294)"},
		},
	}, {
		name:   "user other than core",
		config: ign("3.5.0", `"passwd":{"users":[{"name":"core"},{"name":"admin","sshAuthorizedKeys":["ssh-ed25519 AAAA"]}]}`),
		want:   []FieldError{{Field: "spec.config.passwd.users[1].name", Msg: `user "admin": only the core user is supported by the machine-config-daemon`}},
	}, {
		name: "core fields other than sshAuthorizedKeys and passwordHash",
		config: ign("3.5.0", `"passwd":{"users":[{"name":"core","passwordHash":"$6$x","sshAuthorizedKeys":["k"],`+
			`"uid":1000,"gecos":"g","homeDir":"/home/c","noCreateHome":true,"primaryGroup":"core","groups":["wheel"],`+
			`"noUserGroup":true,"noLogInit":true,"shell":"/bin/sh","system":false,"shouldExist":true}]}`),
		want: []FieldError{
			{Field: "spec.config.passwd.users[0].gecos", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].groups", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].homeDir", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].noCreateHome", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].noLogInit", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].noUserGroup", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].primaryGroup", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].shell", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].shouldExist", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].system", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
			{Field: "spec.config.passwd.users[0].uid", Msg: "only sshAuthorizedKeys and passwordHash may be set for the core user"},
		},
	}, {
		name:   "groups",
		config: ign("3.5.0", `"passwd":{"groups":[{"name":"wheel"}]}`),
		want:   []FieldError{{Field: "spec.config.passwd.groups[0]", Msg: `group "wheel": passwd groups are not supported by the machine-config-daemon`}},
	}, {
		// The storage layout Ignition applies at install stays in a pool's
		// config forever; the MCD never applies it: accepted, nothing
		// baked (verify's MCB021 reports it).
		name: "disks, raid, filesystems and luks",
		config: ign("3.5.0", `"storage":{"disks":[{"device":"/dev/sda"}],"raid":[{"name":"md0","level":"raid1","devices":["/dev/sda","/dev/sdb"]}],`+
			`"filesystems":[{"device":"/dev/sda1","format":"xfs","path":"/var/lib/x"}],"luks":[{"name":"root","device":"/dev/sda"}]}`),
	}, {
		name:   "file mode above 0777",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","mode":2541}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].mode", Msg: "mode 04755 is above 0777 (setuid, setgid and sticky bits are not supported)"}},
	}, {
		name:   "directory mode above 0777",
		config: ign("3.5.0", `"storage":{"directories":[{"path":"/etc/d","mode":1023}]}`),
		want:   []FieldError{{Field: "spec.config.storage.directories[0].mode", Msg: "mode 01777 is above 0777 (setuid, setgid and sticky bits are not supported)"}},
	}, {
		name:   "machine-config-daemon-force",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/run/machine-config-daemon-force","contents":{"source":"data:,"}}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].path", Msg: "/run/machine-config-daemon-force would make the machine-config-daemon skip validation"}},
	}, {
		name:   "compression other than gzip (ignition's own check)",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a","compression":"xz"}}]}`),
		want:   []FieldError{{Reason: ReasonInvalid, Field: "spec.config.storage.files[0].contents.compression", Msg: "invalid compression method"}},
	}, {
		name:   "relative file path",
		config: ign("3.5.0", `"storage":{"files":[{"path":"etc/a"}]}`),
		want:   []FieldError{{Reason: ReasonInvalid, Field: "spec.config.storage.files[0].path", Msg: "path not absolute"}},
	}, {
		name:   "file path with ../",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/etc/../../root/.ssh/authorized_keys"}]}`),
		want:   []FieldError{{Reason: ReasonInvalid, Field: "spec.config.storage.files[0].path", Msg: "path is not fully simplified"}},
	}, {
		name:   "directory path with // and trailing /",
		config: ign("3.5.0", `"storage":{"directories":[{"path":"/etc//d"},{"path":"/etc/e/"}]}`),
		want: []FieldError{
			{Reason: ReasonInvalid, Field: "spec.config.storage.directories[0].path", Msg: "path is not fully simplified"},
			{Reason: ReasonInvalid, Field: "spec.config.storage.directories[1].path", Msg: "path is not fully simplified"},
		},
	}, {
		name:   "relative link path",
		config: ign("3.5.0", `"storage":{"links":[{"path":"etc/l","target":"/etc/x"}]}`),
		want:   []FieldError{{Reason: ReasonInvalid, Field: "spec.config.storage.links[0].path", Msg: "path not absolute"}},
	}, {
		name:   "file at the root directory",
		config: ign("3.5.0", `"storage":{"files":[{"path":"/"}]}`),
		want:   []FieldError{{Field: "spec.config.storage.files[0].path", Msg: `path "/" is the root directory itself`}},
	}, {
		name:   "relative symlink escaping the root",
		config: ign("3.5.0", `"storage":{"links":[{"path":"/etc/a/l","target":"../../../etc/shadow"}]}`),
		want:   []FieldError{{Field: "spec.config.storage.links[0].target", Msg: `link target "../../../etc/shadow" escapes the image root`}},
	}, {
		name:   "absolute symlink climbing above /",
		config: ign("3.5.0", `"storage":{"links":[{"path":"/etc/l","target":"/../../host"}]}`),
		want:   []FieldError{{Field: "spec.config.storage.links[0].target", Msg: `link target "/../../host" escapes the image root`}},
	}, {
		name:   "symlink climbing down then up past the root",
		config: ign("3.5.0", `"storage":{"links":[{"path":"/l","target":"a/../../x"}]}`),
		want:   []FieldError{{Field: "spec.config.storage.links[0].target", Msg: `link target "a/../../x" escapes the image root`}},
	}, {
		name:   "relative hard link target",
		config: ign("3.5.0", `"storage":{"links":[{"path":"/etc/h","target":"etc/x","hard":true}]}`),
		want:   []FieldError{{Field: "spec.config.storage.links[0].target", Msg: `path "etc/x" is not absolute`}},
	}, {
		name:   "hard link target with ../",
		config: ign("3.5.0", `"storage":{"links":[{"path":"/etc/h","target":"/etc/../../x","hard":true}]}`),
		want:   []FieldError{{Field: "spec.config.storage.links[0].target", Msg: `path "/etc/../../x" is not clean (no .., ., // or trailing /)`}},
	}, {
		name:   "ignition.config.merge",
		config: `{"ignition":{"version":"3.5.0","config":{"merge":[{"source":"data:,%7B%7D"}]}}}`,
		want:   []FieldError{{Field: "spec.config.ignition.config.merge", Msg: "merging other Ignition configs " + mcd}},
	}, {
		name:   "ignition.config.replace",
		config: `{"ignition":{"version":"3.5.0","config":{"replace":{"source":"data:,%7B%7D"}}}}`,
		want:   []FieldError{{Field: "spec.config.ignition.config.replace", Msg: "replacing the config " + mcd}},
	}, {
		name:   "unit name that is a path",
		config: ign("3.5.0", `"systemd":{"units":[{"name":"../../../etc/x.service","contents":"[Unit]"}]}`),
		want:   []FieldError{{Field: "spec.config.systemd.units[0].name", Msg: `unit name "../../../etc/x.service" is not a file name`}},
	}, {
		name:   "drop-in name that is a path",
		config: ign("3.0.0", `"systemd":{"units":[{"name":"a.service","dropins":[{"name":"../../x.conf","contents":"[Unit]"}]}]}`),
		want:   []FieldError{{Field: "spec.config.systemd.units[a.service].dropins[../../x.conf].name", Msg: `drop-in name "../../x.conf" is not a file name`}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Chdir(t.TempDir())
			writeFiles(t, ".", map[string]string{"worker.json": mcJSON("99-refused", tt.config)})
			_, err := Load([]string{"worker.json"}, nil)
			var want []FieldError
			var lines []string
			for _, fe := range tt.want {
				fe.File, fe.MachineConfig = "worker.json", "99-refused"
				if fe.Reason == "" {
					fe.Reason = ReasonUnsupported
				}
				want = append(want, fe)
				lines = append(lines, "worker.json: 99-refused: "+fe.Field+": "+fe.Msg)
			}
			if diff := cmp.Diff(want, fieldErrors(err)); diff != "" {
				t.Errorf("Load(%s) field errors mismatch (-want +got):\n%s", tt.config, diff)
			}
			if err == nil {
				return
			}
			if got, want := err.Error(), strings.Join(lines, "\n"); got != want {
				t.Errorf("Load(%s) = %q, want %q", tt.config, got, want)
			}
		})
	}
}

// TestAccepted checks configs close to a refusal that the MCD applies.
func TestAccepted(t *testing.T) {
	tests := []struct{ name, config string }{
		{"core with keys and password hash only", ign("3.5.0", `"passwd":{"users":[{"name":"core","passwordHash":"$6$x","sshAuthorizedKeys":["k"]}]}`)},
		{"data URLs, plain, base64 and gzip", ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}},`+
			`{"path":"/etc/b","contents":{"source":"data:;base64,YQ=="}},{"path":"/etc/c","contents":{"source":"data:;base64,H4sIAAAAAAAA/0sEAEPevrcBAAAA","compression":"gzip"}}]}`)},
		{"owner ids 0 and 4294967294", ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","user":{"id":0},"group":{"id":4294967294}}]}`)},
		{"mode 0777", ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","mode":511}],"directories":[{"path":"/etc/d","mode":511}]}`)},
		{"symlinks staying inside", ign("3.5.0", `"storage":{"links":[{"path":"/etc/a/b/l","target":"../../../usr/bin/x"},{"path":"/etc/m","target":"/usr/bin/x"}]}`)},
		{"hard link", ign("3.5.0", `"storage":{"files":[{"path":"/etc/a"}],"links":[{"path":"/etc/h","target":"/etc/a","hard":true}]}`)},
		{"other /run files", ign("3.5.0", `"storage":{"files":[{"path":"/run/machine-config-daemon-force-not"}]}`)},
		{"ca bundle as data URL", `{"ignition":{"version":"3.5.0","security":{"tls":{"certificateAuthorities":[{"source":"data:,ca"}]}}}}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if _, err := Parse("ok.json", []byte(mcJSON("00-ok", tt.config))); err != nil {
				t.Errorf("Parse(%s) = %v, want no error", tt.config, err)
			}
		})
	}
}

// TestRefusalsDirect covers what ignition's own validation catches first
// when the config comes through Load: Refusals is also called on configs
// built in code.
func TestRefusalsDirect(t *testing.T) {
	xz, rel, clean := "xz", "etc/x", "/etc/x"
	tests := []struct {
		name string
		cfg  types.Config
		want []FieldError
	}{{
		name: "compression other than gzip",
		cfg:  types.Config{Storage: types.Storage{Files: []types.File{{Node: types.Node{Path: clean}, FileEmbedded1: types.FileEmbedded1{Contents: types.Resource{Compression: &xz}}}}}},
		want: []FieldError{{Field: "spec.config.storage.files[0].contents.compression", Msg: `compression "xz" is not supported (only none or gzip)`}},
	}, {
		name: "relative paths",
		cfg: types.Config{Storage: types.Storage{
			Files:       []types.File{{Node: types.Node{Path: rel}}},
			Directories: []types.Directory{{Node: types.Node{Path: rel}}},
			Links:       []types.Link{{Node: types.Node{Path: rel}, LinkEmbedded1: types.LinkEmbedded1{Target: &clean}}},
		}},
		want: []FieldError{
			{Field: "spec.config.storage.files[0].path", Msg: `path "etc/x" is not absolute`},
			{Field: "spec.config.storage.directories[0].path", Msg: `path "etc/x" is not absolute`},
			{Field: "spec.config.storage.links[0].path", Msg: `path "etc/x" is not absolute`},
		},
	}, {
		name: "unclean path",
		cfg:  types.Config{Storage: types.Storage{Files: []types.File{{Node: types.Node{Path: "/etc/../x"}}}}},
		want: []FieldError{{Field: "spec.config.storage.files[0].path", Msg: `path "/etc/../x" is not clean (no .., ., // or trailing /)`}},
	}, {
		name: "acceptable",
		cfg:  types.Config{Storage: types.Storage{Files: []types.File{{Node: types.Node{Path: clean}}}}},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Refusals(tt.cfg)
			for i := range tt.want {
				tt.want[i].Reason = ReasonUnsupported
			}
			if diff := cmp.Diff(tt.want, fieldErrors(err)); diff != "" {
				t.Errorf("Refusals() mismatch (-want +got):\n%s", diff)
			}
			if tt.want == nil && err != nil {
				t.Errorf("Refusals() = %v, want nil", err)
			}
		})
	}
}

// TestRefusalsAllReported checks that one Load reports every refusal of
// every MachineConfig in every file, not only the first.
func TestRefusalsAllReported(t *testing.T) {
	t.Chdir(t.TempDir())
	writeFiles(t, ".", map[string]string{
		"a.json": mcJSON("00-a", ign("3.5.0", `"storage":{"files":[{"path":"/etc/x","append":[{"source":"data:,x"}]},`+
			`{"path":"/etc/y","contents":{"source":"https://example.com/y"}}]}`)),
		"b.yaml": `kind: List
items:
- kind: MachineConfig
  metadata: {name: 10-b}
  spec:
    config:
      ignition: {version: 3.2.0}
      passwd: {users: [{name: admin}]}
      storage: {disks: [{device: /dev/vdb}]}
- kind: MachineConfig
  metadata: {name: 20-c}
  spec:
    config:
      ignition: {version: 3.5.0}
      storage: {files: [{path: /etc/z, mode: 4095}]}
`,
		"ok.json": mcJSON("30-ok", ign("3.5.0", "")),
	})
	_, err := Load([]string{"a.json", "b.yaml", "ok.json"}, nil)
	want := strings.Join([]string{
		"a.json: 00-a: spec.config.storage.files[0].append: appending is not supported by the machine-config-daemon",
		"a.json: 00-a: spec.config.storage.files[1].contents.source: remote content (https) is not supported: the build is offline; inline it as a data: URL",
		`b.yaml: 10-b: spec.config.passwd.users[0].name: user "admin": only the core user is supported by the machine-config-daemon`,
		"b.yaml: 20-c: spec.config.storage.files[0].mode: mode 07777 is above 0777 (setuid, setgid and sticky bits are not supported)",
	}, "\n")
	if err == nil || err.Error() != want {
		t.Errorf("Load(a.json, b.yaml, ok.json) = %v, want\n%s", err, want)
	}
	if got := len(fieldErrors(err)); got != 4 {
		t.Errorf("Load(a.json, b.yaml, ok.json) has %d FieldErrors, want 4", got)
	}
}
