package main

import (
	"bytes"
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestRenderPool: --pool makes MachineConfigs without the role label the
// pool's own, merged after the worker ones; a MachineConfig the pool does
// not merge is refused.
func TestRenderPool(t *testing.T) {
	dir := t.TempDir()
	write := func(name, doc string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	worker := write("w.yaml", `kind: MachineConfig
metadata: {name: 99-worker, labels: {machineconfiguration.openshift.io/role: worker}}
spec: {config: {ignition: {version: 3.5.0}, storage: {files: [{path: /etc/x, contents: {source: "data:,worker"}}]}}}
`)
	mine := write("mine.yaml", `kind: MachineConfig
metadata: {name: 10-mine}
spec: {config: {ignition: {version: 3.5.0}, storage: {files: [{path: /etc/x, contents: {source: "data:,mine"}}]}}}
`)
	master := write("m.yaml", `kind: MachineConfig
metadata: {name: 00-master, labels: {machineconfiguration.openshift.io/role: master}}
`)
	run := func(args ...string) (int, string) {
		var out, errb bytes.Buffer
		code := execute(context.Background(), args, strings.NewReader(""), &out, &errb)
		return code, errb.String()
	}
	for _, tt := range []struct {
		pool, want string
	}{{"", "worker"}, {"worker", "worker"}, {"infra", "mine"}} {
		out := filepath.Join(dir, "out-"+tt.pool)
		args := []string{"render", "-f", worker, "-f", mine, "-o", out}
		if tt.pool != "" {
			args = append(args, "--pool", tt.pool)
		}
		if code, stderr := run(args...); code != 0 {
			t.Fatalf("mcbake %s: exit %d\n%s", strings.Join(args, " "), code, stderr)
		}
		got, err := os.ReadFile(filepath.Join(out, "rootfs/etc/x"))
		if err != nil || string(got) != tt.want {
			t.Errorf("render --pool %q: /etc/x = %q, %v; want %q", tt.pool, got, err, tt.want)
		}
	}
	code, stderr := run("render", "-f", worker, "-f", master, "-o", filepath.Join(dir, "mixed"))
	if code != 2 || !strings.Contains(stderr, "no single pool merges them; give the pool (--pool)") {
		t.Errorf("render worker+master: exit %d, stderr %q; want 2 and the pool error", code, stderr)
	}
	code, stderr = run("render", "-f", worker, "-f", master, "--pool", "master", "-o", filepath.Join(dir, "master"))
	if code != 2 || !strings.Contains(stderr, `99-worker: metadata.labels[machineconfiguration.openshift.io/role]: role "worker" is not merged by pool "master"`) {
		t.Errorf("render --pool master worker+master: exit %d, stderr %q; want 2 and the role error", code, stderr)
	}
}

// TestRenderButane: mcbake render -f config.bu bakes what the Butane
// config says; a Butane error names the file and line.
func TestRenderButane(t *testing.T) {
	dir := t.TempDir()
	bu := filepath.Join(dir, "config.bu")
	if err := os.WriteFile(bu, []byte(`variant: openshift
version: 4.18.0
metadata:
  name: 99-butane
  labels: {machineconfiguration.openshift.io/role: worker}
storage:
  files:
    - path: /etc/from-butane.conf
      mode: 0640
      contents: {inline: "hello from butane\n"}
`), 0o644); err != nil {
		t.Fatal(err)
	}
	var out, errb bytes.Buffer
	if code := execute(context.Background(), []string{"render", "-f", bu, "-o", filepath.Join(dir, "out")}, strings.NewReader(""), &out, &errb); code != 0 {
		t.Fatalf("mcbake render -f config.bu: exit %d\n%s", code, errb.String())
	}
	p := filepath.Join(dir, "out", "rootfs", "etc", "from-butane.conf")
	got, err := os.ReadFile(p)
	fi, serr := os.Stat(p)
	if err != nil || serr != nil || string(got) != "hello from butane\n" || fi.Mode().Perm() != 0o640 {
		t.Errorf("rendered /etc/from-butane.conf = %q (%v, %v), want the Butane content, mode 0640", got, err, serr)
	}
	bad := filepath.Join(dir, "bad.bu")
	if err := os.WriteFile(bad, []byte("variant: openshift\nversion: 4.18.0\nmetadata: {name: 99-bad, labels: {machineconfiguration.openshift.io/role: worker}}\nstorage:\n  files:\n    - path: relative\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	code := execute(context.Background(), []string{"render", "-f", bad, "-o", filepath.Join(dir, "bad")}, strings.NewReader(""), &out, &errb)
	if want := bad + ": 99-bad: storage.files[0].path: Butane: line 6, column 13: path not absolute"; code != 2 || !strings.Contains(errb.String(), want) {
		t.Errorf("mcbake render -f bad.bu: exit %d, stderr %q; want 2 and %q", code, errb.String(), want)
	}
	// A misspelt key is Butane's warning: rendered without it (the
	// default mode), and logged.
	typo := filepath.Join(dir, "typo.bu")
	if err := os.WriteFile(typo, []byte("variant: openshift\nversion: 4.18.0\nmetadata: {name: 99-typo, labels: {machineconfiguration.openshift.io/role: worker}}\nstorage:\n  files:\n    - path: /etc/typo.conf\n      mdoe: 0600\n      contents: {inline: typo}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	errb.Reset()
	code = execute(context.Background(), []string{"render", "-f", typo, "-o", filepath.Join(dir, "typo")}, strings.NewReader(""), &out, &errb)
	var mode fs.FileMode
	if fi, err := os.Stat(filepath.Join(dir, "typo", "rootfs", "etc", "typo.conf")); err == nil {
		mode = fi.Mode()
	}
	if want := typo + ": 99-typo: storage.files[0].mdoe: Butane: line 7, column 7: unused key mdoe"; code != 0 || !strings.Contains(errb.String(), "level=WARN") || !strings.Contains(errb.String(), want) || mode != 0o644 {
		t.Errorf("mcbake render -f typo.bu: exit %d, stderr %q, mode %v; want 0, a warning with %q and mode 0644", code, errb.String(), mode, want)
	}
}
