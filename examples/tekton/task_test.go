// Package tekton holds the tests of mcbake's CI examples: the Tekton Task
// is parsed and validated with Tekton's own Go types (this nested module
// requires github.com/tektoncd/pipeline, kept out of mcbake's own module),
// and the GitHub Actions workflow is checked for what ties its steps
// together.
package tekton

import (
	"context"
	"os"
	"regexp"
	"strings"
	"testing"

	v1 "github.com/tektoncd/pipeline/pkg/apis/pipeline/v1"
	"sigs.k8s.io/yaml"
)

func readTask(t *testing.T) *v1.Task {
	t.Helper()
	b, err := os.ReadFile("mcbake-task.yaml")
	if err != nil {
		t.Fatal(err)
	}
	return parseTask(t, b)
}

func parseTask(t *testing.T, b []byte) *v1.Task {
	t.Helper()
	var task v1.Task
	if err := yaml.UnmarshalStrict(b, &task); err != nil {
		t.Fatalf("mcbake-task.yaml does not parse as a Tekton v1 Task: %v", err)
	}
	return &task
}

// TestTaskValidates parses the Task strictly (no unknown field) and runs
// Tekton's own defaulting and validation.
func TestTaskValidates(t *testing.T) {
	task := readTask(t)
	ctx := context.Background()
	task.SetDefaults(ctx)
	if err := task.Validate(ctx); err != nil {
		t.Fatalf("Tekton rejects the Task: %v", err)
	}
	// The validation is real: a reference to an undeclared parameter
	// fails it.
	b, err := os.ReadFile("mcbake-task.yaml")
	if err != nil {
		t.Fatal(err)
	}
	broken := parseTask(t, []byte(strings.Replace(string(b), "$(params.FAIL_ON)", "$(params.NO_SUCH_PARAM)", 1)))
	broken.SetDefaults(ctx)
	if broken.Validate(ctx) == nil {
		t.Error("Tekton accepts a Task that references an undeclared parameter")
	}
}

// TestTaskChainsResults checks what Tekton Chains needs (string results
// IMAGE_URL and IMAGE_DIGEST, written by the build step) and what the steps
// must run.
func TestTaskChainsResults(t *testing.T) {
	task := readTask(t)
	results := map[string]v1.ResultsType{}
	for _, r := range task.Spec.Results {
		results[r.Name] = r.Type
	}
	for _, name := range []string{"IMAGE_URL", "IMAGE_DIGEST"} {
		if typ, ok := results[name]; !ok || typ != v1.ResultsTypeString {
			t.Errorf("result %s: declared %v, type %q; Chains needs a string result", name, ok, typ)
		}
	}
	steps := map[string]string{}
	var order []string
	for _, s := range task.Spec.Steps {
		steps[s.Name] = s.Script
		order = append(order, s.Name)
	}
	if got := strings.Join(order, ","); got != "verify-machineconfigs,build,verify-image" {
		t.Errorf("steps %s, want verify-machineconfigs,build,verify-image", got)
	}
	checks := []struct{ step, pattern string }{
		{"build", `mcbake build [^\n]*-o "docker://\$IMAGE"`},
		{"build", `--digestfile "\$\(results\.IMAGE_DIGEST\.path\)"`},
		{"build", `> "\$\(results\.IMAGE_URL\.path\)"`},
		{"build", `"\$DOCKERCONFIG_PATH/\.dockerconfigjson"`}, // what a kubernetes.io/dockerconfigjson Secret mounts
		{"verify-machineconfigs", `mcbake verify [^\n]*--base "docker://\$BASE_IMAGE"`},
		{"verify-machineconfigs", `--format "sarif=\$SARIF_FILE"`},
		{"verify-image", `< "\$\(results\.IMAGE_DIGEST\.path\)"`},
		{"verify-image", `--image "docker://\$repo@\$digest"`},
		{"verify-image", `--format "sarif=\$SARIF_FILE"`},
	}
	for _, c := range checks {
		if !regexp.MustCompile(c.pattern).MatchString(steps[c.step]) {
			t.Errorf("step %s does not match %s:\n%s", c.step, c.pattern, steps[c.step])
		}
	}
}

// workflow is the part of a GitHub Actions workflow the test reads.
type workflow struct {
	Jobs map[string]struct {
		Permissions map[string]string `json:"permissions"`
		Steps       []struct {
			Name string            `json:"name"`
			Uses string            `json:"uses"`
			If   string            `json:"if"`
			Run  string            `json:"run"`
			With map[string]string `json:"with"`
		} `json:"steps"`
	} `json:"jobs"`
}

// TestWorkflow checks that the GitHub Actions workflow uploads the SARIF
// file its verify steps write, with the permission that needs, even when
// verification fails (but not from a fork's pull request), verifies a
// fork's pull request without secrets, keeps mcbake's cache keyed by the
// base, and verifies the image it built by digest.
func TestWorkflow(t *testing.T) {
	b, err := os.ReadFile("../github-actions/mcbake.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var wf workflow
	if err := yaml.Unmarshal(b, &wf); err != nil {
		t.Fatalf("the workflow is not YAML: %v", err)
	}
	job, ok := wf.Jobs["build-verify"]
	if !ok {
		t.Fatal("no build-verify job")
	}
	if job.Permissions["security-events"] != "write" {
		t.Error("the job cannot upload SARIF: permissions.security-events is not write")
	}
	sarifFlag := regexp.MustCompile(`--format sarif=(\S+)`)
	var written []string
	var upload, build, verifyImage, cacheKey string
	for _, s := range job.Steps {
		if strings.HasPrefix(s.Uses, "actions/cache@") {
			cacheKey = s.With["key"]
		}
		if m := sarifFlag.FindStringSubmatch(s.Run); m != nil {
			written = append(written, m[1])
		}
		switch {
		case strings.HasPrefix(s.Uses, "github/codeql-action/upload-sarif@"):
			upload = s.With["sarif_file"]
			if !strings.Contains(s.If, "always()") {
				t.Errorf("the SARIF upload does not run when verification fails (if: %q)", s.If)
			}
			if !strings.Contains(s.If, "github.event.pull_request.head.repo.full_name == github.repository") {
				t.Errorf("the SARIF upload runs on a fork's pull request, which cannot write code scanning (if: %q)", s.If)
			}
		case strings.Contains(s.Run, "mcbake build"):
			build = s.Run
		case strings.Contains(s.Run, "--image"):
			verifyImage = s.Run
		}
	}
	if len(written) != 2 {
		t.Fatalf("%d verify steps write SARIF, want 2", len(written))
	}
	for _, w := range written {
		if w != upload {
			t.Errorf("a verify step writes %s, the upload reads %q", w, upload)
		}
	}
	if !strings.Contains(cacheKey, "vars.MCBAKE_BASE_IMAGE") {
		t.Errorf("mcbake's cache is not kept, keyed by the base (actions/cache key %q)", cacheKey)
	}
	if !strings.Contains(string(b), `if [ -z "$PULL_SECRET" ] && [ "$GITHUB_EVENT_NAME" = pull_request ]`) {
		t.Error("a fork's pull request (no secrets) is not verified without the base")
	}
	if !strings.Contains(string(b), "${GITHUB_REPOSITORY,,}") {
		t.Error("the image name is not lowercased: GHCR refuses OWNER/REPO with capitals")
	}
	// mcbake is a pinned release, from make dist's tarball, checked
	// against the release's checksums (hack/dist.sh names both).
	pin := regexp.MustCompile(`MCBAKE_VERSION: \$\{\{ vars\.MCBAKE_VERSION \|\| '(v[0-9]+\.[0-9]+\.[0-9]+)' \}\}`).FindStringSubmatch(string(b))
	if pin == nil {
		t.Error("MCBAKE_VERSION does not default to a release tag (vX.Y.Z)")
	}
	var install string
	for _, s := range job.Steps {
		if s.Name == "Install mcbake" {
			install = s.Run
		}
	}
	for _, want := range []string{`name="mcbake-$MCBAKE_VERSION-linux-amd64"`, `"$base/$name.tar.gz"`,
		`"$base/mcbake-$MCBAKE_VERSION-SHA256SUMS"`, `sha256sum --check`} {
		if !strings.Contains(install, want) {
			t.Errorf("the Install mcbake step lacks %s (the release tarball, checked):\n%s", want, install)
		}
	}
	if pin != nil {
		readme, err := os.ReadFile("../README.md")
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(readme), "mcbake:"+pin[1]+"}") {
			t.Errorf("examples/README.md's TaskRun does not use the image of the workflow's pinned release %s", pin[1])
		}
	}
	if !strings.Contains(build, "--digestfile digest.txt") || !strings.Contains(verifyImage, "@$(cat digest.txt)") {
		t.Errorf("the image verified is not the one built, by digest:\nbuild: %s\nverify: %s", build, verifyImage)
	}
}
