package image

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/google/go-cmp/cmp"
	"go.podman.io/image/v5/types"
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
				Registry: Registry{AuthFile: "/", TLSVerify: &no, Creds: "u:p:q", CertDir: "/certs"},
				Platform: "linux/arm64/v8", CacheDir: "/cache", RegistriesConf: "/etc/reg.conf",
				RegistriesConfDir: "/etc/reg.conf.d", RegistriesDir: "/etc/reg.d",
			},
			want: types.SystemContext{
				AuthFilePath: "/", BlobInfoCacheDir: "/cache",
				DockerAuthConfig: &types.DockerAuthConfig{Username: "u", Password: "p:q"}, DockerCertPath: "/certs",
				SystemRegistriesConfPath: "/etc/reg.conf", SystemRegistriesConfDirPath: "/etc/reg.conf.d",
				RegistriesDirPath: "/etc/reg.d",
				OSChoice:          "linux", ArchitectureChoice: "arm64", VariantChoice: "v8",
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

// TestRegistrySides: Source and Destination override the shared registry
// settings field by field, REGISTRY_AUTH_FILE and CONTAINERS_REGISTRIES_CONF
// are the defaults, and a named auth file must exist.
func TestRegistrySides(t *testing.T) {
	dir := t.TempDir()
	shared, src := filepath.Join(dir, "shared.json"), filepath.Join(dir, "src.json")
	env := filepath.Join(dir, "env.json")
	for _, f := range []string{shared, src, env} {
		if err := os.WriteFile(f, []byte(`{"auths":{}}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("REGISTRY_AUTH_FILE", env)
	t.Setenv("CONTAINERS_REGISTRIES_CONF", "/env/registries.conf")
	yes, no := true, false
	o := Options{
		Registry:    Registry{AuthFile: shared, CertDir: "/shared-certs", TLSVerify: &yes},
		Source:      Registry{AuthFile: src, Creds: "reader"},
		Destination: Registry{CertDir: "/dest-certs", TLSVerify: &no},
		CacheDir:    dir,
	}
	srcSys, err := o.systemContext()
	if err != nil {
		t.Fatal(err)
	}
	destSys, err := o.destinationContext()
	if err != nil {
		t.Fatal(err)
	}
	type side struct {
		Auth, Certs, Conf string
		Creds             *types.DockerAuthConfig
		Skip              types.OptionalBool
	}
	got := []side{
		{srcSys.AuthFilePath, srcSys.DockerCertPath, srcSys.SystemRegistriesConfPath, srcSys.DockerAuthConfig, srcSys.DockerInsecureSkipTLSVerify},
		{destSys.AuthFilePath, destSys.DockerCertPath, destSys.SystemRegistriesConfPath, destSys.DockerAuthConfig, destSys.DockerInsecureSkipTLSVerify},
	}
	want := []side{
		{src, "/shared-certs", "/env/registries.conf", &types.DockerAuthConfig{Username: "reader"}, types.OptionalBoolFalse},
		{shared, "/dest-certs", "/env/registries.conf", nil, types.OptionalBoolTrue},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("source and destination contexts (-want +got):\n%s", diff)
	}
	sys, err := Options{CacheDir: dir}.systemContext()
	if err != nil || sys.AuthFilePath != env {
		t.Errorf("default auth file = %q, %v; want $REGISTRY_AUTH_FILE %s", sys.AuthFilePath, err, env)
	}
	for _, bad := range []Options{
		{Registry: Registry{AuthFile: filepath.Join(dir, "missing.json")}},
		{Destination: Registry{AuthFile: filepath.Join(dir, "missing.json")}},
		{Registry: Registry{Creds: ":password"}},
	} {
		bad.CacheDir = dir
		_, err1 := bad.systemContext()
		_, err2 := bad.destinationContext()
		if err1 == nil && err2 == nil {
			t.Errorf("%+v accepted, want an error", bad)
		}
	}
}
