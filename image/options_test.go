package image

import (
	"path/filepath"
	"runtime"
	"testing"

	"github.com/containers/image/v5/types"
	"github.com/google/go-cmp/cmp"
)

func TestSystemContext(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	t.Setenv("TMPDIR", "/big/tmp")
	no := false
	tests := []struct {
		name string
		opts Options
		want types.SystemContext
	}{
		{
			name: "defaults",
			want: types.SystemContext{
				BlobInfoCacheDir: filepath.Join(xdg, "mcbake", "blobinfo"),
				OSChoice:         runtime.GOOS, ArchitectureChoice: runtime.GOARCH,
				OCIAcceptUncompressedLayers: true, BigFilesTemporaryDir: "/big/tmp",
			},
		},
		{
			name: "everything set",
			opts: Options{
				AuthFile: "/auth.json", TLSVerify: &no, Platform: "linux/arm64/v8",
				CacheDir: "/cache", RegistriesConf: "/etc/reg.conf",
			},
			want: types.SystemContext{
				AuthFilePath: "/auth.json", BlobInfoCacheDir: "/cache",
				SystemRegistriesConfPath: "/etc/reg.conf", SystemRegistriesConfDirPath: "/etc/reg.conf.d",
				OSChoice: "linux", ArchitectureChoice: "arm64", VariantChoice: "v8",
				DockerInsecureSkipTLSVerify: types.OptionalBoolTrue, OCIInsecureSkipTLSVerify: true,
				OCIAcceptUncompressedLayers: true, BigFilesTemporaryDir: "/big/tmp",
			},
		},
	}
	for _, tt := range tests {
		got, err := tt.opts.systemContext()
		if err != nil {
			t.Fatalf("%s: systemContext() = %v", tt.name, err)
		}
		if diff := cmp.Diff(tt.want, *got); diff != "" {
			t.Errorf("%s: systemContext() mismatch (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestPlatformParsing(t *testing.T) {
	for _, bad := range []string{"linux", "linux/", "/amd64", "linux/amd64/", "a/b/c/d"} {
		if _, err := (Options{Platform: bad}).systemContext(); err == nil {
			t.Errorf("Platform %q accepted, want an error", bad)
		}
	}
}
