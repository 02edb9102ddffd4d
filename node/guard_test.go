package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/nodetest"
	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/roottest"
	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/node"
)

const (
	guardBDigest = "sha256:b000000000000000000000000000000000000000000000000000000000000b0b"
	guardLDigest = "sha256:1000000000000000000000000000000000000000000000000000000000000101"
)

// storedByDaemon is the MachineConfig mc (YAML) as the
// machine-config-daemon stores it, with osImageURL the target.
func storedByDaemon(t *testing.T, mc string, osImageURL string) []byte {
	t.Helper()
	mcs, err := machineconfig.Parse("mc.yaml", []byte(mc))
	if err != nil {
		t.Fatal(err)
	}
	return nodetest.StoredByDaemon(t, mcs[0], osImageURL)
}

// guardSetup stages B after the node (on L) got stored as its config
// what storedConfig returns, and currentimage image when not empty. B is
// left staged: without a bootloader entry, as before finalization.
func guardSetup(t *testing.T, stored []byte, image string) (ostreetest.Staged, *node.Deployment, *node.Deployment) {
	t.Helper()
	st, _, _ := setupWith(t, ostreetest.StageOptions{
		BMeta: map[string]string{"ostree.manifest-digest": guardBDigest},
		LMeta: map[string]string{"ostree.manifest-digest": guardLDigest},
		MCDWrite: func(etc string) error {
			dir := filepath.Join(etc, "machine-config-daemon")
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return err
			}
			if image != "" {
				if err := os.WriteFile(filepath.Join(dir, "currentimage"), []byte(image), 0o644); err != nil {
					return err
				}
			}
			return os.WriteFile(filepath.Join(dir, "currentconfig"), stored, 0o644)
		}})
	_, booted, staged := deployments(t, st)
	entry, _ := newestEntry(t, filepath.Join(st.Sysroot, "boot"))
	if err := os.Remove(entry); err != nil {
		t.Fatal(err)
	}
	return st, booted, staged
}

func readGuardReport(t *testing.T, booted *node.Deployment) *node.GuardReport {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(booted.Var(), node.GuardFile))
	if err != nil {
		t.Fatalf("the guard's report: %v", err)
	}
	schematest.Validate(t, "guard", b)
	schematest.Invalid(t, "guard", b, "written as a string", func(v any) { schematest.Object(v)["written"] = "1" })
	schematest.Invalid(t, "guard", b, "no action", func(v any) { delete(schematest.Object(v), "action") })
	var rep node.GuardReport
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatalf("the guard's report: %v\n%s", err, b)
	}
	return &rep
}

// TestGuard: with the config the MCD stores (no kind) naming the staged
// image by digest, the guard prepares the staged deployment exactly as
// prepare-revert does, and reports it under /var.
func TestGuard(t *testing.T) {
	st, booted, staged := guardSetup(t, storedByDaemon(t, prepareMC, "quay.example/ocp/base@"+guardBDigest), "")
	rep, err := node.Guard(context.Background(), st.Sysroot, nil)
	if err != nil {
		t.Fatalf("Guard: %v (%+v)", err, rep)
	}
	if rep.Action != node.GuardPrepared || rep.Written == 0 || rep.Staged.Dir != staged.Dir || rep.MachineConfig != "99-worker-prepare" {
		t.Fatalf("Guard = %+v, want the staged deployment prepared for 99-worker-prepare", rep)
	}
	if got := readGuardReport(t, booted); got.Action != node.GuardPrepared || got.Written != rep.Written {
		t.Errorf("the report under /var = %+v, want %+v", got, rep)
	}
	if _, err := os.Stat(filepath.Join(staged.Dir, "etc/systemd/system/kubelet.service")); err != nil {
		t.Errorf("a path finalization would lose was not written: %v", err)
	}
	// A second shutdown (say, a stop of the unit before the reboot)
	// finds nothing to write.
	again, err := node.Guard(context.Background(), st.Sysroot, nil)
	if err != nil || again.Action != node.GuardPrepared || again.Written != 0 {
		t.Errorf("Guard again = %+v, %v; want nothing written", again, err)
	}
}

// TestGuardOtherTransition: a stored config whose target is not the
// staged image (the MCD has not stored this transition's config, or the
// staging was not the MCD's) leaves the staged deployment alone.
func TestGuardOtherTransition(t *testing.T) {
	for name, tc := range map[string]struct{ osImageURL, image string }{
		"osImageURL of another image":    {"quay.example/ocp/base@" + guardLDigest, ""},
		"currentimage of another image":  {"quay.example/ocp/base@" + guardBDigest, "quay.example/ocp/layered@" + guardLDigest},
		"no image":                       {"", ""},
		"a tag, and no origin to say so": {"quay.example/ocp/base:4.19", ""},
	} {
		t.Run(name, func(t *testing.T) {
			st, booted, staged := guardSetup(t, storedByDaemon(t, prepareMC, tc.osImageURL), tc.image)
			before := roottest.Tree(t, staged.Dir)
			// A killed run's temporary entry, which the guard sweeps
			// though it prepares nothing.
			const tmp = "etc/.kubelet.conf.mcbake-0123456789ab"
			if err := os.WriteFile(filepath.Join(staged.Dir, tmp), []byte("half"), 0o600); err != nil {
				t.Fatal(err)
			}
			rep, err := node.Guard(context.Background(), st.Sysroot, nil)
			if err != nil || rep.Action != node.GuardOtherTransition || rep.Reason == "" {
				t.Fatalf("Guard = %+v, %v; want another transition, with its reason", rep, err)
			}
			if after := roottest.Tree(t, staged.Dir); !maps.Equal(before, after) {
				t.Errorf("the guard changed the staged deployment of another transition (or left %s): %v", tmp, cmp.Diff(before, after))
			}
			if want := []string{filepath.Join(staged.Dir, tmp)}; !slices.Equal(rep.Swept, want) {
				t.Errorf("Guard swept %q, want %q", rep.Swept, want)
			}
			if got := readGuardReport(t, booted); got.Action != node.GuardOtherTransition {
				t.Errorf("the report under /var = %+v", got)
			}
		})
	}
}

// TestGuardRefused: a stored config the MCO would refuse is a failure
// that writes nothing in the deployment, and is reported.
func TestGuardRefused(t *testing.T) {
	st, booted, staged := guardSetup(t, storedByDaemon(t, prepareMC, "quay.example/ocp/base@"+guardBDigest), "")
	// The daemon's file is replaced after the setup parsed the valid one.
	cfg := filepath.Join(booted.Dir, "etc/machine-config-daemon/currentconfig")
	raw, err := os.ReadFile(cfg)
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(raw), `"storage":`, `"passwd":{"groups":[{"name":"wheel2"}]},"storage":`, 1)
	if bad == string(raw) {
		t.Fatalf("the stored config has no storage to put a group before: %s", raw)
	}
	if err := os.WriteFile(cfg, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	before := roottest.Tree(t, staged.Dir)
	rep, err := node.Guard(context.Background(), st.Sysroot, nil)
	if err == nil || rep.Action != node.GuardFailed || !strings.Contains(rep.Error, "passwd.groups") {
		t.Fatalf("Guard = %+v, %v; want a failure naming passwd.groups", rep, err)
	}
	if after := roottest.Tree(t, staged.Dir); !maps.Equal(before, after) {
		t.Errorf("a failed guard changed the staged deployment")
	}
	if got := readGuardReport(t, booted); got.Action != node.GuardFailed || got.Error == "" {
		t.Errorf("the report under /var = %+v, want the failure", got)
	}
}

// TestGuardNothingStaged: a reboot with nothing staged does nothing and
// writes no report.
func TestGuardNothingStaged(t *testing.T) {
	st, _, _ := setup(t) // B has its bootloader entry: finalized, nothing staged
	_, booted, _ := deployments(t, st)
	rep, err := node.Guard(context.Background(), st.Sysroot, func() time.Time { return time.Unix(1e9, 0) })
	if err != nil || rep.Action != node.GuardNothingStaged {
		t.Fatalf("Guard = %+v, %v; want nothing staged", rep, err)
	}
	if _, err := os.Stat(filepath.Join(booted.Var(), node.GuardFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Guard wrote a report with nothing staged: %v", err)
	}
}
