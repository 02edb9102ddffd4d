package image

import (
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestStoreOptions(t *testing.T) {
	t.Setenv("XDG_RUNTIME_DIR", "/run/user/1")
	so, err := storeOptions(Store{Root: "/cache/storage"})
	if err != nil {
		t.Fatal(err)
	}
	wantDriver := "vfs"
	if os.Geteuid() == 0 {
		wantDriver = "overlay"
	}
	got := []string{so.GraphRoot, so.RunRoot, so.GraphDriverName}
	if diff := cmp.Diff([]string{"/cache/storage", "/run/user/1/mcbake/buildah", wantDriver}, got); diff != "" {
		t.Errorf("storeOptions (-want +got):\n%s", diff)
	}
	so, err = storeOptions(Store{Root: "/r", RunRoot: "/rr", Driver: "vfs"})
	if err != nil || so.GraphRoot != "/r" || so.RunRoot != "/rr" || so.GraphDriverName != "vfs" {
		t.Errorf("storeOptions(explicit) = %+v, %v", so, err)
	}
}
