package main

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/mcbake/mcbake/internal/testbase"
	"github.com/mcbake/mcbake/revert"
)

// TestNodeApplyPlanScript runs templates/node/mcbake-apply-plan.sh against
// a node root made from the base, with rpm-ostree and systemctl replaced by
// stubs: on the plan's base it rewrites, validates and retires the plan; on
// another image it does nothing.
func TestNodeApplyPlanScript(t *testing.T) {
	e := newEnv(t)
	img := "oci:" + filepath.Join(e.dir, "layered") + ":latest"
	e.mustBuild(t, e.base, img, workerMC)
	planFile := filepath.Join(e.dir, "plan.json")
	if code, _, stderr := e.run(append([]string{"plan", "--quiet", "--base", e.base, "--image", img, "-o", planFile}, e.imageArgs()...)...); code != 0 {
		t.Fatalf("plan: exit %d: %s", code, stderr)
	}
	plan, err := revert.ReadPlan(planFile)
	if err != nil {
		t.Fatal(err)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	script, err := filepath.Abs("../../templates/node/mcbake-apply-plan.sh")
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		booted  string
		applied bool
		compact bool // the plan re-serialised without whitespace
	}{
		{"booted the plan's base", plan.Base.Digest.String(), true, false},
		{"booted another image", plan.Image.Digest.String(), false, false},
		{"compact plan", plan.Base.Digest.String(), true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			root := filepath.Join(dir, "root")
			unpacked, err := testbase.Unpack(filepath.Join(e.dir, "base"))
			if err != nil {
				t.Fatal(err)
			}
			writeTree(t, root, unpacked)
			stage := filepath.Join(root, "etc/mcbake/revert")
			copyFile(t, planFile, filepath.Join(stage, "plan.json"))
			if tc.compact {
				raw, _ := os.ReadFile(planFile)
				var b bytes.Buffer
				if err := json.Compact(&b, raw); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(stage, "plan.json"), b.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			copyFile(t, workerMC, filepath.Join(stage, "machineconfigs", "worker.json"))
			bin := filepath.Join(dir, "bin")
			status, _ := json.Marshal(map[string]any{"deployments": []map[string]any{{"booted": true, "container-image-reference-digest": tc.booted}}})
			writeExec(t, filepath.Join(bin, "rpm-ostree"), "#!/bin/sh\necho '"+string(status)+"'\n")
			writeExec(t, filepath.Join(bin, "systemctl"), "#!/bin/sh\necho \"$@\" >>"+filepath.Join(dir, "systemctl.log")+"\n")
			cmd := exec.Command("bash", script)
			cmd.Env = append(os.Environ(), "PATH="+bin+":"+os.Getenv("PATH"), "MCBAKE="+self, "MCBAKE_TEST_AS_CLI=1", "MCBAKE_ROOT="+root)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("script: %v\n%s", err, out)
			}
			_, statErr := os.Stat(filepath.Join(root, "etc/kubernetes/kubelet.conf"))
			if got := statErr == nil; got != tc.applied {
				t.Errorf("kubelet.conf restored = %v, want %v\n%s", got, tc.applied, out)
			}
			_, statErr = os.Stat(filepath.Join(stage, "plan.json"))
			if retired := os.IsNotExist(statErr); retired != tc.applied {
				t.Errorf("plan retired = %v, want %v", retired, tc.applied)
			}
			log, _ := os.ReadFile(filepath.Join(dir, "systemctl.log"))
			if got := strings.Contains(string(log), "daemon-reload"); got != tc.applied {
				t.Errorf("systemctl daemon-reload called = %v, want %v (log %q)", got, tc.applied, log)
			}
		})
	}
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	b, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

func writeExec(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
		t.Fatal(err)
	}
}

// TestNodeRevertUnit checks the unit parses with systemd's syntax, runs the
// script before kubelet and crio, and is enabled from multi-user.target.
func TestNodeRevertUnit(t *testing.T) {
	f, err := os.Open("../../templates/node/mcbake-revert.service")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	opts, err := unit.DeserializeOptions(f)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, o := range opts {
		got[o.Section+"."+o.Name] = o.Value
	}
	for key, want := range map[string]string{
		"Service.ExecStart":        "/var/lib/mcbake/mcbake-apply-plan.sh",
		"Service.Type":             "oneshot",
		"Install.WantedBy":         "multi-user.target",
		"Unit.ConditionPathExists": "/etc/mcbake/revert/plan.json",
	} {
		if got[key] != want {
			t.Errorf("%s = %q, want %q", key, got[key], want)
		}
	}
	for _, u := range []string{"kubelet.service", "crio.service"} {
		if !strings.Contains(got["Unit.Before"], u) {
			t.Errorf("Unit.Before = %q, want it to contain %s", got["Unit.Before"], u)
		}
	}
}
