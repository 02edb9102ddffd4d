package revert_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/revert"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

func TestZoneOf(t *testing.T) {
	tests := []struct {
		p    string
		want revert.Zone
	}{
		{"/etc", revert.ZoneEtc},
		{"/etc/kubernetes/kubelet.conf", revert.ZoneEtc},
		{"/etcetera/x", revert.ZoneUsr},
		{"/var", revert.ZoneVar},
		{"/var/lib/kubelet/config.json", revert.ZoneVar},
		{"/var/usrlocal/bin/tool", revert.ZoneVar},
		{"/various", revert.ZoneUsr},
		{"/usr/lib/systemd/system/crio.service", revert.ZoneUsr},
		// Not resolved: ZoneOf takes paths already resolved through the
		// base's symlinks.
		{"/usr/local/bin/tool", revert.ZoneUsr},
		{"/opt/x", revert.ZoneUsr},
		{"/boot/loader", revert.ZoneUsr},
		{"/", revert.ZoneUsr},
		{"/run", revert.ZoneDropped},
		{"/run/mcbake/x", revert.ZoneDropped},
		{"/tmp/x", revert.ZoneDropped},
		{"/proc/1/status", revert.ZoneDropped},
		{"/sys/fs/cgroup", revert.ZoneDropped},
		{"/dev/null", revert.ZoneDropped},
		{"/devices/x", revert.ZoneUsr},
		{"/runner", revert.ZoneUsr},
	}
	for _, tt := range tests {
		if got := revert.ZoneOf(tt.p); got != tt.want {
			t.Errorf("ZoneOf(%q) = %s, want %s", tt.p, got, tt.want)
		}
	}
}

// TestOutcome is the table of docs/design.md, "ostree's /etc merge", for every zone, base state and entry
// type, for a node whose copy equals the layered image's default.
func TestOutcome(t *testing.T) {
	// want[zone][state] is the outcome for an entry that exists (file,
	// directory, symlink, hard link) and for an absent one.
	type pair struct{ present, absent revert.Outcome }
	want := map[revert.Zone]map[manifest.State]pair{
		revert.ZoneEtc: {
			manifest.StateAbsent:  {present: revert.Removed, absent: revert.Kept},
			manifest.StateSame:    {present: revert.Kept, absent: revert.Kept},
			manifest.StateDiffers: {present: revert.Reverted, absent: revert.Restored},
		},
		revert.ZoneUsr: {
			manifest.StateAbsent:  {present: revert.Lost, absent: revert.Kept},
			manifest.StateSame:    {present: revert.Kept, absent: revert.Kept},
			manifest.StateDiffers: {present: revert.Lost, absent: revert.Lost},
		},
		revert.ZoneVar: {
			manifest.StateAbsent:  {present: revert.Untouched, absent: revert.Untouched},
			manifest.StateSame:    {present: revert.Untouched, absent: revert.Untouched},
			manifest.StateDiffers: {present: revert.Untouched, absent: revert.Untouched},
		},
		revert.ZoneDropped: {
			manifest.StateAbsent:  {present: revert.Dropped, absent: revert.Dropped},
			manifest.StateSame:    {present: revert.Dropped, absent: revert.Dropped},
			manifest.StateDiffers: {present: revert.Dropped, absent: revert.Dropped},
		},
	}
	types := []manifest.Type{manifest.File, manifest.Directory, manifest.Symlink, manifest.Hardlink, manifest.Absent}
	for z, byState := range want {
		for state, w := range byState {
			for _, typ := range types {
				st := &manifest.BaseState{State: state}
				if state == manifest.StateDiffers {
					st.Differs = []manifest.Attr{manifest.AttrMode, manifest.AttrUID}
				}
				wantO := w.present
				if typ == manifest.Absent {
					wantO = w.absent
				}
				got, reason := revert.OutcomeOf(z, typ, st)
				if got != wantO {
					t.Errorf("outcome(%s, %s, %s) = %s, want %s", z, typ, state, got, wantO)
				}
				if reason == "" {
					t.Errorf("outcome(%s, %s, %s) gave no reason", z, typ, state)
				}
				if got == revert.Reverted && !strings.Contains(reason, "mode, uid") {
					t.Errorf("outcome(%s, %s, %s) reason %q does not name what differs", z, typ, state, reason)
				}
			}
		}
	}
}

func TestClobbers(t *testing.T) {
	want := map[revert.Outcome]bool{revert.Kept: false, revert.Removed: true, revert.Reverted: true, revert.Restored: true, revert.Lost: true, revert.Untouched: false, revert.Dropped: false}
	for o, w := range want {
		if got := o.Clobbers(); got != w {
			t.Errorf("%s.Clobbers() = %v, want %v", o, got, w)
		}
	}
}

func sha(s string) digest.Digest { return digest.FromString(s) }

// fileEntry is an owned regular file with content s.
func fileEntry(p, s string, mode manifest.Mode, uid, gid int) manifest.Entry {
	return manifest.Entry{Path: p, Type: manifest.File, Mode: mode, UID: uid, GID: gid, Size: int64(len(s)), Digest: sha(s),
		Source: manifest.Source{MachineConfig: "99-test", Field: "spec.config.storage.files[0]"}}
}

func dirEntry(p string, mode manifest.Mode) manifest.Entry {
	return manifest.Entry{Path: p, Type: manifest.Directory, Mode: mode, Source: manifest.Source{MachineConfig: "99-test", Field: "spec.config.storage.directories[0]"}}
}

func linkEntry(p, target string) manifest.Entry {
	return manifest.Entry{Path: p, Type: manifest.Symlink, Mode: 0o777, Target: target, Source: manifest.Source{MachineConfig: "99-test", Field: "spec.config.storage.links[0]"}}
}

func absentEntry(p string) manifest.Entry {
	return manifest.Entry{Path: p, Type: manifest.Absent, Source: manifest.Source{MachineConfig: "99-test", Field: "spec.config.systemd.units[0].enabled"}}
}

// compareLayers are the extra base layers of TestCompare: symlinked
// parents (relative, absolute, climbing above the root with ..), a hard
// link, and a directory whited out and one made opaque by a later layer.
func compareLayers() []testbase.Layer {
	return []testbase.Layer{
		{Files: []testbase.File{
			{Path: "etc/real", Type: tar.TypeDir, Mode: 0o755},
			{Path: "etc/alt", Type: tar.TypeSymlink, Mode: 0o777, Target: "real"},
			{Path: "etc/tousr", Type: tar.TypeSymlink, Mode: 0o777, Target: "../usr/share/unit"},
			{Path: "etc/abs", Type: tar.TypeSymlink, Mode: 0o777, Target: "/usr/share/unit"},
			{Path: "etc/up", Type: tar.TypeSymlink, Mode: 0o777, Target: "../../../../../usr/share/unit"},
			{Path: "usr/share/unit/same.conf", Mode: 0o644, Content: []byte("same\n")},
			{Path: "etc/hl.conf", Mode: 0o644, Content: []byte("linked\n")},
			{Path: "etc/hl-link", Type: tar.TypeLink, Target: "etc/hl.conf"},
			{Path: "etc/hl-pair", Type: tar.TypeLink, Target: "etc/hl.conf"},
			{Path: "etc/gone", Type: tar.TypeDir, Mode: 0o755},
			{Path: "etc/gone/f", Mode: 0o644, Content: []byte("gone\n")},
			{Path: "etc/opq", Type: tar.TypeDir, Mode: 0o755},
			{Path: "etc/opq/old", Mode: 0o644, Content: []byte("old\n")},
		}},
		{
			Files:     []testbase.File{{Path: "etc/opq/new", Mode: 0o644, Content: []byte("new\n")}},
			Whiteouts: []string{"etc/gone"},
			Opaque:    []string{"etc/opq"},
		},
	}
}

// predict is revert.Predict, failing the test on an error.
func predict(t *testing.T, m *manifest.Manifest, tree fstree.Tree) []revert.Entry {
	t.Helper()
	entries, err := revert.Predict(context.Background(), m, tree)
	if err != nil {
		t.Fatalf("Predict: %v", err)
	}
	return entries
}

// diff is revert.Diff, failing the test on an error.
func diff(t *testing.T, m *manifest.Manifest, image, base manifest.ImageRef, tree fstree.Tree) *revert.Report {
	t.Helper()
	r, err := revert.Diff(context.Background(), m, image, base, tree)
	if err != nil {
		t.Fatalf("Diff: %v", err)
	}
	return r
}

// resolved sets where the entry lies in the image it was built on.
func resolved(e manifest.Entry, where string) manifest.Entry {
	e.ResolvedPath = where
	return e
}

// got is the part of an Entry TestCompare checks.
type got struct {
	Path, RequestedPath string
	Zone                revert.Zone
	Base                manifest.State
	Differs             []manifest.Attr
	Outcome             revert.Outcome
	Clobbered           bool
}

func TestCompare(t *testing.T) {
	ix := compareIndex(t, testbase.Options{ExtraLayers: compareLayers()})
	m := &manifest.Manifest{Entries: []manifest.Entry{
		// Whiteouts and opaque directories in the base: the path is absent.
		fileEntry("/etc/issue.d/50-legacy.issue", "This image predates the update layer.\n", 0o644, 0, 0),
		fileEntry("/etc/yum.repos.d/fedora.repo", "x", 0o644, 0, 0),
		dirEntry("/etc/gone", 0o755),
		fileEntry("/etc/gone/f", "gone\n", 0o644, 0, 0),
		fileEntry("/etc/opq/old", "old\n", 0o644, 0, 0),
		fileEntry("/etc/opq/new", "new\n", 0o644, 0, 0),
		// Symlinked parents.
		fileEntry("/etc/alt/x.conf", "x", 0o644, 0, 0),
		fileEntry("/etc/tousr/same.conf", "same\n", 0o644, 0, 0),
		fileEntry("/etc/abs/other.conf", "x", 0o644, 0, 0),
		fileEntry("/etc/up/climb.conf", "x", 0o644, 0, 0),
		resolved(fileEntry("/usr/local/bin/tool", "x", 0o755, 0, 0), "/var/usrlocal/bin/tool"),
		resolved(fileEntry(render.SSHKeysFile, "ssh-ed25519 AAAA\n", 0o600, 1000, 1000), "/var/home/core/.ssh/authorized_keys.d/ignition"),
		resolved(dirEntry("/usr/local", 0o755), "/var/usrlocal"),
		// The image has it under a real /usr/local (or /etc) directory,
		// the base moves it into /var: the node has nothing there.
		fileEntry("/usr/local/bin/moved", "x", 0o755, 0, 0),
		// A hard link in the base is the file it links to.
		fileEntry("/etc/hl-link", "linked\n", 0o644, 0, 0),
		// An owned hard link, which the base has too: the merge copies
		// /etc file by file, so the link is not kept.
		{Path: "/etc/hl-pair", Type: manifest.Hardlink, Target: "/etc/hl.conf", Source: manifest.Source{MachineConfig: "99-test", Field: "spec.config.storage.links[1]"}},
		// Each attribute that can differ.
		fileEntry("/etc/containers/registries.conf", "mine\n", 0o644, 0, 0),
		fileEntry("/etc/openvswitch/default.conf", "OVS_USER_ID=\"openvswitch:hugetlbfs\"\n", 0o644, 0, 0),
		fileEntry("/etc/ssh/sshd_config", "x", 0o640, 0, 0),
		dirEntry("/etc/sudoers.d", 0o755),
		linkEntry("/etc/os-release", "../usr/lib/os-release"),
		linkEntry("/etc/systemd/system/cri-o.service", "/dev/null"),
		fileEntry("/etc/modules-load.d/iptables.conf", "# Force-load legacy iptables so it is usable from pod network namespaces\nip_tables\n", 0o644, 0, 0),
		// Owned absences.
		absentEntry("/etc/systemd/system/multi-user.target.wants/openvswitch.service"),
		absentEntry("/etc/systemd/system/sockets.target.wants/docker.socket"),
		absentEntry("/usr/lib/systemd/system/openvswitch.service"),
		// Never deployed.
		fileEntry("/run/mcbake/x", "x", 0o644, 0, 0),
		// What the machine-config-daemon stores itself.
		fileEntry(render.CurrentConfig, "{}", 0o644, 0, 0),
		dirEntry("/etc/machine-config-daemon", 0o755),
	}}
	m.Sort()
	// Sorted by resolved path, as Compare returns them.
	want := []got{
		{Path: "/etc/containers/registries.conf", Zone: revert.ZoneEtc, Base: manifest.StateDiffers, Differs: []manifest.Attr{"content"}, Outcome: revert.Reverted, Clobbered: true},
		{Path: "/etc/gone", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Removed, Clobbered: true},
		{Path: "/etc/gone/f", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Removed, Clobbered: true},
		{Path: "/etc/hl-link", Zone: revert.ZoneEtc, Base: manifest.StateSame, Outcome: revert.Kept},
		{Path: "/etc/hl-pair", Zone: revert.ZoneEtc, Base: manifest.StateSame, Outcome: revert.Reverted, Clobbered: true},
		{Path: "/etc/issue.d/50-legacy.issue", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Removed, Clobbered: true},
		{Path: "/etc/machine-config-daemon", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Kept},
		{Path: render.CurrentConfig, Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Kept},
		{Path: "/etc/modules-load.d/iptables.conf", Zone: revert.ZoneEtc, Base: manifest.StateSame, Outcome: revert.Kept},
		{Path: "/etc/openvswitch/default.conf", Zone: revert.ZoneEtc, Base: manifest.StateDiffers, Differs: []manifest.Attr{"uid", "gid"}, Outcome: revert.Reverted, Clobbered: true},
		{Path: "/etc/opq/new", Zone: revert.ZoneEtc, Base: manifest.StateSame, Outcome: revert.Kept},
		{Path: "/etc/opq/old", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Removed, Clobbered: true},
		{Path: "/etc/os-release", Zone: revert.ZoneEtc, Base: manifest.StateSame, Outcome: revert.Kept},
		{Path: "/etc/real/x.conf", RequestedPath: "/etc/alt/x.conf", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Removed, Clobbered: true},
		{Path: "/etc/ssh/sshd_config", Zone: revert.ZoneEtc, Base: manifest.StateDiffers, Differs: []manifest.Attr{"content", "mode"}, Outcome: revert.Reverted, Clobbered: true},
		{Path: "/etc/sudoers.d", Zone: revert.ZoneEtc, Base: manifest.StateDiffers, Differs: []manifest.Attr{"mode"}, Outcome: revert.Reverted, Clobbered: true},
		{Path: "/etc/systemd/system/cri-o.service", Zone: revert.ZoneEtc, Base: manifest.StateDiffers, Differs: []manifest.Attr{"target"}, Outcome: revert.Reverted, Clobbered: true},
		{Path: "/etc/systemd/system/multi-user.target.wants/openvswitch.service", Zone: revert.ZoneEtc, Base: manifest.StateDiffers, Differs: []manifest.Attr{"type"}, Outcome: revert.Restored, Clobbered: true},
		{Path: "/etc/systemd/system/sockets.target.wants/docker.socket", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Kept},
		{Path: "/etc/yum.repos.d/fedora.repo", Zone: revert.ZoneEtc, Base: manifest.StateAbsent, Outcome: revert.Removed, Clobbered: true},
		{Path: "/run/mcbake/x", Zone: revert.ZoneDropped, Base: manifest.StateAbsent, Outcome: revert.Dropped},
		{Path: "/usr/lib/systemd/system/openvswitch.service", Zone: revert.ZoneUsr, Base: manifest.StateDiffers, Differs: []manifest.Attr{"type"}, Outcome: revert.Lost, Clobbered: true},
		{Path: "/usr/share/unit/climb.conf", RequestedPath: "/etc/up/climb.conf", Zone: revert.ZoneUsr, Base: manifest.StateAbsent, Outcome: revert.Lost, Clobbered: true},
		{Path: "/usr/share/unit/other.conf", RequestedPath: "/etc/abs/other.conf", Zone: revert.ZoneUsr, Base: manifest.StateAbsent, Outcome: revert.Lost, Clobbered: true},
		{Path: "/usr/share/unit/same.conf", RequestedPath: "/etc/tousr/same.conf", Zone: revert.ZoneUsr, Base: manifest.StateSame, Outcome: revert.Kept},
		{Path: "/var/home/core/.ssh/authorized_keys.d/ignition", RequestedPath: render.SSHKeysFile, Zone: revert.ZoneVar, Base: manifest.StateAbsent, Outcome: revert.Untouched},
		{Path: "/var/usrlocal", RequestedPath: "/usr/local", Zone: revert.ZoneVar, Base: manifest.StateSame, Outcome: revert.Untouched},
		{Path: "/var/usrlocal/bin/moved", RequestedPath: "/usr/local/bin/moved", Zone: revert.ZoneVar, Base: manifest.StateAbsent, Outcome: revert.Removed, Clobbered: true},
		{Path: "/var/usrlocal/bin/tool", RequestedPath: "/usr/local/bin/tool", Zone: revert.ZoneVar, Base: manifest.StateAbsent, Outcome: revert.Untouched},
	}
	entries := predict(t, m, ix)
	var gotEntries []got
	for _, e := range entries {
		gotEntries = append(gotEntries, got{Path: e.Path, RequestedPath: e.RequestedPath, Zone: e.Zone, Base: e.Base,
			Differs: e.Differs, Outcome: e.Outcome, Clobbered: e.Clobbered})
		if e.Reason == "" {
			t.Errorf("Compare: %s has no reason", e.Path)
		}
		if w, ok := m.Lookup(e.Want.Path); !ok || !cmp.Equal(*w, e.Want) || e.Source != w.Source {
			t.Errorf("Compare: %s: Want/Source are not the manifest entry %s", e.Path, e.Want.Path)
		}
	}
	if diff := cmp.Diff(want, gotEntries, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("Compare (-want +got):\n%s", diff)
	}
}

// TestCompareOtherBaseSymlinks: a path is resolved through the symlinks of
// the base it is compared with, not those of the base it was built on
// (the manifest's ResolvedPath). In a base whose /usr/local is a real
// directory, /usr/local/bin/tool is under /usr: replaced by the base, so
// lost unless the base has the same file.
func TestCompareOtherBaseSymlinks(t *testing.T) {
	layers := testbase.DefaultLayers()
	root := &layers[0]
	for i, f := range root.Files {
		if f.Path == "usr/local" {
			root.Files[i] = testbase.File{Path: "usr/local", Type: tar.TypeDir, Mode: 0o755}
		}
	}
	root.Files = append(root.Files, testbase.File{Path: "usr/local/bin/same", Mode: 0o755, Content: []byte("same\n")})
	ix := compareIndex(t, testbase.Options{Layers: layers})
	tool := fileEntry("/usr/local/bin/tool", "x", 0o755, 0, 0)
	tool.ResolvedPath = "/var/usrlocal/bin/tool"
	same := fileEntry("/usr/local/bin/same", "same\n", 0o755, 0, 0)
	same.ResolvedPath = "/var/usrlocal/bin/same"
	m := &manifest.Manifest{Entries: []manifest.Entry{same, tool}}
	var gotEntries []got
	for _, e := range predict(t, m, ix) {
		gotEntries = append(gotEntries, got{Path: e.Path, RequestedPath: e.RequestedPath, Zone: e.Zone, Base: e.Base, Outcome: e.Outcome, Clobbered: e.Clobbered})
	}
	want := []got{
		{Path: "/usr/local/bin/same", Zone: revert.ZoneUsr, Base: manifest.StateSame, Outcome: revert.Kept},
		{Path: "/usr/local/bin/tool", Zone: revert.ZoneUsr, Base: manifest.StateAbsent, Outcome: revert.Lost, Clobbered: true},
	}
	if diff := cmp.Diff(want, gotEntries); diff != "" {
		t.Errorf("Compare against a base without the /usr/local symlink (-want +got):\n%s", diff)
	}
}

func TestDiffReport(t *testing.T) {
	ix := compareIndex(t, testbase.Options{})
	m := &manifest.Manifest{Entries: []manifest.Entry{
		fileEntry("/etc/containers/registries.conf", "mine\n", 0o644, 0, 0),
		fileEntry("/etc/mcbake/new.conf", "new\n", 0o644, 0, 0),
		fileEntry("/etc/modules-load.d/iptables.conf", "# Force-load legacy iptables so it is usable from pod network namespaces\nip_tables\n", 0o644, 0, 0),
		resolved(fileEntry("/usr/local/bin/tool", "x", 0o755, 0, 0), "/var/usrlocal/bin/tool"),
		absentEntry("/etc/systemd/system/multi-user.target.wants/openvswitch.service"),
	}}
	image, b := manifest.ImageRef{Reference: "oci:/l:latest", Digest: sha("l")}, manifest.ImageRef{Reference: "oci:/b:latest", Digest: sha("b")}
	r := diff(t, m, image, b, ix)
	if !cmp.Equal(r.Image, image) || !cmp.Equal(r.Base, b) {
		t.Errorf("Diff image, base = %v, %v, want %v, %v", r.Image, r.Base, image, b)
	}
	wantSummary := revert.Summary{Total: 5, Clobbered: 3,
		ByOutcome: map[revert.Outcome]int{revert.Reverted: 1, revert.Removed: 1, revert.Kept: 1, revert.Untouched: 1, revert.Restored: 1},
		ByZone:    map[revert.Zone]int{revert.ZoneEtc: 4, revert.ZoneVar: 1}}
	if diff := cmp.Diff(wantSummary, r.Summary); diff != "" {
		t.Errorf("Diff summary (-want +got):\n%s", diff)
	}
	wantClobbered := []string{"/etc/containers/registries.conf", "/etc/mcbake/new.conf", "/etc/systemd/system/multi-user.target.wants/openvswitch.service"}
	if diff := cmp.Diff(wantClobbered, r.Clobbered()); diff != "" {
		t.Errorf("Report.Clobbered (-want +got):\n%s", diff)
	}

	var js bytes.Buffer
	if err := r.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, "diff", js.Bytes())
	schematest.Invalid(t, "diff", js.Bytes(), "an entry without a reason", func(v any) { delete(schematest.Object(v, "entries", 0), "reason") })
	schematest.Invalid(t, "diff", js.Bytes(), "clobbered as a string", func(v any) { schematest.Object(v, "entries", 0)["clobbered"] = "yes" })
	schematest.Invalid(t, "diff", js.Bytes(), "no schemaVersion", func(v any) { delete(schematest.Object(v), "schemaVersion") })
	schematest.Invalid(t, "diff", js.Bytes(), "an unknown outcome counted", func(v any) { schematest.Object(v, "summary", "byOutcome")["gone"] = 1 })
	var decoded struct {
		Base, Image manifest.ImageRef
		Entries     []struct {
			Path      string          `json:"path"`
			Zone      revert.Zone     `json:"zone"`
			Base      string          `json:"base"`
			Differs   []manifest.Attr `json:"differs"`
			Clobbered bool            `json:"clobbered"`
			Outcome   revert.Outcome  `json:"outcome"`
			Reason    string          `json:"reason"`
			Source    manifest.Source
		}
		Summary revert.Summary
	}
	if err := json.Unmarshal(js.Bytes(), &decoded); err != nil {
		t.Fatalf("WriteJSON output does not decode: %v\n%s", err, js.String())
	}
	if len(decoded.Entries) != 5 || decoded.Entries[0].Path != "/etc/containers/registries.conf" ||
		decoded.Entries[0].Differs[0] != "content" || !decoded.Entries[0].Clobbered || decoded.Entries[0].Source.MachineConfig != "99-test" {
		t.Errorf("WriteJSON entries = %+v", decoded.Entries)
	}

	var plain, colored bytes.Buffer
	if err := r.WriteText(&plain, revert.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := r.WriteText(&colored, revert.TextOptions{Color: true}); err != nil {
		t.Fatal(err)
	}
	text := plain.String()
	for _, s := range []string{"5 owned paths, 3 clobbered", "removed (1) — clobbered", "reverted (1) — clobbered", "restored (1) — clobbered",
		"kept (1)", "untouched (1)", "/var/usrlocal/bin/tool", "base differs [content]"} {
		if !strings.Contains(text, s) {
			t.Errorf("WriteText output lacks %q:\n%s", s, text)
		}
	}
	if strings.Contains(text, "\x1b[") {
		t.Errorf("WriteText(color=false) has ANSI escapes:\n%q", text)
	}
	if !strings.Contains(colored.String(), "\x1b[1;31m") {
		t.Errorf("WriteText(color=true) has no red clobber heading:\n%q", colored.String())
	}
	if strings.Index(text, "removed (1)") > strings.Index(text, "kept (1)") {
		t.Errorf("WriteText lists kept before the clobbers:\n%s", text)
	}
}

// TestDiffCertificateWriterFiles: the certificate writer's files are
// marked managed (from the manifest, or by path for older manifests),
// counted and labelled in the text report, and left out of the plan.
func TestDiffCertificateWriterFiles(t *testing.T) {
	ix := compareIndex(t, testbase.Options{})
	ca := fileEntry("/etc/kubernetes/kubelet-ca.crt", "ca\n", 0o644, 0, 0)
	ca.Managed = manifest.ManagedByCertificateWriter
	pull := fileEntry("/etc/mco/internal-registry-pull-secret.json", "{}", 0o644, 0, 0) // an older manifest: no mark
	m := &manifest.Manifest{Entries: []manifest.Entry{ca, pull, fileEntry("/etc/mcbake/new.conf", "new\n", 0o644, 0, 0)}}
	r := diff(t, m, manifest.ImageRef{Digest: sha("l")}, manifest.ImageRef{Digest: sha("b")}, ix)
	managed := map[string]bool{}
	for _, e := range r.Entries {
		managed[e.Path] = e.Managed
	}
	want := map[string]bool{"/etc/kubernetes/kubelet-ca.crt": true, "/etc/mco/internal-registry-pull-secret.json": true, "/etc/mcbake/new.conf": false}
	if diff := cmp.Diff(want, managed); diff != "" {
		t.Errorf("Diff Managed by path (-want +got):\n%s", diff)
	}
	var text bytes.Buffer
	if err := r.WriteText(&text, revert.TextOptions{}); err != nil {
		t.Fatal(err)
	}
	for _, s := range []string{"2 managed by the certificate writer", "/etc/kubernetes/kubelet-ca.crt", "(the certificate writer manages it: never rewritten)"} {
		if !strings.Contains(text.String(), s) {
			t.Errorf("WriteText output lacks %q:\n%s", s, text.String())
		}
	}
	for _, line := range strings.Split(text.String(), "\n") {
		if strings.Contains(line, "/etc/mcbake/new.conf") && strings.Contains(line, "certificate writer") {
			t.Errorf("WriteText marks /etc/mcbake/new.conf managed: %q", line)
		}
	}
	p, err := revert.NewPlan(r)
	if err != nil {
		t.Fatal(err)
	}
	for _, pe := range p.Rewrite {
		if pe.Path != "/etc/mcbake/new.conf" {
			t.Errorf("NewPlan rewrites %s, want only /etc/mcbake/new.conf", pe.Path)
		}
	}
}

// ExampleOutcome_Clobbers lists the outcomes that leave a path different
// from what the MachineConfig wants.
func ExampleOutcome_Clobbers() {
	for _, o := range []revert.Outcome{revert.Kept, revert.Removed, revert.Reverted, revert.Restored, revert.Lost, revert.Untouched, revert.Dropped} {
		fmt.Println(o, o.Clobbers())
	}
	// Output:
	// kept false
	// removed true
	// reverted true
	// restored true
	// lost true
	// untouched false
	// dropped false
}
