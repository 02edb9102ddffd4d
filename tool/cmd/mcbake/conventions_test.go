package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// TestEveryCommandHasAnExample: --help of every command (and so its man
// page) has an Example section.
func TestEveryCommandHasAnExample(t *testing.T) {
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		if c.Name() != "help" && c.Example == "" {
			t.Errorf("%q has no Example", c.CommandPath())
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	for _, c := range newRootCommand().Commands() {
		walk(c)
	}
}

// TestManPages: `mcbake man DIR` (make man) writes a page for every
// command, each titled after it, dated SOURCE_DATE_EPOCH, with its
// examples, exit status, environment and the containers pages in SEE
// ALSO, and the same pages on a second run.
func TestManPages(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "1764892800") // 2025-12-05
	e := newEnv(t)
	dir := filepath.Join(e.dir, "man")
	if code, _, stderr := e.run("man", dir); code != 0 {
		t.Fatalf("man: exit %d\n%s", code, stderr)
	}
	for _, page := range []string{"mcbake.1", "mcbake-build.1", "mcbake-diff.1", "mcbake-verify.1", "mcbake-node-prepare-revert.1", "mcbake-completion-bash.1"} {
		b, err := os.ReadFile(filepath.Join(dir, page))
		if err != nil {
			t.Error(err)
			continue
		}
		if page != "mcbake.1" && !strings.Contains(string(b), ".SH EXAMPLE") {
			t.Errorf("%s has no EXAMPLE section", page)
		}
		title := strings.ToUpper(strings.TrimSuffix(page, ".1"))
		if !strings.Contains(string(b), `.TH "`+title+`" "1"`) || strings.Contains(string(b), "1970") {
			t.Errorf("%s: not titled %s, or dated 1970 (SOURCE_DATE_EPOCH is set):\n%.200s", page, title, b)
		}
		for _, sec := range []string{".SH EXIT STATUS", ".SH ENVIRONMENT", ".SH SEE ALSO", "containers\\-auth.json"} {
			if !strings.Contains(string(b), sec) {
				t.Errorf("%s has no %s", page, sec)
			}
		}
	}
	first, _ := os.ReadFile(filepath.Join(dir, "mcbake-build.1"))
	if code, _, _ := e.run("man", dir); code != 0 {
		t.Fatal("second man run failed")
	}
	if again, _ := os.ReadFile(filepath.Join(dir, "mcbake-build.1")); string(again) != string(first) {
		t.Errorf("man pages differ between two runs")
	}
}

// TestFlagValueCompletion asks cobra's completion (what `--format <TAB>`
// runs) for flag values.
func TestFlagValueCompletion(t *testing.T) {
	e := newEnv(t)
	tests := []struct {
		args []string
		want []string
	}{
		{[]string{"diff", "--format", ""}, []string{"text", "json"}},
		{[]string{"verify", "--format", ""}, []string{"text", "json", "junit", "sarif"}},
		{[]string{"verify", "--fail-on", ""}, []string{"error", "warning", "info", "never"}},
		{[]string{"verify", "--disable", ""}, []string{"MCB001"}},
		{[]string{"verify", "--severity", ""}, []string{"MCB004=warning"}},
		{[]string{"build", "--compression", ""}, []string{"gzip", "zstd"}},
		{[]string{"build", "--engine", ""}, []string{"append", "buildah"}},
		{[]string{"build", "--platform", ""}, []string{"linux/amd64", "all"}},
		{[]string{"ondisk", "--format", ""}, []string{"text", "json"}},
		{[]string{"version", "--log-level", ""}, []string{"debug", "warn"}},
		{[]string{"build", "--base", ""}, []string{"oci:", "docker://", "containers-storage:", "oci-archive:"}},
		{[]string{"build", "-o", "d"}, []string{"docker://", "docker-archive:", "dir:"}},
		{[]string{"diff", "--image", "oci:"}, []string{"oci:testdata/"}},
		{[]string{"verify", "--base", "oci:testdata/"}, []string{"oci:testdata/" + firstEntry(t, "testdata")}},
	}
	for _, tt := range tests {
		code, stdout, stderr := e.run(append([]string{"__complete"}, tt.args...)...)
		if code != 0 {
			t.Errorf("__complete %v: exit %d\n%s", tt.args, code, stderr)
			continue
		}
		got := map[string]bool{}
		for _, line := range strings.Split(stdout, "\n") {
			got[strings.SplitN(line, "\t", 2)[0]] = true
		}
		for _, w := range tt.want {
			if !got[w] {
				t.Errorf("__complete %v = %q, want %q among them", tt.args, stdout, w)
			}
		}
	}
}

// firstEntry is the name of dir's first entry (a directory gets its
// slash, as completion writes it).
func firstEntry(t *testing.T, dir string) string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) == 0 {
		t.Fatalf("%s: %v (no entries)", dir, err)
	}
	if entries[0].IsDir() {
		return entries[0].Name() + "/"
	}
	return entries[0].Name()
}

// TestDiffExitCode: with --exit-code, diff exits 1 when a revert clobbers
// something, 0 when it clobbers nothing, 2 on an error (diffoci's
// convention).
func TestDiffExitCode(t *testing.T) {
	e := newEnv(t)
	clobbers := "oci:" + filepath.Join(e.dir, "clobbers") + ":latest"
	harmless := "oci:" + filepath.Join(e.dir, "harmless") + ":latest"
	e.mustBuild(t, e.base, clobbers, workerMC)
	e.mustBuild(t, e.base, harmless, "testdata/var-only.yaml")
	for _, tt := range []struct {
		image string
		want  int
	}{
		{clobbers, exitFindings},
		{harmless, exitOK},
		{"oci:" + filepath.Join(e.dir, "missing") + ":latest", exitInput},
	} {
		args := append([]string{"diff", "--quiet", "--exit-code", "--base", e.base, "--image", tt.image}, e.imageArgs()...)
		if code, stdout, stderr := e.run(args...); code != tt.want {
			t.Errorf("diff --exit-code --image %s: exit %d, want %d\n%s%s", tt.image, code, tt.want, stdout, stderr)
		}
	}
	args := append([]string{"diff", "--quiet", "--base", e.base, "--image", clobbers}, e.imageArgs()...)
	if code, _, _ := e.run(args...); code != exitOK {
		t.Errorf("diff without --exit-code: exit %d, want 0", code)
	}
}

// TestVersionFlag: --version prints the version, as `version` does first.
func TestVersionFlag(t *testing.T) {
	e := newEnv(t)
	code, out, stderr := e.run("--version")
	if code != 0 || out != "mcbake "+version+"\n" {
		t.Errorf("--version: exit %d, %q (stderr %q); want mcbake %s", code, out, stderr, version)
	}
}

// TestTLSVerifyFlags: --tls-verify (and --src-/--dest-) say what applies
// when not given, with no contradicting "(default true)", and resolve to
// unset, true or false.
func TestTLSVerifyFlags(t *testing.T) {
	for _, tc := range []struct {
		args      []string
		tls, dest *bool
	}{
		{nil, nil, nil},
		{[]string{"--tls-verify"}, boolPtr(true), nil},
		{[]string{"--tls-verify=false"}, boolPtr(false), nil},
		{[]string{"--tls-verify=false", "--dest-tls-verify"}, boolPtr(false), boolPtr(true)},
	} {
		var f imageFlags
		cmd := &cobra.Command{Use: "x"}
		f.registerPush(cmd)
		f.register(cmd)
		if err := cmd.Flags().Parse(tc.args); err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		o, _, err := f.options(cmd)
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if !equalPtr(o.TLSVerify, tc.tls) || !equalPtr(o.Destination.TLSVerify, tc.dest) || o.Source.TLSVerify != nil {
			t.Errorf("%v: TLSVerify %v, dest %v, src %v; want %v, %v, unset", tc.args, o.TLSVerify, o.Destination.TLSVerify, o.Source.TLSVerify, tc.tls, tc.dest)
		}
		if strings.Contains(cmd.Flags().FlagUsages(), "(default true)") {
			t.Errorf("the help shows a default true:\n%s", cmd.Flags().FlagUsages())
		}
	}
}

func equalPtr(a, b *bool) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// TestProgressSaysReadOrWrite: in a pipe, every progress line of a cold
// build names a blob and says whether it is read (the base's layers,
// indexed) or written (the image's blobs).
func TestProgressSaysReadOrWrite(t *testing.T) {
	e := newEnv(t)
	out := "oci:" + filepath.Join(e.dir, "progress") + ":latest"
	args := append([]string{"build", "--base", e.base, "-o", out, "-f", workerMC}, e.imageArgs()...)
	code, _, stderr := e.run(args...)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	reads := 0
	for _, line := range strings.Split(stderr, "\n") {
		if !strings.Contains(line, "%") || !strings.Contains(line, " of ") {
			continue // not a progress line
		}
		switch {
		case strings.HasPrefix(line, "read sha256:"):
			reads++
		case strings.HasPrefix(line, "write sha256:"):
		default:
			t.Errorf("progress line %q says neither read nor write", line)
		}
	}
	if reads == 0 {
		t.Errorf("a cold build printed no read progress:\n%s", stderr)
	}
}
