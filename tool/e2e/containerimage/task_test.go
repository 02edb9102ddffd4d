package containerimage

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mcbake/mcbake/internal/testing/ostreetest"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/internal/testing/registrytest"
)

const (
	repoRoot = "../../.."
	taskFile = repoRoot + "/examples/tekton/mcbake-task.yaml"
	workerMC = repoRoot + "/testdata/machineconfigs/rendered-worker-aws.json"
)

// task is the part of the Tekton Task the test runs.
type task struct {
	Spec struct {
		Params []struct {
			Name    string `json:"name"`
			Default any    `json:"default"`
		} `json:"params"`
		StepTemplate struct {
			Env []struct{ Name, Value string } `json:"env"`
		} `json:"stepTemplate"`
		Steps []struct {
			Name   string   `json:"name"`
			Script string   `json:"script"`
			Args   []string `json:"args"`
		} `json:"steps"`
	} `json:"spec"`
}

// world is one test's directories, store and image.
type world struct {
	t       *testing.T
	dir     string
	cache   string   // the substitute base images' cache (substitutes.go)
	env     []string // for buildah and hack/image.sh: the cached store
	image   string
	volumes []string // buildah run -v values: the Task's workspaces and volumes
}

// randomUID is a UID as OpenShift's restricted SCC picks one: in no
// /etc/passwd, group 0.
const randomUID = "1000650000:0"

func need(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: buildah needs root for its store and mmdebstrap for the substitute base images here")
	}
	for _, tool := range []string{"buildah", "skopeo", "mmdebstrap", registrytest.Binary, "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make test installs it): skipping the container image test", tool)
		}
	}
}

// TestTaskRunsInTheImage builds mcbake's image from the Containerfile
// with hack/image.sh, as make image does, offline: its builder and
// runtime images are local substitutes for the defaults (substitutes.go)
// and Go's module cache is mounted (GOPROXY=off). Then it runs the Tekton
// Task's three steps in it, each as a random non-root UID in group 0 as
// OpenShift runs them, against a registry with TLS from a private CA and
// htpasswd auth, the credentials mounted as a kubernetes.io/dockerconfigjson
// Secret would mount them: the layered image is pushed, the results are
// written, and the reports land in the source workspace.
func TestTaskRunsInTheImage(t *testing.T) {
	need(t)
	start := time.Now()
	w := newWorld(t)
	builder, runtime := w.substitutes()
	t.Logf("substitute base images ready in %.1fs", time.Since(start).Seconds())
	start = time.Now()
	w.buildImage(builder, runtime)
	t.Logf("image built in %.1fs", time.Since(start).Seconds())
	w.checkUser()

	// As a random UID: HOME is writable (containers/image keeps its
	// state there), and the binaries are those of this commit, with
	// ISA-L (the builder has libisal-dev; the runtime gets the library).
	out, err := w.runStep("home", `set -eu
id -u
touch "$HOME/.probe" && mkdir -p "$HOME/.config/containers" && rm -r "$HOME/.probe" "$HOME/.config"
mcbake version
mcbake-node version`, nil, nil)
	if err != nil {
		t.Fatalf("as UID %s in the image: %v\n%s", randomUID, err, out)
	}
	want := strings.Split(randomUID, ":")[0] + "\nmcbake " + imageVersion + "\n"
	if !strings.HasPrefix(string(out), want) || !strings.Contains(string(out), "gzip decoder: isa-l\n") ||
		!strings.HasSuffix(string(out), "mcbake-node "+imageVersion+"\n") {
		t.Errorf("as UID %s in the image: %q; want its UID, a writable HOME, mcbake and mcbake-node %s with ISA-L", randomUID, out, imageVersion)
	}
	reg := registrytest.Start(t)
	baseDir := filepath.Join(w.dir, "base")
	if _, err := testbase.Write(baseDir, testbase.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Run("the revert guard COPY --from the image", func(t *testing.T) { w.testGuardCopy(t, baseDir) })
	reg.Push(t, "oci:"+baseDir+":latest", "os/base:4.18")

	// The workspaces as OpenShift gives them to a random UID: writable
	// by group 0; the cache an emptyDir (world-writable).
	source, results, dockerconfig, cache := w.mkdir("source"), w.mkdir("results"), w.mkdir("dockerconfig"), w.mkdir("cache")
	copyFile(t, workerMC, filepath.Join(w.mkdir("source/machineconfigs"), "worker.json"))
	copyFile(t, reg.AuthFile(t, registrytest.User, registrytest.Password), filepath.Join(dockerconfig, ".dockerconfigjson"))
	for _, d := range []string{source, filepath.Join(source, "machineconfigs"), results} {
		if err := os.Chmod(d, 0o775); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(cache, 0o777); err != nil {
		t.Fatal(err)
	}
	w.volumes = []string{
		source + ":/workspace/source",
		dockerconfig + ":/workspace/dockerconfig:ro",
		results + ":/tekton/results",
		cache + ":/var/cache/mcbake",
		readable(t, reg.CertsD, w.mkdir("certs.d")) + ":/etc/containers/certs.d:ro", // the cluster's trust in the registry's CA, from a ConfigMap
	}
	image := reg.Host + "/ci/worker:4.18"
	params := map[string]string{"BASE_IMAGE": reg.Host + "/os/base:4.18", "IMAGE": image, "MCBAKE_IMAGE": w.image}
	tk := readTask(t)
	env := stepEnv(t, tk, params)
	for _, step := range tk.Spec.Steps {
		start := time.Now()
		out, err := w.runStep(step.Name, substitute(t, step.Script), env, expandArgs(step.Args))
		if err != nil {
			t.Fatalf("step %s: %v\n%s", step.Name, err, out)
		}
		t.Logf("step %s: %.1fs, last line: %s", step.Name, time.Since(start).Seconds(), lastLine(out))
	}
	digest := strings.TrimSpace(string(mustRead(t, filepath.Join(results, "IMAGE_DIGEST"))))
	if !regexp.MustCompile(`^sha256:[0-9a-f]{64}$`).MatchString(digest) {
		t.Errorf("IMAGE_DIGEST result = %q, want a digest", digest)
	}
	if got := string(mustRead(t, filepath.Join(results, "IMAGE_URL"))); got != image {
		t.Errorf("IMAGE_URL result = %q, want %q", got, image)
	}
	out, err = exec.Command("skopeo", "--registries-conf", reg.EmptyRegistriesConf(), "inspect", "--cert-dir", reg.CertDir,
		"--creds", registrytest.User+":"+registrytest.Password, "docker://"+image).Output()
	if err != nil {
		t.Fatalf("skopeo inspect %s: %v", image, err)
	}
	var inspect struct{ Digest string }
	if err := json.Unmarshal(out, &inspect); err != nil || inspect.Digest != digest {
		t.Errorf("the registry has %s at %s (%v), the Task reported %s", inspect.Digest, image, err, digest)
	}
	for _, report := range []string{"mcbake-verify.sarif", "mcbake-verify.junit.xml"} {
		fi, err := os.Stat(filepath.Join(source, report))
		if err != nil {
			t.Errorf("report missing from the source workspace: %v", err)
			continue
		}
		if uid := fi.Sys().(*syscall.Stat_t).Uid; strconv.FormatUint(uint64(uid), 10) != strings.Split(randomUID, ":")[0] {
			t.Errorf("%s is owned by UID %d, want the step's %s", report, uid, randomUID)
		}
	}
}

// imageVersion is the version the test builds the image as.
const imageVersion = "v0.0.0-imagetest"

func newWorld(t *testing.T) *world {
	dir := t.TempDir()
	w := &world{t: t, dir: dir, cache: cacheDir(t)}
	w.image = "localhost/mcbake-tasktest:" + strconv.Itoa(os.Getpid())
	w.env = append(os.Environ(), "CONTAINERS_STORAGE_CONF="+w.storeConf(), "BUILDAH_ISOLATION=chroot", "TMPDIR="+w.mkdir("tmp"))
	t.Cleanup(func() {
		// This test's containers and images; the substitutes stay.
		w.buildah("rm", "--all")
		for _, img := range []string{w.image, guardBase, guarded} {
			w.buildah("rmi", img)
		}
		w.buildah("rmi", "--prune")
	})
	return w
}

// buildah runs buildah on the cached store; its error is ignored (cleanup).
func (w *world) buildah(args ...string) {
	cmd := exec.Command("buildah", args...)
	cmd.Env = w.env
	_ = cmd.Run()
}

func (w *world) mkdir(name string) string {
	p := filepath.Join(w.dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// buildImage runs hack/image.sh, as `make image` does, with the
// substitutes as BUILDER_IMAGE and RUNTIME_IMAGE and this machine's Go
// caches mounted: no network.
func (w *world) buildImage(builder, runtime string) {
	w.t.Helper()
	gomodcache, gocache := goEnv(w.t, "GOMODCACHE"), goEnv(w.t, "GOCACHE")
	cmd := exec.Command("bash", "hack/image.sh")
	cmd.Dir = repoRoot
	cmd.Env = append(w.env, "IMAGE="+w.image, "VERSION="+imageVersion, "BUILDER_IMAGE="+builder, "RUNTIME_IMAGE="+runtime,
		"GOMODCACHE_DIR="+gomodcache, "GOCACHE_DIR="+gocache)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("hack/image.sh: %v\n%s", err, out)
	}
}

// checkUser checks the image's configuration: a non-root user in group
// 0, a HOME, the entrypoint.
func (w *world) checkUser() {
	w.t.Helper()
	cmd := exec.Command("buildah", "inspect", "--type", "image", w.image)
	cmd.Env = w.env
	out, err := cmd.Output()
	if err != nil {
		w.t.Fatalf("buildah inspect %s: %v", w.image, err)
	}
	var inspect struct {
		OCIv1 struct {
			Config struct {
				User       string
				Env        []string
				Entrypoint []string
			} `json:"config"`
		}
	}
	if err := json.Unmarshal(out, &inspect); err != nil {
		w.t.Fatalf("buildah inspect %s: %v", w.image, err)
	}
	cfg := inspect.OCIv1.Config
	if cfg.User != "1001:0" {
		w.t.Errorf("the image's user is %q, want 1001:0 (non-root, group 0)", cfg.User)
	}
	if !slices.Contains(cfg.Env, "HOME=/home/mcbake") {
		w.t.Errorf("the image's environment %q has no HOME=/home/mcbake", cfg.Env)
	}
	if !slices.Equal(cfg.Entrypoint, []string{"/usr/bin/mcbake"}) {
		w.t.Errorf("the image's entrypoint is %q, want /usr/bin/mcbake", cfg.Entrypoint)
	}
}

// imageFile copies a file out of the image (following symlinks in it).
func (w *world) imageFile(path, to string) {
	w.t.Helper()
	out, err := w.runStep("cat", "cat "+path, nil, nil)
	if err != nil {
		w.t.Fatalf("cat %s in the image: %v\n%s", path, err, out)
	}
	if err := os.WriteFile(to, out, 0o755); err != nil {
		w.t.Fatal(err)
	}
}

// runStep runs a step's script in a new container of the image as a
// random UID, as Tekton on OpenShift runs each step: the workspaces and
// volumes mounted, the step template's environment, the host's network
// (the registry is on 127.0.0.1).
func (w *world) runStep(name, script string, env, args []string) ([]byte, error) {
	from := exec.Command("buildah", "from", "--quiet", "--pull-never", w.image)
	from.Env = w.env
	ctr, err := from.Output()
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(ctr))
	defer w.buildah("rm", id)
	runArgs := []string{"run", "--isolation", "chroot", "--network", "host", "--user", randomUID, "--workingdir", "/workspace/source"}
	for _, v := range w.volumes {
		runArgs = append(runArgs, "-v", v)
	}
	for _, e := range env {
		runArgs = append(runArgs, "--env", e)
	}
	runArgs = append(append(runArgs, id, "--", "/bin/sh", "-c", script, name), args...)
	run := exec.Command("buildah", runArgs...)
	run.Env = w.env
	var stdout, stderr bytes.Buffer
	run.Stdout, run.Stderr = &stdout, &stderr
	err = run.Run()
	if err != nil {
		return append(stdout.Bytes(), stderr.Bytes()...), err
	}
	return stdout.Bytes(), nil
}

func readTask(t *testing.T) task {
	t.Helper()
	var tk task
	if err := yaml.Unmarshal(mustRead(t, taskFile), &tk); err != nil {
		t.Fatal(err)
	}
	return tk
}

var tektonVar = regexp.MustCompile(`\$\(([a-zA-Z0-9_.\[\]*-]+)\)`)

// stepEnv is the step template's environment with the parameters (given,
// else their defaults) and the workspace variables substituted.
func stepEnv(t *testing.T, tk task, given map[string]string) []string {
	t.Helper()
	vars := map[string]string{
		"workspaces.dockerconfig.bound": "true",
		"workspaces.dockerconfig.path":  "/workspace/dockerconfig",
		"workspaces.source.path":        "/workspace/source",
	}
	for _, p := range tk.Spec.Params {
		if s, ok := p.Default.(string); ok {
			vars["params."+p.Name] = s
		}
	}
	for k, v := range given {
		vars["params."+k] = v
	}
	var env []string
	for _, e := range tk.Spec.StepTemplate.Env {
		env = append(env, e.Name+"="+replaceVars(t, e.Value, vars))
	}
	return env
}

// substitute replaces the result paths Tekton puts in a script.
func substitute(t *testing.T, script string) string {
	return replaceVars(t, script, map[string]string{
		"results.IMAGE_DIGEST.path": "/tekton/results/IMAGE_DIGEST",
		"results.IMAGE_URL.path":    "/tekton/results/IMAGE_URL",
	})
}

func replaceVars(t *testing.T, s string, vars map[string]string) string {
	t.Helper()
	return tektonVar.ReplaceAllStringFunc(s, func(m string) string {
		name := tektonVar.FindStringSubmatch(m)[1]
		v, ok := vars[name]
		if !ok {
			t.Fatalf("the Task uses $(%s), which this test does not provide", name)
		}
		return v
	})
}

// expandArgs expands the steps' args: $(params.VERIFY_ARGS[*]) is the
// (default, empty) array.
func expandArgs(args []string) []string {
	var out []string
	for _, a := range args {
		if a == "$(params.VERIFY_ARGS[*])" {
			continue
		}
		out = append(out, a)
	}
	return out
}

func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	return lines[len(lines)-1]
}

// readable copies the tree from into to, readable by every user (as a
// ConfigMap's files are mounted: 0644), and returns to.
func readable(t *testing.T, from, to string) string {
	t.Helper()
	err := filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(from, p)
		if d.IsDir() {
			return os.MkdirAll(filepath.Join(to, rel), 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(filepath.Join(to, rel), b, 0o644)
	})
	if err != nil {
		t.Fatal(err)
	}
	return to
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	writeFile(t, to, string(mustRead(t, from)))
}

func writeFile(t *testing.T, name, content string) {
	t.Helper()
	if err := os.WriteFile(name, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func mustRead(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(name)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// The images testGuardCopy makes, named for the cleanup.
var (
	guardBase = "localhost/guard-base:" + strconv.Itoa(os.Getpid())
	guarded   = "localhost/guarded:" + strconv.Itoa(os.Getpid())
)

// guardDoc is the page whose Containerfile adds the guard to an image
// built by others; the test runs its lines as they are written there.
const guardDoc = repoRoot + "/docs/node.md"

// docContainerfile returns the dockerfile block of guardDoc that follows
// the marker comment naming this test.
func docContainerfile(t *testing.T) string {
	t.Helper()
	doc := string(mustRead(t, guardDoc))
	_, after, ok := strings.Cut(doc, "<!-- tested by tool/e2e/containerimage: guard Containerfile -->")
	if !ok {
		t.Fatalf("%s: no guard Containerfile marker", guardDoc)
	}
	_, block, ok := strings.Cut(after, "```dockerfile\n")
	block, _, ok2 := strings.Cut(block, "```")
	if !ok || !ok2 || !strings.Contains(block, "MCBAKE_IMAGE") {
		t.Fatalf("%s: the guard Containerfile block is not there after the marker", guardDoc)
	}
	return block
}

// testGuardCopy builds docs/node.md's Containerfile with buildah on a base
// mcbake did not build, COPY --from the tool image, and checks the
// result: the guard's files as mcbake build bakes them, the unit enabled
// from /usr (systemctl --root), the base's directories unchanged, and
// mcbake verify finds the guard (no MCB025).
func (w *world) testGuardCopy(t *testing.T, baseDir string) {
	// The base into the test's store, named (buildah pull of an oci:
	// reference names it after the directory, which may not be a name).
	baseName := guardBase
	pulled := exec.Command("skopeo", "copy", "--quiet", "oci:"+baseDir+":latest", "containers-storage:"+baseName)
	pulled.Env = w.env
	if out, err := pulled.CombinedOutput(); err != nil {
		t.Fatalf("skopeo copy the base into the store: %v\n%s", err, out)
	}
	cf := strings.NewReplacer("BASE_IMAGE", baseName, "MCBAKE_IMAGE", w.image).Replace(docContainerfile(t))
	ctxDir := w.mkdir("guard-context")
	writeFile(t, filepath.Join(ctxDir, "Containerfile"), cf)
	bud := exec.Command("buildah", "bud", "--quiet", "--pull-never", "--isolation", "chroot", "--timestamp", "0",
		"-f", filepath.Join(ctxDir, "Containerfile"), "-t", guarded, ctxDir)
	bud.Env = w.env
	if out, err := bud.CombinedOutput(); err != nil {
		t.Fatalf("buildah bud of docs/node.md's Containerfile:\n%s\n%v\n%s", cf, err, out)
	}
	layout := filepath.Join(w.dir, "guarded")
	push := exec.Command("buildah", "push", "--quiet", guarded, "oci:"+layout+":latest")
	push.Env = w.env
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("buildah push: %v\n%s", err, out)
	}
	root := filepath.Join(w.dir, "guarded-rootfs")
	ostreetest.Unpack(t, layout, "latest", root)
	baseRoot := filepath.Join(w.dir, "base-rootfs")
	ostreetest.Unpack(t, baseDir, "latest", baseRoot)

	// The image's own binaries: the guard it carries, and mcbake to
	// verify with (built on Debian bookworm, as this machine).
	bin := w.mkdir("bin")
	w.imageFile("/usr/share/mcbake/guard/usr/libexec/mcbake/mcbake-node", filepath.Join(bin, "mcbake-node"))
	w.imageFile("/usr/bin/mcbake", filepath.Join(bin, "mcbake"))
	node := mustRead(t, filepath.Join(bin, "mcbake-node"))
	for _, e := range guard.Tree(node) {
		p := filepath.Join(root, e.Path)
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("the guarded image lacks %s: %v", e.Path, err)
			continue
		}
		if bfi, err := os.Lstat(filepath.Join(baseRoot, e.Path)); err == nil {
			if bfi.Mode() != fi.Mode() {
				t.Errorf("%s: the COPY changed the base's mode %v to %v", e.Path, bfi.Mode(), fi.Mode())
			}
			continue
		}
		switch e.Type {
		case manifest.File:
			if b, err := os.ReadFile(p); err != nil || !bytes.Equal(b, e.Content) || fi.Mode().Perm() != fs.FileMode(e.Mode) {
				t.Errorf("%s in the guarded image: mode %v, %v; want mcbake build's (mode %o)", e.Path, fi.Mode(), err, e.Mode)
			}
		case manifest.Symlink:
			if target, err := os.Readlink(p); err != nil || target != e.Target {
				t.Errorf("%s in the guarded image -> %q, %v; want -> %s", e.Path, target, err, e.Target)
			}
		case manifest.Directory:
			if !fi.IsDir() || fi.Mode().Perm() != 0o755 {
				t.Errorf("%s in the guarded image: %v, want a directory 0755", e.Path, fi.Mode())
			}
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || st.Gid != 0 {
			t.Errorf("%s in the guarded image is owned by %d:%d, want root's", e.Path, st.Uid, st.Gid)
		}
	}
	if got, _ := exec.Command("systemctl", "--root="+root, "is-enabled", guard.UnitName).CombinedOutput(); strings.TrimSpace(string(got)) != "static" {
		t.Errorf("systemctl --root is-enabled %s in the guarded image = %q, want static (enabled from /usr)", guard.UnitName, got)
	}
	verify := exec.Command(filepath.Join(w.dir, "bin", "mcbake"), "verify", "--base", "oci:"+baseDir+":latest",
		"--image", "oci:"+layout+":latest", "-f", workerMC, "--format", "json", "--fail-on", "never")
	out, err := verify.Output()
	if err != nil {
		t.Fatalf("mcbake verify --image the guarded image: %v\n%s", err, out)
	}
	var rep struct {
		Findings []struct {
			Rule string `json:"rule"`
		} `json:"findings"`
		NotRun []struct {
			Rule string `json:"rule"`
		} `json:"notRun"`
	}
	if err := json.Unmarshal(out, &rep); err != nil {
		t.Fatalf("verify's JSON: %v", err)
	}
	for _, f := range append(rep.Findings, rep.NotRun...) {
		if f.Rule == "MCB025" {
			t.Errorf("mcbake verify reports MCB025 (no revert guard) or skips it on the guarded image: %s", out)
		}
	}
}
