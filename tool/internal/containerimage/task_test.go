package containerimage

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"sigs.k8s.io/yaml"

	"github.com/mcbake/mcbake/internal/testbase"
	"github.com/mcbake/mcbake/tool/internal/registrytest"
)

const (
	repoRoot = "../../.."
	taskFile = repoRoot + "/examples/tekton/mcbake-task.yaml"
	workerMC = repoRoot + "/testdata/machineconfigs/rendered-worker-aws.json"
	tags     = "containers_image_openpgp exclude_graphdriver_btrfs"
)

// buildTags are the Makefile's: isal where ISA-L's header is.
func buildTags() string {
	if _, err := os.Stat("/usr/include/isa-l/igzip_lib.h"); err == nil {
		return tags + " isal"
	}
	return tags
}

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
	env     []string // for buildah and hack/image.sh: the test's own store
	image   string
	volumes []string // buildah run -v values: the Task's workspaces and volumes
}

func need(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: buildah needs root for its store here")
	}
	for _, tool := range []string{"buildah", "skopeo", registrytest.Binary, "go"} {
		if _, err := exec.LookPath(tool); err != nil {
			t.Skipf("%s not installed (make test installs it): skipping the container image test", tool)
		}
	}
	if _, err := os.Stat("/bin/busybox"); err != nil {
		t.Skip("busybox-static not installed (make test installs it): skipping the container image test")
	}
}

// TestTaskRunsInTheImage builds mcbake's image with hack/image.sh (no
// registry, no base image), then runs the Tekton Task's three steps in it
// against a registry with TLS from a private CA and htpasswd auth, the
// credentials mounted as a kubernetes.io/dockerconfigjson Secret would
// mount them: the layered image is pushed, the results are written, and
// the reports land in the source workspace.
func TestTaskRunsInTheImage(t *testing.T) {
	need(t)
	start := time.Now()
	w := newWorld(t)
	w.buildImage()
	t.Logf("image built in %.1fs", time.Since(start).Seconds())
	// The image decodes gzip as the binary does here: with ISA-L when it
	// is built in and on this machine (hack/image.sh copies the library).
	host, err := exec.Command(filepath.Join(w.dir, "bin", "mcbake"), "version").Output()
	if err != nil {
		t.Fatalf("mcbake version: %v", err)
	}
	if in, err := w.runStep("version", "mcbake version", nil, nil); err != nil || string(in) != string(host) {
		t.Errorf("mcbake version in the image = %q, %v; here %q", in, err, host)
	}
	reg := registrytest.Start(t)
	baseDir := filepath.Join(w.dir, "base")
	if _, err := testbase.Write(baseDir, testbase.Options{}); err != nil {
		t.Fatal(err)
	}
	reg.Push(t, "oci:"+baseDir+":latest", "os/base:4.18")

	source, results, dockerconfig := w.mkdir("source"), w.mkdir("results"), w.mkdir("dockerconfig")
	copyFile(t, workerMC, filepath.Join(w.mkdir("source/machineconfigs"), "worker.json"))
	copyFile(t, reg.AuthFile(t, registrytest.User, registrytest.Password), filepath.Join(dockerconfig, ".dockerconfigjson"))
	w.volumes = []string{
		source + ":/workspace/source",
		dockerconfig + ":/workspace/dockerconfig:ro",
		results + ":/tekton/results",
		w.mkdir("cache") + ":/var/cache/mcbake",
		reg.CertsD + ":/etc/containers/certs.d:ro", // the cluster's trust in the registry's CA
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
	out, err := exec.Command("skopeo", "--registries-conf", reg.EmptyRegistriesConf(), "inspect", "--cert-dir", reg.CertDir,
		"--creds", registrytest.User+":"+registrytest.Password, "docker://"+image).Output()
	if err != nil {
		t.Fatalf("skopeo inspect %s: %v", image, err)
	}
	var inspect struct{ Digest string }
	if err := json.Unmarshal(out, &inspect); err != nil || inspect.Digest != digest {
		t.Errorf("the registry has %s at %s (%v), the Task reported %s", inspect.Digest, image, err, digest)
	}
	for _, report := range []string{"mcbake-verify.sarif", "mcbake-verify.junit.xml"} {
		if _, err := os.Stat(filepath.Join(source, report)); err != nil {
			t.Errorf("report missing from the source workspace: %v", err)
		}
	}
}

func newWorld(t *testing.T) *world {
	dir := t.TempDir()
	w := &world{t: t, dir: dir, image: "localhost/mcbake-tasktest:latest"}
	conf := filepath.Join(dir, "storage.conf")
	store := filepath.Join(dir, "store")
	writeFile(t, conf, "[storage]\ndriver = \"vfs\"\ngraphroot = \""+store+"/root\"\nrunroot = \""+store+"/run\"\n")
	w.env = append(os.Environ(), "CONTAINERS_STORAGE_CONF="+conf, "BUILDAH_ISOLATION=chroot", "TMPDIR="+w.mkdir("tmp"))
	t.Cleanup(func() { // the store's layers, then its files
		cmd := exec.Command("buildah", "rm", "--all")
		cmd.Env = w.env
		_ = cmd.Run()
	})
	return w
}

func (w *world) mkdir(name string) string {
	p := filepath.Join(w.dir, name)
	if err := os.MkdirAll(p, 0o755); err != nil {
		w.t.Fatal(err)
	}
	return p
}

// buildImage builds both binaries as the Makefile does and runs
// hack/image.sh, as `make image` does, into the test's store.
func (w *world) buildImage() {
	w.t.Helper()
	bin := w.mkdir("bin")
	builds := []*exec.Cmd{
		exec.Command("go", "-C", "tool", "build", "-tags", buildTags(), "-o", filepath.Join(bin, "mcbake"), "./cmd/mcbake"),
		exec.Command("go", "build", "-o", filepath.Join(bin, "mcbake-node"), "./cmd/mcbake-node"),
	}
	builds[0].Env = append(os.Environ(), "CGO_ENABLED=1", "GOEXPERIMENT=jsonv2")
	builds[1].Env = append(os.Environ(), "CGO_ENABLED=0", "GOEXPERIMENT=jsonv2")
	for _, cmd := range builds {
		cmd.Dir = repoRoot
		if out, err := cmd.CombinedOutput(); err != nil {
			w.t.Fatalf("%v: %v\n%s", cmd.Args, err, out)
		}
	}
	cmd := exec.Command("bash", "hack/image.sh")
	cmd.Dir = repoRoot
	cmd.Env = append(w.env, "IMAGE="+w.image, "BIN="+bin)
	if out, err := cmd.CombinedOutput(); err != nil {
		w.t.Fatalf("hack/image.sh: %v\n%s", err, out)
	}
}

// runStep runs a step's script in a new container of the image, as Tekton
// runs each step: the workspaces and volumes mounted, the step
// template's environment, the host's network (the registry is on
// 127.0.0.1).
func (w *world) runStep(name, script string, env, args []string) ([]byte, error) {
	from := exec.Command("buildah", "from", "--quiet", "--pull-never", w.image)
	from.Env = w.env
	ctr, err := from.Output()
	if err != nil {
		return nil, err
	}
	id := strings.TrimSpace(string(ctr))
	defer func() {
		rm := exec.Command("buildah", "rm", id)
		rm.Env = w.env
		_ = rm.Run()
	}()
	runArgs := []string{"run", "--isolation", "chroot", "--network", "host", "--workingdir", "/workspace/source"}
	for _, v := range w.volumes {
		runArgs = append(runArgs, "-v", v)
	}
	for _, e := range env {
		runArgs = append(runArgs, "--env", e)
	}
	runArgs = append(append(runArgs, id, "--", "/bin/sh", "-c", script, name), args...)
	run := exec.Command("buildah", runArgs...)
	run.Env = w.env
	return run.CombinedOutput()
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
