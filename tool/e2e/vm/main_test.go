package vm

import (
	"os"
	"testing"

	"github.com/mcbake/mcbake/tool/image"
)

// TestMain lets containers/image run its re-executed helpers out of the
// test binary (build.Image writes images through it).
func TestMain(m *testing.M) {
	if image.InitReexec() {
		return
	}
	os.Exit(m.Run())
}
