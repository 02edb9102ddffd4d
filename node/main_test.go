package node

import (
	"context"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/render"
)

func sha(s string) digest.Digest { return digest.FromString(s) }

// parseMC parses one MachineConfig document.
func parseMC(t *testing.T, doc string) []*machineconfig.MachineConfig {
	t.Helper()
	mcs, err := machineconfig.Parse("test.yaml", []byte(doc))
	if err != nil {
		t.Fatalf("machineconfig.Parse: %v", err)
	}
	return mcs
}

// openRoot opens dir as a Root, closed when the test ends.
func openRoot(t *testing.T, dir string) *Root {
	t.Helper()
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := r.Close(); err != nil {
			t.Errorf("closing %s: %v", dir, err)
		}
	})
	return r
}

// renderOnNode renders the MachineConfigs against the node's root, as
// Rewrite and Validate do.
func renderOnNode(t *testing.T, mcs []*machineconfig.MachineConfig, dir string) *render.Result {
	t.Helper()
	res, err := renderOn(context.Background(), openRoot(t, dir), mcs)
	if err != nil {
		t.Fatalf("rendering against %s: %v", dir, err)
	}
	return res
}
