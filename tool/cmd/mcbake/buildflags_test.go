package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuildFlagCombinations checks that mcbake build refuses the flags
// its operation (--render-only, --engine) cannot apply with one line
// naming them, before the base is opened or the MachineConfigs loaded:
// neither the base nor the MachineConfig file here exists.
func TestBuildFlagCombinations(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "xdg"))
	base := "oci:" + filepath.Join(dir, "no-such-base") + ":latest"
	image := "oci:" + filepath.Join(dir, "out") + ":latest"
	ctxDir := filepath.Join(dir, "ctx")
	tests := []struct {
		name string
		args []string
		want string
	}{
		{"an index with buildah", []string{"-o", image, "--platform", "all", "--engine", "buildah"},
			"--platform all or a list builds an index: only with --engine append, without --render-only"},
		{"an index rendered only", []string{"-o", ctxDir, "--platform", "linux/amd64,linux/arm64", "--render-only"},
			"--platform all or a list builds an index: only with --engine append, without --render-only"},
		{"signing with buildah", []string{"-o", image, "--engine", "buildah", "--sign-by-sigstore-private-key", filepath.Join(dir, "cosign.key")},
			"--sign-* and --dest-* need --engine append (buildah writes with the shared and --src-* settings)"},
		{"destination credentials with buildah", []string{"-o", image, "--engine", "buildah", "--dest-creds", "me:secret"},
			"--sign-* and --dest-* need --engine append (buildah writes with the shared and --src-* settings)"},
		{"signing a render-only build", []string{"-o", ctxDir, "--render-only", "--sign-by-sigstore-private-key", filepath.Join(dir, "cosign.key")},
			"--sign-* and --dest-* need an image build or --index-repo: --render-only writes a directory and pushes nothing else"},
		{"destination credentials for a render-only build", []string{"-o", ctxDir, "--render-only", "--dest-tls-verify=false"},
			"--sign-* and --dest-* need an image build or --index-repo: --render-only writes a directory and pushes nothing else"},
		{"Containerfile instructions with append", []string{"-o", image, "--containerfile-append", filepath.Join(dir, "extra")},
			"--containerfile-append needs --engine buildah or --render-only"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			e := &env{t: t, dir: dir, cache: filepath.Join(dir, "cache"), policy: "testdata/policy.json"}
			args := append(append([]string{"build", "--quiet", "--base", base, "-f", filepath.Join(dir, "mc.yaml")}, e.imageArgs()...), tc.args...)
			code, stdout, stderr := e.run(args...)
			if code != exitInput || !strings.Contains(stderr, tc.want) || strings.Contains(stderr, "no-such-base") || stdout != "" {
				t.Errorf("mcbake %s: exit %d, stdout %q, stderr %q; want %d and %q only", strings.Join(tc.args, " "), code, stdout, stderr, exitInput, tc.want)
			}
			if n := strings.Count(strings.TrimSpace(stderr), "\n"); n != 0 {
				t.Errorf("stderr has %d lines, want one: %q", n+1, stderr)
			}
			for _, p := range []string{filepath.Join(dir, "out"), ctxDir} {
				if _, err := os.Stat(p); !os.IsNotExist(err) {
					t.Errorf("%s exists after a refused build (%v)", p, err)
				}
			}
		})
	}
}

// TestBuildRenderOnlyIndexRepo: with --index-repo, a render-only build
// takes --sign-* and --dest-*, which sign the base index it publishes
// there and reach that repository: the flags pass, and the build goes on
// to read its inputs.
func TestBuildRenderOnlyIndexRepo(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", filepath.Join(dir, "xdg"))
	e := &env{t: t, dir: dir, cache: filepath.Join(dir, "cache"), policy: "testdata/policy.json"}
	args := append([]string{"build", "--quiet", "--base", "oci:" + filepath.Join(dir, "no-such-base") + ":latest", "-f", filepath.Join(dir, "mc.yaml")}, e.imageArgs()...)
	args = append(args, "-o", filepath.Join(dir, "ctx"), "--render-only", "--index-repo", "127.0.0.1:1/indexes", "--dest-tls-verify=false",
		"--sign-by-sigstore-private-key", filepath.Join(dir, "cosign.key"))
	code, _, stderr := e.run(args...)
	// The MachineConfig file, which does not exist, is what fails.
	if code == 0 || strings.Contains(stderr, "--sign-* and --dest-*") || !strings.Contains(stderr, "mc.yaml") {
		t.Errorf("mcbake %s: exit %d, stderr %q; want the flags taken and mc.yaml missing", strings.Join(args, " "), code, stderr)
	}
}

// TestBuildRenderOnly checks --render-only: the context goes to the
// directory -o names, which is no repository to publish the base's index
// to (its path here has capitals, which no repository name has).
func TestBuildRenderOnly(t *testing.T) {
	e := newEnv(t)
	dir := filepath.Join(e.dir, "Context")
	code, stdout, stderr := e.run(append([]string{"build", "--quiet", "--render-only", "--base", e.base, "-o", dir, "-f", workerMC}, e.imageArgs()...)...)
	if code != 0 || stdout != dir+": Containerfile and build context written\n" {
		t.Fatalf("build --render-only: exit %d, stdout %q, stderr %q", code, stdout, stderr)
	}
	for _, f := range []string{"Containerfile", "manifest.json", "rootfs"} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("the build context has no %s: %v", f, err)
		}
	}
}
