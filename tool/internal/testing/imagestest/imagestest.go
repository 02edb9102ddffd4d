// Package imagestest isolates tests that read and write images.
//
// Each test gets its own TMPDIR (containers/image unpacks archives there),
// an empty registries.conf (so the host's cannot leak in) and a private
// blob-info cache.
package imagestest

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/mcbake/mcbake/tool/image"
)

// Isolate sets TMPDIR to dir/tmp (with t.Setenv: the test cannot be
// parallel, its subtests can), writes an empty dir/registries.conf and
// returns image options that use them, accept any image, and keep the
// blob-info cache under dir/cache.
func Isolate(t testing.TB, dir string) image.Options {
	t.Helper()
	tmp := filepath.Join(dir, "tmp")
	conf := filepath.Join(dir, "registries.conf")
	for _, err := range []error{os.MkdirAll(tmp, 0o755), os.WriteFile(conf, nil, 0o644)} {
		if err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("TMPDIR", tmp)
	return image.Options{InsecurePolicy: true, CacheDir: filepath.Join(dir, "cache", "blobinfo"), RegistriesConf: conf}
}
