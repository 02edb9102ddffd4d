package image

import (
	"os"
	"testing"
)

func TestMain(m *testing.M) {
	if InitReexec() {
		return
	}
	os.Exit(m.Run())
}
