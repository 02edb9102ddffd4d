package main

import (
	"encoding/json"
	"math/rand"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mcbake/mcbake/internal/testing/roottest"
)

// killAt starts this test binary as mcbake with args and kills it with
// SIGKILL after d (or lets it finish when it is quicker).
func killAt(t *testing.T, d time.Duration, args ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(self, args...)
	cmd.Env = append(os.Environ(), "MCBAKE_TEST_AS_CLI=1")
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(d, func() { _ = cmd.Process.Signal(syscall.SIGKILL) })
	_ = cmd.Wait()
	timer.Stop()
}

// checkLayout fails unless dir is absent or a valid OCI layout: index.json
// decodes and every blob it reaches exists with its digest.
func checkLayout(t *testing.T, dir string) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "index.json"))
	if os.IsNotExist(err) {
		if _, serr := os.Stat(dir); os.IsNotExist(serr) {
			return
		}
	}
	if err != nil {
		t.Fatalf("layout %s: %v", dir, err)
	}
	var idx imgspecv1.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatalf("layout %s: index.json: %v", dir, err)
	}
	for _, m := range idx.Manifests {
		mb := blob(t, dir, m.Digest)
		var man imgspecv1.Manifest
		if err := json.Unmarshal(mb, &man); err != nil {
			t.Fatalf("layout %s: manifest %s: %v", dir, m.Digest, err)
		}
		blob(t, dir, man.Config.Digest)
		for _, l := range man.Layers {
			blob(t, dir, l.Digest)
		}
	}
}

func blob(t *testing.T, dir string, d digest.Digest) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "blobs", d.Algorithm().String(), d.Encoded()))
	if err != nil {
		t.Fatalf("layout %s: %v", dir, err)
	}
	if got := digest.FromBytes(b); got != d {
		t.Fatalf("layout %s: blob %s holds %s: torn", dir, d, got)
	}
	return b
}

// leftovers lists the temporary entries runs leave next to dir.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(filepath.Dir(dir))
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range ents {
		if strings.Contains(e.Name(), ".mcbake-") {
			out = append(out, e.Name())
		}
	}
	return out
}

// TestKillBuild kills builds at a few dozen points, into a new layout and
// into the base's own: the layout is valid after every kill, and the next
// build gives the digest a clean build gives, with no leftovers.
func TestKillBuild(t *testing.T) {
	e := newEnv(t)
	clean := e.mustBuild(t, e.base, "oci:"+filepath.Join(e.dir, "clean")+":latest", workerMC)
	start := time.Now()
	e.mustBuild(t, e.base, "oci:"+filepath.Join(e.dir, "timing")+":latest", workerMC)
	took := time.Since(start)
	rng := rand.New(rand.NewSource(12))
	for _, dest := range []string{filepath.Join(e.dir, "killed"), filepath.Join(e.dir, "base")} {
		for i := 0; i < 16; i++ {
			if i%4 == 0 {
				_ = os.RemoveAll(e.cache) // cold: kills while indexing and caching too
			}
			args := append([]string{"build", "--quiet", "--base", e.base, "-o", "oci:" + dest + ":k", "-f", workerMC}, e.imageArgs()...)
			killAt(t, time.Duration(rng.Int63n(int64(2*took))), args...)
			checkLayout(t, dest)
		}
		if got := e.mustBuild(t, e.base, "oci:"+dest+":k", workerMC); got != clean {
			t.Errorf("build into %s after the kills = %s, want %s", dest, got, clean)
		}
		checkLayout(t, dest)
		if l := leftovers(t, dest); len(l) > 0 {
			t.Errorf("leftovers next to %s after a build: %v", dest, l)
		}
	}
}

// TestKillRewrite kills rewrites at random points: every planned path is
// old or new after each kill, and the next rewrite makes the node what a
// rewrite without kills does, leaving no temporary files.
func TestKillRewrite(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: rewrite sets owners")
	}
	e := newEnv(t)
	img := "oci:" + filepath.Join(e.dir, "layered") + ":latest"
	e.mustBuild(t, e.base, img, workerMC)
	plan := filepath.Join(e.dir, "plan.json")
	if code, _, stderr := e.run(append([]string{"plan", "--quiet", "--base", e.base, "--image", img, "-o", plan}, e.imageArgs()...)...); code != 0 {
		t.Fatalf("plan: %s", stderr)
	}
	root := filepath.Join(e.dir, "root")
	if err := os.MkdirAll(filepath.Join(root, "etc"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "etc", "passwd"), []byte("root:x:0:0::/root:/bin/sh\ncore:x:1000:1000::/var/home/core:/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := roottest.Tree(t, root)
	ref := filepath.Join(e.dir, "ref")
	if out, err := exec.Command("cp", "-a", root, ref).CombinedOutput(); err != nil {
		t.Fatalf("cp: %v %s", err, out)
	}
	args := func(r string) []string { return []string{"rewrite", "--plan", plan, "-f", workerMC, "--root", r} }
	start := time.Now()
	if code, _, stderr := e.run(args(ref)...); code != 0 {
		t.Fatalf("rewrite: %s", stderr)
	}
	took := time.Since(start)
	after := roottest.Tree(t, ref)
	rng := rand.New(rand.NewSource(7))
	for i := 0; i < 24; i++ {
		killAt(t, time.Duration(rng.Int63n(int64(took)+int64(50*time.Millisecond))), args(root)...)
		for p, v := range roottest.Tree(t, root) {
			if strings.Contains(p, ".mcbake-") {
				continue // a killed run's temporary entry: the next run sweeps it
			}
			if v != before[p] && v != after[p] {
				t.Fatalf("after a kill, %s is %q: neither old (%q) nor new (%q)", p, v, before[p], after[p])
			}
		}
	}
	if code, _, stderr := e.run(args(root)...); code != 0 {
		t.Fatalf("rewrite after the kills: %s", stderr)
	}
	got := roottest.Tree(t, root)
	for p := range got {
		if strings.Contains(p, ".mcbake-") {
			t.Errorf("rewrite left %s", p)
		}
	}
	for p, v := range after {
		if got[p] != v {
			t.Errorf("after the kills and a rewrite, %s = %q, want %q", p, got[p], v)
		}
	}
}
