package machineconfig

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"syscall"
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
	local := strings.Replace(good, "inline: bu", "local: bu.txt", 1)
	if _, err := Load([]string{Stdin}, strings.NewReader(local)); err == nil || !strings.Contains(err.Error(), "storage.files[0].contents.local: Butane: line 4, column 53: local file paths are relative to the Butane config's directory: give the config as a file, not on stdin") {
		t.Errorf("Load(- with a Butane config with a local file) = %v, want the local file refused, naming stdin", err)
	}
	for _, tt := range []struct{ file, want string }{
		{"bad.bu", "bad.bu: 99-bad: storage.files[1].path: Butane: line 9, column 13: path not absolute"},
		{"fcos.bu", `fcos.bu: <unnamed>: variant: Butane variant "fcos" makes an Ignition config, not a MachineConfig: use variant: openshift`},
		{"mc.bu", "mc.bu: 00-mc: variant: a Butane config (.bu) names its variant: variant: openshift"},
		{"unknown.bu", "unknown.bu: 99-unknown: version: Butane: No translator exists for variant openshift with version 9.9.0"},
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

// TestButaneLocalFiles: the local files a Butane config names are checked
// before Butane reads them whole: a file that is not regular (a FIFO would
// never end), and local files that total more than an input may hold, are
// refused at their field, and so is a path with a symbolic link in it;
// files within the limit translate.
func TestButaneLocalFiles(t *testing.T) {
	t.Chdir(t.TempDir())
	head := "variant: openshift\nversion: 4.18.0\nmetadata: {name: 10-local, labels: {machineconfiguration.openshift.io/role: worker}}\n"
	writeFiles(t, ".", map[string]string{
		"small":       "small\n",
		"tree/a.conf": "a\n",
		"ok.bu":       head + "storage:\n  files: [{path: /etc/small, contents: {local: small}}]\n  trees: [{local: tree, path: /etc/tree}]\n",
		"big.bu":      head + "storage:\n  files:\n    - path: /etc/small\n      contents: {local: small}\n    - path: /etc/big\n      contents: {local: big}\n",
		"bigtree.bu":  head + "storage:\n  trees: [{local: bigtree, path: /etc/t}]\n",
		"fifo.bu":     head + "systemd:\n  units: [{name: x.service, contents_local: fifo}]\n",
		"alias.bu": head + "storage:\n  files:\n    - path: /etc/a\n      contents: &half {local: bigtree/b}\n    - path: /etc/b\n      contents: *half\n" +
			"    - path: /etc/c\n      contents: {local: &name small}\n    - path: /etc/d\n      contents: {local: *name}\n",
		"link.bu":        head + "storage:\n  files: [{path: /etc/x, contents: {local: files/link}}]\n",
		"linkdir.bu":     head + "storage:\n  files: [{path: /etc/x, contents: {local: files/dirlink/secret}}]\n",
		"linkin.bu":      head + "storage:\n  files: [{path: /etc/x, contents: {local: files/inlink}}]\n",
		"keys.bu":        head + "passwd:\n  users: [{name: core, ssh_authorized_keys_local: [small, files/link]}]\n",
		"linktree.bu":    head + "storage:\n  trees: [{local: files/dirlink, path: /etc/t}]\n",
		"outside/secret": "secret\n",
	})
	outside, err := filepath.Abs("outside")
	if err != nil {
		t.Fatal(err)
	}
	for link, target := range map[string]string{
		"files/link":    "../outside/secret", // out of the directory, relatively
		"files/dirlink": outside,             // absolutely
		"files/inlink":  "../small",          // a link that stays inside is refused too
	} {
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
	}
	for name, size := range map[string]int64{"big": MaxInput, "bigtree/a": MaxInput / 2, "bigtree/b": MaxInput/2 + 1} {
		if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(name, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(name, size); err != nil { // sparse: no disk used
			t.Fatal(err)
		}
	}
	if err := syscall.Mkfifo("fifo", 0o644); err != nil {
		t.Fatal(err)
	}
	mcs, err := Load([]string{"ok.bu"}, nil)
	if err != nil || len(mcs) != 1 || len(mcs[0].Ignition.Storage.Files) != 2 {
		t.Fatalf("Load(ok.bu) = %v, %v; want one MachineConfig with two files", names(mcs), err)
	}
	for _, tt := range []struct{ file, want string }{
		{"big.bu", "big.bu: 10-local: storage.files[1].contents.local: Butane: line 9, column 25: local file big (67108864 bytes) makes the local files more than 64 MiB together, as much as one input may hold"},
		{"bigtree.bu", "bigtree.bu: 10-local: storage.trees[0].local: Butane: line 5, column 19: local file bigtree/b (33554433 bytes) makes the local files more than 64 MiB together, as much as one input may hold"},
		{"fifo.bu", "fifo.bu: 10-local: systemd.units[0].contents_local: Butane: line 5, column 45: local file fifo is not a regular file (p---------)"},
		// An alias is read once per use: twice half the limit is over.
		{"alias.bu", "alias.bu: 10-local: storage.files[1].contents.local: Butane: line 7, column 31: local file bigtree/b (33554433 bytes) makes the local files more than 64 MiB together, as much as one input may hold"},
		// A symbolic link anywhere in the path is refused: Butane would
		// follow it and bake what it leads to.
		{"link.bu", "link.bu: 10-local: storage.files[0].contents.local: Butane: line 5, column 44: local file files/link is or goes through a symbolic link: local files are read without following links"},
		{"linkdir.bu", "linkdir.bu: 10-local: storage.files[0].contents.local: Butane: line 5, column 44: local file files/dirlink/secret is or goes through a symbolic link: local files are read without following links"},
		{"linkin.bu", "linkin.bu: 10-local: storage.files[0].contents.local: Butane: line 5, column 44: local file files/inlink is or goes through a symbolic link: local files are read without following links"},
		{"keys.bu", "keys.bu: 10-local: passwd.users[0].ssh_authorized_keys_local[1]: Butane: line 5, column 59: local file files/link is or goes through a symbolic link: local files are read without following links"},
		{"linktree.bu", "linktree.bu: 10-local: storage.trees[0].local: Butane: line 5, column 19: local file files/dirlink is or goes through a symbolic link: local files are read without following links"},
	} {
		if _, err := Load([]string{tt.file}, nil); err == nil || err.Error() != tt.want {
			t.Errorf("Load(%s) = %v,\nwant %s", tt.file, err, tt.want)
		}
	}
}
