package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/testing/roottest"
)

// hostileMC enables a unit the root has (so its unit file is read), and
// writes a file (so /etc/passwd is read for its owner by name).
const hostileMC = `apiVersion: machineconfiguration.openshift.io/v1
kind: MachineConfig
metadata: {name: 99-hostile}
spec:
  config:
    ignition: {version: 3.4.0}
    storage:
      files: [{path: /etc/x.conf, user: {name: core}, contents: {source: "data:,x"}}]
    systemd:
      # bar.service has no enabled: the MCD presets it, which reads the
      # preset files.
      units: [{name: foo.service, enabled: true}, {name: bar.service, contents: "[Service]\nExecStart=/bin/true\n"}]
`

// child runs this test binary as mcbake with args, in its own process so
// that its time and peak memory can be measured, and kills it after
// limit.
type childResult struct {
	code   int
	stderr string
	wall   time.Duration
	maxRSS int64 // bytes
}

func runChild(t *testing.T, limit time.Duration, args ...string) childResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	peak := filepath.Join(t.TempDir(), "peak")
	cmd := exec.CommandContext(ctx, self, args...)
	cmd.Env = append(os.Environ(), "MCBAKE_TEST_AS_CLI=1", "MCBAKE_TEST_PEAK_FILE="+peak)
	var errb bytes.Buffer
	cmd.Stderr = &errb
	start := time.Now()
	err = cmd.Run()
	r := childResult{stderr: errb.String(), wall: time.Since(start)}
	if ctx.Err() != nil {
		t.Fatalf("mcbake %v did not finish within %v", args, limit)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(peak)
	if err != nil {
		t.Fatalf("mcbake %v wrote no peak memory: %v", args, err)
	}
	if r.maxRSS, err = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err != nil {
		t.Fatal(err)
	}
	return r
}

// writePeak writes the process's peak resident memory in bytes (VmHWM of
// /proc/self/status: that of this program's own address space, unlike
// the rusage of a child, which counts the parent's memory it was forked
// with) to file.
func writePeak(file string) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			_ = os.WriteFile(file, []byte(strconv.FormatInt(kb*1024, 10)), 0o644)
		}
	}
}

// hostileRoot is a node root with base accounts, a unit, and one hostile
// thing made by breakIt.
func hostileRoot(t *testing.T, breakIt func(root string) error) string {
	t.Helper()
	root := filepath.Join(t.TempDir(), "root")
	for p, c := range map[string]string{
		"etc/passwd":                          "root:x:0:0::/root:/bin/sh\ncore:x:1000:1000::/home/core:/bin/sh\n",
		"etc/group":                           "root:x:0:\ncore:x:1000:\n",
		"usr/lib/systemd/system/foo.service":  "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
		"etc/systemd/system/.keep":            "",
		"usr/lib/systemd/system-preset/x.txt": "",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, p), []byte(c), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := breakIt(root); err != nil {
		t.Fatal(err)
	}
	return root
}

func replaceWith(p string, mk func(string) error) func(string) error {
	return func(root string) error {
		full := filepath.Join(root, p)
		if err := os.Remove(full); err != nil && !os.IsNotExist(err) {
			return err
		}
		return mk(full)
	}
}

// TestHostileNodeRoots: a fifo, a character device or a huge file where a
// unit file, a preset or /etc/passwd is read makes ondisk and rewrite fail
// (not hang: a generous bound stops a hung child) with one clear line,
// small memory, and nothing changed.
func TestHostileNodeRoots(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: device nodes and owners")
	}
	mc := filepath.Join(t.TempDir(), "mc.yaml")
	if err := os.WriteFile(mc, []byte(hostileMC), 0o644); err != nil {
		t.Fatal(err)
	}
	fifo := func(p string) error { return unix.Mkfifo(p, 0o644) }
	zero := func(p string) error { return unix.Mknod(p, unix.S_IFCHR|0o644, int(unix.Mkdev(1, 5))) }
	huge := func(p string) error {
		f, err := os.Create(p)
		if err != nil {
			return err
		}
		return f.Truncate(3 << 30) // sparse: 3 GiB of zeros, no disk
	}
	tests := []struct {
		name   string
		break_ func(string) error
		want   string
	}{
		{"fifo as /etc/passwd", replaceWith("etc/passwd", fifo), "/etc/passwd: not a regular file"},
		{"fifo as a unit file", replaceWith("usr/lib/systemd/system/foo.service", fifo), "foo.service: not a regular file"},
		{"fifo as a preset file", replaceWith("usr/lib/systemd/system-preset/50-x.preset", fifo), "50-x.preset: not a regular file"},
		{"/dev/zero as a unit file", replaceWith("usr/lib/systemd/system/foo.service", zero), "foo.service: not a regular file"},
		{"a 3 GiB unit file", replaceWith("usr/lib/systemd/system/foo.service", huge), "foo.service: larger than 4 MiB"},
		{"a 3 GiB /etc/group", replaceWith("etc/group", huge), "/etc/group: larger than 4 MiB"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			root := hostileRoot(t, tt.break_)
			before := roottest.Tree(t, root)
			plan := filepath.Join(t.TempDir(), "plan.json")
			if err := os.WriteFile(plan, []byte(fmt.Sprintf(`{"schemaVersion":1,"image":{"digest":"%s"},"base":{"digest":"%s"},"rewrite":[]}`, sha("l"), sha("b"))), 0o644); err != nil {
				t.Fatal(err)
			}
			for _, args := range [][]string{
				{"ondisk", "-f", mc, "--root", root},
				{"rewrite", "-f", mc, "--root", root, "--plan", plan},
				{"render", "-f", mc, "--root", root, "-o", filepath.Join(t.TempDir(), "out")},
			} {
				r := runChild(t, 2*time.Minute, args...) // bounds a hang on the fifo
				if r.code != exitInput || !strings.Contains(r.stderr, tt.want) || strings.Count(strings.TrimSpace(r.stderr), "\n") > 1 {
					t.Errorf("%s: exit %d, stderr %q; want exit %d and a line with %q", args[0], r.code, r.stderr, exitInput, tt.want)
				}
				t.Logf("%s: exit %d in %v", args[0], r.code, r.wall.Round(time.Millisecond))
				if r.maxRSS > 300<<20 {
					t.Errorf("%s: peak RSS %d MB, want under 300 MB", args[0], r.maxRSS>>20)
				}
			}
			if diff := cmp.Diff(before, roottest.Tree(t, root)); diff != "" {
				t.Errorf("a refused command changed the root (-before +after):\n%s", diff)
			}
		})
	}
}

// TestHostileMachineConfigs: content that expands past the limits, a path
// no node can create, an input larger than any MachineConfig: exit 2 with
// the file, the MachineConfig and the field, small memory.
func TestHostileMachineConfigs(t *testing.T) {
	dir := t.TempDir()
	var zeros bytes.Buffer
	zw := gzip.NewWriter(&zeros)
	if _, err := zw.Write(make([]byte, 30<<20)); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	src := "data:;base64," + base64.StdEncoding.EncodeToString(zeros.Bytes())
	var files []string
	for i := 0; i < 16; i++ {
		files = append(files, fmt.Sprintf(`{"path":"/etc/big-%02d","contents":{"compression":"gzip","source":%q}}`, i, src))
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	mcDoc := func(name, storage string) string {
		return fmt.Sprintf(`{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":%q},"spec":{"config":{"ignition":{"version":"3.4.0"},"storage":%s}}}`, name, storage)
	}
	bomb := write("bomb.json", mcDoc("99-bomb", `{"files":[`+strings.Join(files, ",")+`]}`))
	long := write("long.json", mcDoc("99-long", `{"files":[{"path":"/etc/`+strings.Repeat("a", 300)+`"},{"path":"/etc/nul\u0000x"}]}`))
	huge := filepath.Join(dir, "huge.yaml")
	f, err := os.Create(huge)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(65 << 20); err != nil {
		t.Fatal(err)
	}
	f.Close()
	tests := []struct {
		file string
		want []string
	}{
		{bomb, []string{"bomb.json: 99-bomb: spec.config.storage.files[2].contents: gzip content expands past what is left of 64 MiB"}},
		{long, []string{"long.json: 99-long: spec.config.storage.files[0].path: path \"/etc/aaaa", "longer than NAME_MAX (255 bytes)",
			"long.json: 99-long: spec.config.storage.files[1].path: path \"/etc/nul\\x00x\" contains a NUL byte"}},
		{huge, []string{"huge.yaml: larger than 64 MiB"}},
	}
	for _, tt := range tests {
		for _, cmd := range []string{"render", "verify"} {
			args := []string{cmd, "-f", tt.file}
			if cmd == "render" {
				args = append(args, "-o", filepath.Join(t.TempDir(), "out"))
			}
			r := runChild(t, 60*time.Second, args...)
			want := exitInput
			if cmd == "verify" && tt.file != huge {
				want = exitFindings // refused content is a finding, with the same message
			}
			if r.code != want {
				t.Errorf("%s %s: exit %d, want %d; stderr:\n%s", cmd, filepath.Base(tt.file), r.code, want, r.stderr)
			}
			if cmd == "render" {
				for _, w := range tt.want {
					if !strings.Contains(r.stderr, w) {
						t.Errorf("%s %s: stderr %q, want %q", cmd, filepath.Base(tt.file), r.stderr, w)
					}
				}
			}
			// 64 MiB of content is kept, what would go past it is only
			// counted: about 115 MB here, 200 leaves room for a loaded
			// machine's lagging collector.
			if r.maxRSS > 200<<20 {
				t.Errorf("%s %s: peak RSS %d MB, want under 200 MB", cmd, filepath.Base(tt.file), r.maxRSS>>20)
			}
		}
	}
}

func sha(s string) string { return digest.FromString(s).String() }

// TestBuildWithUnusableCache: the caches only save time, so a cache
// directory that cannot be used is a warning, and the build's digest is
// the one a build with a cache makes.
func TestBuildWithUnusableCache(t *testing.T) {
	e := newEnv(t)
	want := e.mustBuild(t, e.base, "oci:"+filepath.Join(e.dir, "a")+":latest", workerMC)
	file := filepath.Join(e.dir, "not-a-dir")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	args := []string{"build", "--quiet", "--base", e.base, "-o", "oci:" + filepath.Join(e.dir, "b") + ":latest",
		"--signature-policy", "testdata/policy.json", "--cache-dir", file, "-f", workerMC}
	code, stdout, stderr := e.run(args...)
	if code != 0 || strings.TrimSpace(stdout) != want {
		t.Fatalf("build with an unusable cache: exit %d, digest %q (want %s)\n%s", code, stdout, want, stderr)
	}
}
