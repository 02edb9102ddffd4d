package build

import (
	"os"
	"testing"

	"github.com/mcbake/mcbake/internal/buildahengine"
)

// TestMain lets buildah run its re-executed helpers (chroot, copier) out of
// the test binary.
func TestMain(m *testing.M) {
	if buildahengine.InitReexec() {
		return
	}
	os.Exit(m.Run())
}
