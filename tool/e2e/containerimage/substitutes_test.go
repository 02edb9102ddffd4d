package containerimage

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// The Containerfile's default base images come from docker.io, which this
// test may not reach. Its substitutes are made here from Debian packages
// (mmdebstrap, from the Debian mirror apt uses) and this machine's Go:
//
//   - the builder: Debian bookworm with gcc, make, ca-certificates and
//     ISA-L's headers, and a copy of this machine's GOROOT at
//     /usr/local/go, as golang:1.26-bookworm has it (the same toolchain
//     as the host's, so the host's Go build cache serves the build);
//   - the runtime: Debian bookworm's minbase, as debian:bookworm-slim.
//
// Both live in a containers store in the cache directory, named after a
// hash of their recipe: a second run, or a second test process, finds
// them there; a new recipe (another Go, other packages) makes new ones.
const debianSuite = "bookworm"

var (
	builderPackages = []string{"gcc", "libc6-dev", "make", "ca-certificates", "libisal-dev"}
	// recipeVersion changes when the way the substitutes are made does.
	recipeVersion = "1"
)

// cacheDir is where the substitutes are kept: MCBAKE_TEST_CACHE, else
// mcbake-test/containerimage in the user's cache directory.
func cacheDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("MCBAKE_TEST_CACHE")
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			t.Fatalf("no cache directory for the substitute base images (set MCBAKE_TEST_CACHE): %v", err)
		}
		dir = filepath.Join(base, "mcbake-test")
	}
	dir = filepath.Join(dir, "containerimage")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

// storeConf writes the cached store's storage.conf and returns its path.
func (w *world) storeConf() string {
	conf := filepath.Join(w.cache, "storage.conf")
	store := filepath.Join(w.cache, "store")
	writeFile(w.t, conf, "[storage]\ndriver = \"overlay\"\ngraphroot = \""+store+"/root\"\nrunroot = \""+store+"/run\"\n")
	return conf
}

// substitutes returns the builder's and the runtime's image names, made
// first when the store lacks them.
func (w *world) substitutes() (builder, runtime string) {
	w.t.Helper()
	goroot, goversion := goEnv(w.t, "GOROOT"), goEnv(w.t, "GOVERSION")
	mirror := os.Getenv("MCBAKE_TEST_DEBIAN_MIRROR")
	if mirror == "" {
		mirror = "http://deb.debian.org/debian"
	}
	sum := func(parts ...string) string {
		h := sha256.Sum256([]byte(strings.Join(append([]string{recipeVersion, debianSuite}, parts...), "\n")))
		return hex.EncodeToString(h[:])[:16]
	}
	builder = "localhost/mcbake-test-builder:" + sum(append([]string{goroot, goversion}, builderPackages...)...)
	runtime = "localhost/mcbake-test-runtime:" + sum("minbase")

	// One process makes them; another waits for it.
	lock, err := os.OpenFile(filepath.Join(w.cache, "lock"), os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		w.t.Fatal(err)
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		w.t.Fatal(err)
	}
	defer syscall.Flock(int(lock.Fd()), syscall.LOCK_UN)

	w.substitute(runtime, mirror, []string{"--variant=minbase"}, nil)
	w.substitute(builder, mirror, []string{"--variant=minbase", "--include=" + strings.Join(builderPackages, ",")},
		func(ctr string) {
			w.mustBuildah("copy", "--quiet", ctr, goroot, "/usr/local/go")
			w.mustBuildah("config", "--env", "PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
				"--env", "GOPATH=/go", ctr)
		})
	return builder, runtime
}

// substitute makes the image name from a Debian root file system that
// mmdebstrap writes with args, then change, unless the store has it.
func (w *world) substitute(name, mirror string, args []string, change func(ctr string)) {
	w.t.Helper()
	inspect := exec.Command("buildah", "inspect", "--type", "image", name)
	inspect.Env = w.env
	if inspect.Run() == nil {
		return
	}
	w.t.Logf("making %s with mmdebstrap (once: it is cached in %s)", name, w.cache)
	tarball := filepath.Join(w.dir, "rootfs.tar")
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	mm := exec.CommandContext(ctx, "mmdebstrap", append(append([]string{"--quiet"}, args...), debianSuite, tarball, mirror)...)
	mm.Env = w.env
	if out, err := mm.CombinedOutput(); err != nil {
		w.t.Fatalf("mmdebstrap for %s (from %s; set MCBAKE_TEST_DEBIAN_MIRROR for another mirror): %v\n%s", name, mirror, err, out)
	}
	ctr := strings.TrimSpace(string(w.mustBuildah("from", "scratch")))
	defer w.buildah("rm", ctr)
	w.mustBuildah("add", "--quiet", ctr, tarball, "/")
	if change != nil {
		change(ctr)
	}
	w.mustBuildah("commit", "--quiet", ctr, name)
	if err := os.Remove(tarball); err != nil {
		w.t.Fatal(err)
	}
}

func (w *world) mustBuildah(args ...string) []byte {
	w.t.Helper()
	cmd := exec.Command("buildah", args...)
	cmd.Env = w.env
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		w.t.Fatalf("buildah %s: %v\n%s", strings.Join(args, " "), err, stderr)
	}
	return out
}

func goEnv(t *testing.T, name string) string {
	t.Helper()
	out, err := exec.Command("go", "env", name).Output()
	if err != nil || strings.TrimSpace(string(out)) == "" {
		t.Fatalf("go env %s: %q, %v", name, out, err)
	}
	return strings.TrimSpace(string(out))
}
