package imports

import (
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/mcbake/mcbake/"

// pure are the packages that must build with CGO_ENABLED=0, no build tags,
// and nothing from containers/* in their dependencies.
var pure = []string{"machineconfig", "manifest", "fstree", "render", "revert", "node", "cmd/mcbake-node", "internal/cli"}

// containers are the module paths of the containers libraries, under both
// their old and their new names.
var containers = []string{"github.com/containers/", "go.podman.io/"}

type pkg struct {
	ImportPath string
	Imports    []string
	Deps       []string
}

// The two modules' directories, from this package's.
const (
	libraryDir = "../.."
	toolDir    = "../../tool"
)

// list runs go list -json on patterns in the module at dir with env
// added to the environment.
func list(t *testing.T, dir string, env []string, args ...string) []pkg {
	t.Helper()
	cmd := exec.Command("go", append([]string{"list", "-json"}, args...)...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list %v: %v", args, err)
	}
	var pkgs []pkg
	dec := json.NewDecoder(strings.NewReader(string(out)))
	for {
		var p pkg
		if err := dec.Decode(&p); err == io.EOF {
			return pkgs
		} else if err != nil {
			t.Fatal(err)
		}
		pkgs = append(pkgs, p)
	}
}

func isContainers(path string) bool {
	for _, c := range containers {
		if strings.HasPrefix(path, c) {
			return true
		}
	}
	return false
}

// TestPurePackages: the MachineConfig, rendering, manifest, prediction
// and node packages need neither cgo nor containers/*.
func TestPurePackages(t *testing.T) {
	var patterns []string
	for _, p := range pure {
		patterns = append(patterns, "./"+p)
	}
	env := []string{"CGO_ENABLED=0", "GOFLAGS="}
	for _, p := range list(t, libraryDir, env, patterns...) {
		for _, d := range p.Deps {
			if isContainers(d) {
				t.Errorf("%s depends on %s", p.ImportPath, d)
			}
		}
	}
	build := exec.Command("go", append([]string{"build"}, patterns...)...)
	build.Dir = libraryDir
	build.Env = append(os.Environ(), env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Errorf("CGO_ENABLED=0 go build %v without tags: %v\n%s", patterns, err, out)
	}
}

// TestOneDoor: only image imports containers/image, containers/storage and
// containers/common (but for the network types buildah's API takes, which
// only build/buildah may import), only build/buildah imports buildah, and
// build and verify do not import each other. The longest matching prefix
// decides. Each library is named under its old and its new module path
// (go.podman.io; buildah keeps its old one, README.md, "Libraries, and why").
func TestOneDoor(t *testing.T) {
	tool := module + "tool/"
	doors := map[string]string{
		"go.podman.io/image/":                     tool + "image",
		"go.podman.io/storage":                    tool + "image",
		"go.podman.io/common":                     tool + "image",
		"go.podman.io/common/libnetwork":          tool + "build/buildah",
		"go.podman.io/buildah":                    tool + "build/buildah",
		"github.com/containers/image/":            tool + "image",
		"github.com/containers/storage":           tool + "image",
		"github.com/containers/common":            tool + "image",
		"github.com/containers/common/libnetwork": tool + "build/buildah",
		"github.com/containers/buildah":           tool + "build/buildah",
	}
	door := func(imp string) (string, bool) {
		best := ""
		for prefix := range doors {
			if strings.HasPrefix(imp, prefix) && len(prefix) > len(best) {
				best = prefix
			}
		}
		return doors[best], best != ""
	}
	for _, p := range list(t, toolDir, []string{"GOFLAGS=-tags=containers_image_openpgp,exclude_graphdriver_btrfs"}, "./...") {
		for _, imp := range p.Imports {
			if d, ok := door(imp); ok && p.ImportPath != d {
				t.Errorf("%s imports %s; only %s may", p.ImportPath, imp, d)
			}
			if p.ImportPath == tool+"build" && imp == tool+"verify" || p.ImportPath == tool+"verify" && imp == tool+"build" {
				t.Errorf("%s imports %s: build and verify never import each other", p.ImportPath, imp)
			}
		}
	}
}

// TestLibraryModule: the library's go.mod requires no containers/*
// module, nor the tool's, so that a program importing mcbake (the
// machine-config-daemon) keeps its own versions of them: Go's version
// selection takes the highest any go.mod in the build requires. (What
// the library's own dependencies require, Ignition's libhvee, comes with
// them whoever imports them.)
func TestLibraryModule(t *testing.T) {
	cmd := exec.Command("go", "mod", "graph")
	cmd.Dir = libraryDir
	cmd.Env = append(os.Environ(), "GOFLAGS=")
	cmd.Stderr = os.Stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go mod graph: %v", err)
	}
	self := strings.TrimSuffix(module, "/")
	n := 0
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		from, to, _ := strings.Cut(line, " ")
		if from != self {
			continue
		}
		n++
		if path, _, _ := strings.Cut(to, "@"); isContainers(path+"/") || strings.HasPrefix(path, module) {
			t.Errorf("the library's go.mod requires %s", to)
		}
	}
	if n == 0 {
		t.Fatalf("go mod graph in %s lists no requirement of %s", libraryDir, self)
	}
}

// TestHarnessesOnlyInTests: the test harnesses under internal/testing/ and
// tool/internal/testing/ are imported by tests, by other harnesses, by the
// end-to-end test packages (tool/e2e/...) and by the base generator's
// command (tool/internal/mkbase, for the demo and the benchmarks); never
// by a package mcbake or mcbake-node is built from.
func TestHarnessesOnlyInTests(t *testing.T) {
	isHarness := func(path string) bool {
		return strings.HasPrefix(path, module+"internal/testing/") || strings.HasPrefix(path, module+"tool/internal/testing/")
	}
	mayImport := func(path string) bool {
		return isHarness(path) || strings.HasPrefix(path, module+"tool/e2e/") || path == module+"tool/internal/mkbase"
	}
	pkgs := list(t, libraryDir, []string{"GOFLAGS="}, "./...")
	pkgs = append(pkgs, list(t, toolDir, []string{"GOFLAGS=-tags=containers_image_openpgp,exclude_graphdriver_btrfs"}, "./...")...)
	n := 0
	for _, p := range pkgs {
		if isHarness(p.ImportPath) {
			n++
			continue
		}
		for _, imp := range p.Imports {
			if isHarness(imp) && !mayImport(p.ImportPath) {
				t.Errorf("%s imports the test harness %s outside its tests", p.ImportPath, imp)
			}
		}
	}
	if n == 0 {
		t.Fatal("go list found no package under internal/testing/ or tool/internal/testing/")
	}
}

// TestPackageMap: docs/design.md's "Packages" lists every package of both
// modules, once, and nothing else: its first indented list is the
// library's, its second the tool's.
// checkImportsPointDown checks that in the map's list of a module
// (names without prefix) a package imports only packages below it, but
// for the test harnesses and the end-to-end tests.
func checkImportsPointDown(t *testing.T, names []string, pkgs []pkg, prefix string) {
	t.Helper()
	at := map[string]int{}
	for i, n := range names {
		at[n] = i
	}
	for _, p := range pkgs {
		name := strings.TrimPrefix(p.ImportPath, prefix)
		if strings.Contains(name, "testing/") || strings.HasPrefix(name, "e2e/") {
			continue
		}
		for _, imp := range p.Imports {
			dep, ok := strings.CutPrefix(imp, prefix)
			if j, listed := at[dep]; ok && listed && j <= at[name] {
				t.Errorf("docs/design.md lists %s above %s, which imports it: imports point down", dep, name)
			}
		}
	}
}

func TestPackageMap(t *testing.T) {
	doc, err := os.ReadFile(libraryDir + "/docs/design.md")
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(doc), "\n## Packages\n")
	if !ok {
		t.Fatal(`docs/design.md has no "## Packages" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var lists [][]string
	inList := false
	for _, line := range strings.Split(section, "\n") {
		indented := strings.HasPrefix(line, "    ")
		if indented && !inList {
			lists = append(lists, nil)
		}
		inList = indented
		if indented {
			lists[len(lists)-1] = append(lists[len(lists)-1], strings.Fields(line)[0])
		}
	}
	if len(lists) != 2 {
		t.Fatalf(`docs/design.md's "Packages" has %d indented lists, want 2 (the library's, the tool's)`, len(lists))
	}
	modules := []struct {
		dir, prefix string
		env         []string
	}{
		{libraryDir, module, []string{"GOFLAGS="}},
		{toolDir, module + "tool/", []string{"GOFLAGS=-tags=containers_image_openpgp,exclude_graphdriver_btrfs"}},
	}
	for i, m := range modules {
		want := map[string]bool{}
		pkgs := list(t, m.dir, m.env, "./...")
		for _, p := range pkgs {
			want[strings.TrimPrefix(p.ImportPath, m.prefix)] = true
		}
		checkImportsPointDown(t, lists[i], pkgs, m.prefix)
		seen := map[string]bool{}
		for _, p := range lists[i] {
			switch {
			case seen[p]:
				t.Errorf("docs/design.md lists %s twice", p)
			case !want[p]:
				t.Errorf("docs/design.md lists %s, which is not a package of %s", p, m.dir)
			}
			seen[p] = true
		}
		for p := range want {
			if !seen[p] {
				t.Errorf("docs/design.md does not list %s (module at %s)", p, m.dir)
			}
		}
	}
}
