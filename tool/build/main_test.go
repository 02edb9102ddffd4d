package build_test

import (
	"os"
	"testing"

	"github.com/mcbake/mcbake/tool/build/buildah"
)

// TestMain lets buildah run its re-executed helpers (chroot, copier) out of
// the test binary.
func TestMain(m *testing.M) {
	if buildah.InitReexec() {
		return
	}
	os.Exit(m.Run())
}
