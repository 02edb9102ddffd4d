package machineconfig

import (
	"encoding/json"
	"regexp"
	"testing"

	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/google/go-cmp/cmp"
)

// parseOne parses a single-MachineConfig document or fails the test.
func parseOne(t *testing.T, file, doc string) *MachineConfig {
	t.Helper()
	mcs, err := Parse(file, []byte(doc))
	if err != nil || len(mcs) != 1 {
		t.Fatalf("Parse(%s) = %d MachineConfigs, %v; want 1, nil", file, len(mcs), err)
	}
	return mcs[0]
}

// mergeInputs are three MachineConfigs given out of name order.
func mergeInputs(t *testing.T) []*MachineConfig {
	a := parseOne(t, "a.yaml", `kind: MachineConfig
metadata: {name: 00-a}
spec:
  kernelArguments: [a=1, b]
  extensions: [usbguard]
  osImageURL: quay.io/a
  config:
    ignition: {version: 3.2.0}
    passwd: {users: [{name: core, sshAuthorizedKeys: [k1, k2]}]}
    storage:
      files:
      - {path: /etc/only-a, contents: {source: "data:,a"}}
      - {path: /etc/shared, contents: {source: "data:,x"}}
      directories: [{path: /etc/d, mode: 0700}]
      links: [{path: /etc/l, target: /etc/only-a}]
    systemd:
      units: [{name: u.service, enabled: true, contents: "[Unit]\n"}]
`)
	b := parseOne(t, "b.yaml", `kind: MachineConfig
metadata: {name: 99-b}
spec:
  kernelArguments: [a=1]
  kernelType: realtime
  config:
    ignition: {version: 3.5.0}
    passwd: {users: [{name: core, passwordHash: "$6$b", sshAuthorizedKeys: [k2, "  k3  "]}]}
    storage:
      files: [{path: /etc/shared, contents: {source: "data:,y"}}]
      links: [{path: /etc/l, target: /etc/only-b}]
    systemd:
      units: [{name: u.service, mask: true}]
`)
	c := parseOne(t, "c.yaml", `kind: MachineConfig
metadata: {name: 50-c}
spec:
  kernelArguments: [c]
  extensions: [sandboxed-containers, usbguard]
  fips: true
  config:
    ignition: {version: 3.4.0}
    storage:
      files:
      - {path: /etc/shared, contents: {source: "data:,y"}}
      - {path: /etc/only-c}
      directories: [{path: /etc/d, mode: 0700}]
`)
	return []*MachineConfig{b, a, c}
}

func TestMerge(t *testing.T) {
	in := mergeInputs(t)
	m := Merge(in)

	if got, want := []string{in[0].Name, in[1].Name, in[2].Name}, []string{"99-b", "00-a", "50-c"}; !cmp.Equal(got, want) {
		t.Errorf("Merge changed its input order to %q, want %q", got, want)
	}
	var order []string
	for _, mc := range m.MachineConfigs {
		order = append(order, mc.Name)
	}
	if diff := cmp.Diff([]string{"00-a", "50-c", "99-b"}, order); diff != "" {
		t.Errorf("Merge().MachineConfigs order mismatch (-want +got):\n%s", diff)
	}
	if !regexp.MustCompile(`^rendered-mcbake-[0-9a-f]{16}$`).MatchString(m.Name) {
		t.Errorf("Merge().Name = %q, want rendered-mcbake-<16 hex>", m.Name)
	}

	type item struct{ Key, MC, Field, Source string }
	var files []item
	for _, f := range m.Files {
		src := ""
		if f.Contents.Source != nil {
			src = *f.Contents.Source
		}
		files = append(files, item{f.Path, f.Source.MachineConfig, f.Source.Field, src})
	}
	wantFiles := []item{
		{"/etc/only-a", "00-a", "spec.config.storage.files[0]", "data:,a"},
		{"/etc/shared", "99-b", "spec.config.storage.files[0]", "data:,y"},
		{"/etc/only-c", "50-c", "spec.config.storage.files[1]", ""},
	}
	if diff := cmp.Diff(wantFiles, files); diff != "" {
		t.Errorf("Merge().Files mismatch (-want +got):\n%s", diff)
	}
	var rest []item
	for _, d := range m.Directories {
		rest = append(rest, item{d.Path, d.Source.MachineConfig, d.Source.Field, ""})
	}
	for _, l := range m.Links {
		rest = append(rest, item{l.Path, l.Source.MachineConfig, l.Source.Field, *l.Target})
	}
	for _, u := range m.Units {
		rest = append(rest, item{u.Name, u.Source.MachineConfig, u.Source.Field, ""})
	}
	wantRest := []item{
		{"/etc/d", "50-c", "spec.config.storage.directories[0]", ""},
		{"/etc/l", "99-b", "spec.config.storage.links[0]", "/etc/only-b"},
		{"u.service", "99-b", "spec.config.systemd.units[u.service]", ""},
	}
	if diff := cmp.Diff(wantRest, rest); diff != "" {
		t.Errorf("Merge() directories, links and units mismatch (-want +got):\n%s", diff)
	}
	// Ignition's merge, as the MCO runs it: 99-b's mask is added to
	// 00-a's contents and enablement, and each part keeps its source.
	u := m.Units[0]
	if u.Mask == nil || !*u.Mask || u.Contents == nil || *u.Contents != "[Unit]\n" || u.Enabled == nil || !*u.Enabled {
		t.Errorf("Merge().Units[0] = %+v, want 00-a's contents and enabled with 99-b's mask", u.Unit)
	}
	for part, want := range map[string]string{"contents": "00-a", "enabled": "00-a", "mask": "99-b"} {
		if got := u.SourceOf(part); got.MachineConfig != want || got.Field != "spec.config.systemd.units[u.service]."+part {
			t.Errorf("Units[0].SourceOf(%q) = %+v, want %s's spec.config.systemd.units[u.service].%s", part, got, want, part)
		}
	}

	src := func(file, mc, field string) Source { return Source{File: file, MachineConfig: mc, Field: field} }
	wantConflicts := []Conflict{
		{Kind: "file", Key: "/etc/shared", Winner: src("c.yaml", "50-c", "spec.config.storage.files[0]"), Loser: src("a.yaml", "00-a", "spec.config.storage.files[1]")},
		{Kind: "file", Key: "/etc/shared", Winner: src("b.yaml", "99-b", "spec.config.storage.files[0]"), Loser: src("c.yaml", "50-c", "spec.config.storage.files[0]"), Identical: true},
		{Kind: "directory", Key: "/etc/d", Winner: src("c.yaml", "50-c", "spec.config.storage.directories[0]"), Loser: src("a.yaml", "00-a", "spec.config.storage.directories[0]"), Identical: true},
		{Kind: "link", Key: "/etc/l", Winner: src("b.yaml", "99-b", "spec.config.storage.links[0]"), Loser: src("a.yaml", "00-a", "spec.config.storage.links[0]")},
		{Kind: "unit", Key: "u.service", Winner: src("b.yaml", "99-b", "spec.config.systemd.units[u.service]"), Loser: src("a.yaml", "00-a", "spec.config.systemd.units[u.service]")},
	}
	if diff := cmp.Diff(wantConflicts, m.Conflicts); diff != "" {
		t.Errorf("Merge().Conflicts mismatch (-want +got):\n%s", diff)
	}

	if diff := cmp.Diff([]string{"a=1", "b", "c", "a=1"}, m.KernelArguments); diff != "" {
		t.Errorf("Merge().KernelArguments mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"usbguard", "sandboxed-containers", "usbguard"}, m.Extensions); diff != "" {
		t.Errorf("Merge().Extensions mismatch (-want +got):\n%s", diff)
	}
	wantKeys := []SSHKey{
		{Key: "k1", Source: src("a.yaml", "00-a", "spec.config.passwd.users[0].sshAuthorizedKeys[0]")},
		{Key: "k2", Source: src("a.yaml", "00-a", "spec.config.passwd.users[0].sshAuthorizedKeys[1]")},
		{Key: "k3", Source: src("b.yaml", "99-b", "spec.config.passwd.users[0].sshAuthorizedKeys[1]")},
	}
	if diff := cmp.Diff(wantKeys, m.SSHKeys); diff != "" {
		t.Errorf("Merge().SSHKeys mismatch (-want +got):\n%s", diff)
	}
	type scalars struct {
		OSImageURL, KernelType, PasswordHash string
		FIPS                                 bool
	}
	got := scalars{m.OSImageURL, m.KernelType, "", m.FIPS}
	if m.PasswordHash != nil {
		got.PasswordHash = *m.PasswordHash
	}
	if diff := cmp.Diff(scalars{"quay.io/a", "realtime", "$6$b", true}, got); diff != "" {
		t.Errorf("Merge() scalars mismatch (-want +got):\n%s", diff)
	}
}

func TestMergeName(t *testing.T) {
	in := mergeInputs(t)
	if got := Merge(in[:1]).Name; got != "99-b" {
		t.Errorf("Merge(99-b).Name = %q, want %q", got, "99-b")
	}
	if a, b := Merge(in).Name, Merge([]*MachineConfig{in[2], in[0], in[1]}).Name; a != b {
		t.Errorf("Merge(in).Name = %q, Merge(reordered in).Name = %q, want them equal", a, b)
	}
	if a, b := Merge(in).Name, Merge(in[1:]).Name; a == b {
		t.Errorf("Merge(3 MCs).Name = Merge(2 MCs).Name = %q, want them to differ", a)
	}
}

// TestMergedJSON checks the stored current config: a MachineConfig object
// that parses back to the merged Ignition config.
func TestMergedJSON(t *testing.T) {
	m := Merge(mergeInputs(t))
	b, err := m.JSON()
	if err != nil {
		t.Fatalf("Merged.JSON() = %v", err)
	}
	var head struct {
		APIVersion string `json:"apiVersion"`
		Kind       string `json:"kind"`
	}
	if err := json.Unmarshal(b, &head); err != nil {
		t.Fatalf("Merged.JSON() is not JSON: %v", err)
	}
	if head.APIVersion != APIVersion || head.Kind != Kind {
		t.Errorf("Merged.JSON() apiVersion, kind = %q, %q, want %q, %q", head.APIVersion, head.Kind, APIVersion, Kind)
	}
	// The stored config still holds the masked unit and the password hash,
	// so its own refusal check must pass.
	back := parseOne(t, "currentconfig", string(b))
	if back.Name != m.Name {
		t.Errorf("Parse(Merged.JSON()).Name = %q, want %q", back.Name, m.Name)
	}
	if diff := cmp.Diff(m.Ignition(), back.Ignition); diff != "" {
		t.Errorf("Parse(Merged.JSON()).Ignition mismatch (-want +got):\n%s", diff)
	}
	wantSpec := Spec{OSImageURL: "quay.io/a", KernelArguments: []string{"a=1", "b", "c", "a=1"}, Extensions: []string{"usbguard", "sandboxed-containers", "usbguard"}, FIPS: true, KernelType: "realtime"}
	back.Spec.Config = nil
	if diff := cmp.Diff(wantSpec, back.Spec); diff != "" {
		t.Errorf("Parse(Merged.JSON()).Spec mismatch (-want +got):\n%s", diff)
	}
	again, err := m.JSON()
	if err != nil || string(again) != string(b) {
		t.Errorf("Merged.JSON() is not deterministic: %v", err)
	}
}

// TestMergedStorageLayout checks that the storage layout (never baked)
// merges as the MCO's MergeMachineConfigs merges it, Ignition's merge of
// the whole configs in merge order, and that the stored current config
// keeps it: the MCD reads a layout missing from it as a change it cannot
// reconcile.
func TestMergedStorageLayout(t *testing.T) {
	b := parseOne(t, "b.yaml", `kind: MachineConfig
metadata: {name: 99-b}
spec:
  config:
    ignition: {version: 3.5.0}
    storage:
      disks: [{device: /dev/vdb, partitions: [{number: 1, label: var, sizeMiB: 200}, {number: 2, label: log}]}]
      filesystems: [{device: /dev/disk/by-partlabel/var, format: ext4}, {device: /dev/disk/by-partlabel/log, format: xfs, path: /var/log}]
      raid: [{name: md0, level: raid1, devices: [/dev/vdc, /dev/vdd]}]
      files: [{path: /etc/b, contents: {source: "data:,b"}}]
`)
	a := parseOne(t, "a.yaml", `kind: MachineConfig
metadata: {name: 00-a}
spec:
  config:
    ignition: {version: 3.2.0}
    storage:
      disks: [{device: /dev/vdb, wipeTable: true, partitions: [{number: 1, label: var, sizeMiB: 100}]}]
      filesystems: [{device: /dev/disk/by-partlabel/var, format: xfs, path: /var, wipeFilesystem: true}]
      luks: [{name: root, device: /dev/disk/by-partlabel/root, clevis: {tpm2: true}}]
`)
	m := Merge([]*MachineConfig{b, a})
	want := v35.Merge(a.Ignition, b.Ignition).Storage
	layout := func(s types.Storage) types.Storage {
		return types.Storage{Disks: s.Disks, Raid: s.Raid, Filesystems: s.Filesystems, Luks: s.Luks}
	}
	if diff := cmp.Diff(layout(want), m.StorageLayout); diff != "" {
		t.Errorf("Merge().StorageLayout mismatch with Ignition's merge of the whole configs (-want +got):\n%s", diff)
	}
	if got := m.StorageLayout.Disks[0].Partitions; len(got) != 2 || *got[0].SizeMiB != 200 {
		t.Errorf("Merge().StorageLayout disk partitions = %+v, want the later MachineConfig's size and both partitions", got)
	}
	js, err := m.JSON()
	if err != nil {
		t.Fatalf("Merged.JSON() = %v", err)
	}
	back := parseOne(t, "currentconfig", string(js))
	if diff := cmp.Diff(layout(want), layout(back.Ignition.Storage)); diff != "" {
		t.Errorf("Parse(Merged.JSON()) storage layout mismatch (-want +got):\n%s", diff)
	}
	if len(m.Files) != 1 || len(back.Ignition.Storage.Files) != 1 {
		t.Errorf("Merge().Files = %d, stored files = %d, want 1 and 1", len(m.Files), len(back.Ignition.Storage.Files))
	}
}

// TestMergeAddsADropInToAnotherMCsUnit is the common case the MCO's merge
// exists for: a later MachineConfig adds a drop-in to a unit an earlier
// one defines, and the unit keeps its contents and enablement.
func TestMergeAddsADropInToAnotherMCsUnit(t *testing.T) {
	worker := parseOne(t, "worker.yaml", `kind: MachineConfig
metadata: {name: 00-worker}
spec:
  config:
    ignition: {version: 3.5.0}
    systemd: {units: [{name: kubelet.service, enabled: true, contents: "[Service]\nExecStart=/usr/bin/kubelet\n"}]}
`)
	extra := parseOne(t, "extra.yaml", `kind: MachineConfig
metadata: {name: 99-extra}
spec:
  config:
    ignition: {version: 3.5.0}
    systemd: {units: [{name: kubelet.service, dropins: [{name: 20-logging.conf, contents: "[Service]\nEnvironment=V=4\n"}]}]}
`)
	m := Merge([]*MachineConfig{extra, worker})
	if len(m.Units) != 1 {
		t.Fatalf("Merge() = %d units, want 1", len(m.Units))
	}
	u := m.Units[0]
	if u.Contents == nil || u.Enabled == nil || !*u.Enabled || len(u.Dropins) != 1 {
		t.Fatalf("merged kubelet.service = %+v, want 00-worker's contents and enablement plus 99-extra's drop-in", u.Unit)
	}
	if got := u.SourceOf("contents").MachineConfig; got != "00-worker" {
		t.Errorf("contents from %s, want 00-worker", got)
	}
	if got := u.SourceOf("dropins[20-logging.conf]"); got.MachineConfig != "99-extra" || got.File != "extra.yaml" {
		t.Errorf("drop-in from %+v, want 99-extra in extra.yaml", got)
	}
}
