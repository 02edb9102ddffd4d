package render

import (
	"bytes"
	"context"
	"flag"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

var update = flag.Bool("update", false, "rewrite the golden manifests in testdata/golden")

var (
	fixtureDir = filepath.Join("..", "testdata", "machineconfigs")
	goldenDir  = filepath.Join("..", "testdata", "golden")
)

// fixtures returns the paths of the reference MachineConfigs.
func fixtures(t testing.TB) []string {
	t.Helper()
	paths, err := filepath.Glob(filepath.Join(fixtureDir, "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) != 8 {
		t.Fatalf("found %d fixtures in %s, want 8", len(paths), fixtureDir)
	}
	return paths
}

func loadFixture(t testing.TB, p string) []*machineconfig.MachineConfig {
	t.Helper()
	mcs, err := machineconfig.Load([]string{p}, nil)
	if err != nil {
		t.Fatalf("Load(%s) = %v", p, err)
	}
	return mcs
}

func renderManifest(t testing.TB, mcs []*machineconfig.MachineConfig, root fstree.Tree) (*Result, *manifest.Manifest, []byte) {
	t.Helper()
	res, err := Render(context.Background(), machineconfig.Merge(mcs), root)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	m := res.Manifest(mcs)
	b, err := manifest.Marshal(m)
	if err != nil {
		t.Fatalf("manifest.Marshal() = %v", err)
	}
	schematest.Validate(t, "manifest", b)
	return res, m, b
}

// TestFixtures renders every reference MachineConfig without a root and
// compares its manifest with the golden file (go test -update rewrites
// them).
func TestFixtures(t *testing.T) {
	for _, p := range fixtures(t) {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		t.Run(name, func(t *testing.T) {
			mcs := loadFixture(t, p)
			_, m, got := renderManifest(t, mcs, nil)
			checkCoverage(t, mcs[0], m)
			golden := filepath.Join(goldenDir, name+".manifest.json")
			if *update {
				if err := os.WriteFile(golden, got, 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test ./render -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), string(got)); diff != "" {
				t.Errorf("manifest of %s mismatch (-want +got):\n%s", name, diff)
			}
		})
	}
}

// checkCoverage checks that the manifest has an entry for every file,
// drop-in and unit of mc, from the right field, that every entry's parent
// is a directory entry (there is no root), and that entries are sorted.
func checkCoverage(t *testing.T, mc *machineconfig.MachineConfig, m *manifest.Manifest) {
	t.Helper()
	byPath := map[string]manifest.Entry{}
	for i, e := range m.Entries {
		if i > 0 && m.Entries[i-1].Path >= e.Path {
			t.Errorf("manifest entries %s, %s: not sorted and unique", m.Entries[i-1].Path, e.Path)
		}
		byPath[e.Path] = e
	}
	wantType := func(p string, typ manifest.Type, field string) {
		e, ok := byPath[p]
		if !ok || e.Type != typ || e.Source.Field != field || e.Source.MachineConfig != mc.Name {
			t.Errorf("manifest entry %s = %+v, want a %s from %s %s", p, e, typ, mc.Name, field)
		}
	}
	ign := mc.Ignition
	for i, f := range ign.Storage.Files {
		wantType(f.Path, manifest.File, "spec.config.storage.files["+strconv.Itoa(i)+"]")
	}
	for _, u := range ign.Systemd.Units {
		field := "spec.config.systemd.units[" + u.Name + "]"
		for _, d := range u.Dropins {
			p := path.Join(UnitDir, u.Name+".d", d.Name)
			if !HasContent(d.Contents) {
				if _, ok := byPath[p]; ok {
					t.Errorf("manifest has the empty drop-in %s, which the MCD does not write", p)
				}
				continue
			}
			wantType(p, manifest.File, field+".dropins["+d.Name+"]")
		}
		if HasContent(u.Contents) {
			wantType(path.Join(UnitDir, u.Name), manifest.File, field+".contents")
		}
	}
	if len(m.Units) != len(ign.Systemd.Units) {
		t.Errorf("manifest has %d units, want %d", len(m.Units), len(ign.Systemd.Units))
	}
	wantType(CurrentConfig, manifest.File, "spec")
	for _, e := range m.Entries {
		if d := path.Dir(e.Path); d != "/" && byPath[d].Type != manifest.Directory {
			t.Errorf("manifest entry %s: parent %s is not a directory entry", e.Path, d)
		}
	}
}

// TestFixturesDeterministic renders every fixture twice against an
// RHCOS-like root (created afresh each time) and writes both trees: the
// manifests and the trees must be identical.
func TestFixturesDeterministic(t *testing.T) {
	for _, p := range fixtures(t) {
		name := strings.TrimSuffix(filepath.Base(p), ".json")
		t.Run(name, func(t *testing.T) {
			var manifests [][]byte
			var trees []map[string]node
			for range 2 {
				mcs := loadFixture(t, p)
				res, m, b := renderManifest(t, mcs, makeRoot(t, rhcosSpec()))
				out := filepath.Join(t.TempDir(), "out")
				if err := WriteTree(context.Background(), out, res, m, WriteOptions{Chown: os.Geteuid() == 0}); err != nil {
					t.Fatalf("WriteTree() = %v", err)
				}
				written, err := os.ReadFile(filepath.Join(out, "manifest.json"))
				if err != nil || !bytes.Equal(written, b) {
					t.Errorf("WriteTree() manifest.json differs from manifest.Marshal() (%v)", err)
				}
				manifests = append(manifests, b)
				trees = append(trees, listTree(t, filepath.Join(out, "rootfs")))
			}
			if !bytes.Equal(manifests[0], manifests[1]) {
				t.Errorf("two renders of %s gave different manifests:\n%s", name, cmp.Diff(string(manifests[0]), string(manifests[1])))
			}
			if diff := cmp.Diff(trees[0], trees[1]); diff != "" {
				t.Errorf("two renders of %s wrote different trees (-first +second):\n%s", name, diff)
			}
			m, err := manifest.Unmarshal(manifests[0])
			if err != nil {
				t.Fatal(err)
			}
			var usrlocal []string
			for _, e := range m.Entries {
				if strings.HasPrefix(e.Path, "/usr/local/") && !strings.HasPrefix(e.ResolvedPath, "/var/usrlocal/") {
					usrlocal = append(usrlocal, e.Path+" -> "+e.ResolvedPath)
				}
			}
			sort.Strings(usrlocal)
			if usrlocal != nil {
				t.Errorf("entries under /usr/local not resolved to /var/usrlocal: %q", usrlocal)
			}
		})
	}
}
