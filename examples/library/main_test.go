package main

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/opencontainers/go-digest"
)

// TestRun reverts a node root to a base that lacks a file and a unit the
// MachineConfig bakes: run must write both back.
func TestRun(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: node.Rewrite sets owners")
	}
	dir := t.TempDir()
	base, root := filepath.Join(dir, "base"), filepath.Join(dir, "root")
	for _, d := range []string{base + "/etc", root + "/etc"} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	mc := filepath.Join(dir, "mc.yaml")
	err := os.WriteFile(mc, []byte(`apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 99-example}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files: [{path: /etc/example.conf, mode: 420, contents: {source: "data:,hello%0A"}}]
    systemd:
      units:
        - name: example.service
          enabled: true
          contents: "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"
`), 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := run(context.Background(), digest.FromString("base"), base, root, []string{mc}); err != nil {
		t.Fatalf("run: %v", err)
	}
	for _, p := range []string{"etc/example.conf", "etc/systemd/system/example.service", "etc/systemd/system/multi-user.target.wants/example.service"} {
		if _, err := os.Lstat(filepath.Join(root, p)); err != nil {
			t.Errorf("after run: %v", err)
		}
	}
	if b, _ := os.ReadFile(filepath.Join(root, "etc/example.conf")); string(b) != "hello\n" {
		t.Errorf("etc/example.conf = %q, want hello", b)
	}
}
