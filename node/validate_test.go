package node

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/render"
)

// TestOnDisk starts from a node the MachineConfig was applied to (by
// Rewrite, checked in TestRewrite), breaks one path per mismatch kind,
// and checks OnDisk reports exactly those.
func TestOnDisk(t *testing.T) {
	requireRoot(t)
	mcs := parseMC(t, nodeMC)
	dir := newNode(t)
	root := openRoot(t, dir)
	res := renderOnNode(t, mcs, dir)
	if _, err := rewrite(context.Background(), root, planFor(res, true), res, RewriteOptions{}); err != nil {
		t.Fatalf("Rewrite: %v", err)
	}
	// The machine-config-daemon made its directory when it stored the
	// config (the plan leaves both to it).
	if err := os.Mkdir(filepath.Join(dir, "etc", "machine-config-daemon"), 0o755); err != nil {
		t.Fatal(err)
	}
	clean, err := check(root, renderOnNode(t, mcs, dir))
	if err != nil {
		t.Fatalf("OnDisk: %v", err)
	}
	if len(clean.Mismatches) != 0 {
		t.Fatalf("OnDisk after Rewrite: %+v, want no mismatch", clean.Mismatches)
	}

	host := func(p string) string { return filepath.Join(dir, p) }
	steps := []func() error{
		// missing
		func() error { return os.Remove(host("etc/mcbake/new/deep/b.conf")) },
		// present: the base's link for the disabled unit is back
		func() error {
			return os.Symlink("/usr/lib/systemd/system/foo.service", host("etc/systemd/system/multi-user.target.wants/foo.service"))
		},
		// content, same mode and owner
		func() error { return os.WriteFile(host("etc/mcbake/a.conf"), []byte("changed\n"), 0o600) },
		// mode
		func() error { return os.Chmod(host("etc/mcbake/mode.conf"), 0o644) },
		// owner
		func() error { return os.Lchown(host("etc/mcbake/owner.conf"), 0, 0) },
		// directory mode and owner
		func() error { return os.Chmod(host("etc/mcbake/dir"), 0o755) },
		func() error { return os.Lchown(host("etc/mcbake/dir"), 1000, 0) },
		// type: a file where the link belongs
		func() error { return os.Remove(host("etc/mcbake/link")) },
		func() error { return os.WriteFile(host("etc/mcbake/link"), []byte("a.conf"), 0o644) },
		// target: the mask points elsewhere
		func() error { return os.Remove(host("etc/systemd/system/baz.service")) },
		func() error {
			return os.Symlink("/usr/lib/systemd/system/baz.service", host("etc/systemd/system/baz.service"))
		},
		// the stored config is the MCD's own: never compared
		func() error { return os.WriteFile(host(render.CurrentConfig[1:]), []byte("{}"), 0o600) },
	}
	for i, step := range steps {
		if err := step(); err != nil {
			t.Fatalf("breaking the node, step %d: %v", i, err)
		}
	}
	res = renderOnNode(t, mcs, dir)
	rep, err := check(root, res)
	if err != nil {
		t.Fatalf("OnDisk: %v", err)
	}
	src := func(field string) string { return "99-node " + field }
	type row struct{ Path, Kinds, Want, Got, Source string }
	var got []row
	for _, m := range rep.Mismatches {
		got = append(got, row{m.Path, strings.Join(m.Kinds, ","), m.Want, m.Got, m.Source.MachineConfig + " " + m.Source.Field})
	}
	want := []row{
		{"/etc/mcbake/a.conf", "content", "file 0600 1000:1001 " + string(sha("a\n"))[:19], "file 0600 1000:1001 " + string(sha("changed\n"))[:19], src("spec.config.storage.files[0]")},
		{"/etc/mcbake/dir", "mode,owner", "directory 0750 0:0", "directory 0755 1000:0", src("spec.config.storage.directories[0]")},
		{"/etc/mcbake/link", "type", "symlink -> a.conf 0:0", "file 0644 0:0 " + string(sha("a.conf"))[:19], src("spec.config.storage.links[0]")},
		{"/etc/mcbake/mode.conf", "mode", "file 0640 0:0 " + string(sha("mode\n"))[:19], "file 0644 0:0 " + string(sha("mode\n"))[:19], src("spec.config.storage.files[1]")},
		{"/etc/mcbake/new/deep/b.conf", "missing", "file 0644 0:0 " + string(sha("b\n"))[:19], "absent", src("spec.config.storage.files[3]")},
		{"/etc/mcbake/owner.conf", "owner", "file 0644 1000:0 " + string(sha("owner\n"))[:19], "file 0644 0:0 " + string(sha("owner\n"))[:19], src("spec.config.storage.files[2]")},
		{"/etc/systemd/system/baz.service", "target", "symlink -> /dev/null 0:0", "symlink -> /usr/lib/systemd/system/baz.service 0:0", src("spec.config.systemd.units[baz.service].mask")},
		{"/etc/systemd/system/multi-user.target.wants/foo.service", "present", "absent", "symlink -> /usr/lib/systemd/system/foo.service 0:0", src("spec.config.systemd.units[foo.service].enabled")},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("OnDisk mismatches (-want +got):\n%s", diff)
	}
	if rep.Checked != len(res.Entries)-1 || rep.Root != dir {
		t.Errorf("OnDisk checked %d paths of %s, want %d of %s (every rendered entry but the stored config)", rep.Checked, rep.Root, len(res.Entries)-1, dir)
	}

	var text, js bytes.Buffer
	if err := rep.WriteText(&text); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(text.String(), "8 mismatch(es)") || !strings.Contains(text.String(), "[mode owner]") {
		t.Errorf("WriteText:\n%s", text.String())
	}
	if err := rep.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, "ondisk", js.Bytes())
	schematest.Invalid(t, "ondisk", js.Bytes(), "kinds as a string", func(v any) { schematest.Object(v, "mismatches", 0)["kinds"] = "mode" })
	schematest.Invalid(t, "ondisk", js.Bytes(), "a mismatch without want", func(v any) { delete(schematest.Object(v, "mismatches", 0), "want") })
	schematest.Invalid(t, "ondisk", js.Bytes(), "no schemaVersion", func(v any) { delete(schematest.Object(v), "schemaVersion") })
	var back Report
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || !cmp.Equal(*rep, back) {
		t.Errorf("WriteJSON does not round-trip (%v):\n%s", err, js.String())
	}
}

// validated runs Validate on the root dir and lists its mismatches as
// "PATH KIND,KIND".
func validated(t *testing.T, dir string, mcs []*machineconfig.MachineConfig) []string {
	t.Helper()
	rep, err := Validate(context.Background(), openRoot(t, dir), mcs)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range rep.Mismatches {
		got = append(got, m.Path+" "+strings.Join(m.Kinds, ","))
	}
	return got
}

// TestOnDiskCertificateFiles: the files the certificate writer rotates are
// never compared, but the user CA bundle is: the MCD writes it from the
// MachineConfig on every update and its checkV3Files validates it.
func TestOnDiskCertificateFiles(t *testing.T) {
	const userCA = "/etc/pki/ca-trust/source/anchors/openshift-config-user-ca-bundle.crt"
	mcs := parseMC(t, `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 99-ca}
spec:
  config:
    ignition: {version: 3.5.0}
    storage:
      files:
      - {path: /etc/kubernetes/kubelet-ca.crt, mode: 0644, contents: {source: "data:,ca%0A"}}
      - {path: `+userCA+`, mode: 0600, contents: {source: "data:,user%0A"}}
`)
	dir := filepath.Join(t.TempDir(), "root")
	// The MCD made its directory when it stored the config.
	if err := os.MkdirAll(filepath.Join(dir, "etc", "machine-config-daemon"), 0o755); err != nil {
		t.Fatal(err)
	}
	for p, content := range map[string]string{"/etc/kubernetes/kubelet-ca.crt": "rotated\n", userCA: "other\n"} {
		full := filepath.Join(dir, p)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if want, got := []string{userCA + " content,mode"}, validated(t, dir, mcs); !cmp.Equal(want, got) {
		t.Errorf("Validate() mismatches = %q, want %q (the rotated kubelet CA is the certificate writer's)", got, want)
	}
}

// TestOnDiskEmptyDropin: a drop-in with empty contents may exist as a
// zero-length 0644 file, as the MCD's checkV3Dropin allows (Ignition wrote
// it on nodes from before 4.7); with content, another mode or as a
// symlink it is reported present.
func TestOnDiskEmptyDropin(t *testing.T) {
	mcs := parseMC(t, `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 99-dropin}
spec:
  config:
    ignition: {version: 3.5.0}
    systemd:
      units:
      - name: kubelet.service
        dropins: [{name: 10-mco-default-env.conf, contents: ""}]
`)
	const p = "/etc/systemd/system/kubelet.service.d/10-mco-default-env.conf"
	for _, c := range []struct {
		name    string
		make    func(full string) error
		present bool
	}{
		{"absent", func(string) error { return nil }, false},
		{"zero-length 0644", func(full string) error { return os.WriteFile(full, nil, 0o644) }, false},
		{"zero-length 0600", func(full string) error { return os.WriteFile(full, nil, 0o600) }, true},
		{"with content", func(full string) error { return os.WriteFile(full, []byte("[Service]\n"), 0o644) }, true},
		{"symlink to an empty file", func(full string) error {
			if err := os.WriteFile(full+".real", nil, 0o644); err != nil {
				return err
			}
			return os.Symlink(filepath.Base(full)+".real", full)
		}, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "root")
			full := filepath.Join(dir, p)
			for _, d := range []string{filepath.Dir(full), filepath.Join(dir, "etc", "machine-config-daemon")} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if err := c.make(full); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(filepath.Dir(full), 0o755); err != nil {
				t.Fatal(err)
			}
			got := validated(t, dir, mcs)
			var want []string
			if c.present {
				want = []string{p + " present"}
			}
			if !cmp.Equal(want, got) {
				t.Errorf("Validate() mismatches = %q, want %q", got, want)
			}
		})
	}
}
