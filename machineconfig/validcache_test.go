package machineconfig

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// TestValidCache checks the cache of Ignition configs that parsed
// cleanly: only those are remembered (not a config Ignition warns about,
// one it translates from an older spec, or one it refuses), and loading
// one again from the cache gives the MachineConfigs a load without the
// cache gives.
func TestValidCache(t *testing.T) {
	withIgnitionModule(t)
	file := `{"path":"/etc/a","mode":420,"contents":{"source":"data:,a"}}`
	tests := []struct {
		name     string
		config   string
		stored   bool
		parseErr bool
	}{
		{"clean 3.5", ign("3.5.0", `"storage":{"files":[`+file+`]}`), true, false},
		{"a warning", ign("3.5.0", `"storage":{"files":[`+file+`],"filez":[]}`), false, false},
		{"spec 3.4", ign("3.4.0", `"storage":{"files":[`+file+`]}`), false, false},
		{"refused", ign("3.5.0", `"storage":{"files":[{"path":"etc/a"}]}`), false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			in := filepath.Join(dir, "mc.json")
			if err := os.WriteFile(in, []byte(mcJSON("00-a", tt.config)), 0o644); err != nil {
				t.Fatal(err)
			}
			want, wantErr := LoadWith([]string{in}, nil, LoadOptions{})
			cache := filepath.Join(dir, "cache")
			for run := 1; run <= 2; run++ {
				got, err := LoadWith([]string{in}, nil, LoadOptions{CacheDir: cache})
				if (err != nil) != tt.parseErr || (wantErr != nil) != tt.parseErr {
					t.Fatalf("run %d: LoadWith() error = %v (uncached %v), want error %v", run, err, wantErr, tt.parseErr)
				}
				if diff := cmp.Diff(want, got, cmpopts.IgnoreUnexported(MachineConfig{})); diff != "" {
					t.Errorf("run %d: cached load differs (-uncached +cached):\n%s", run, diff)
				}
				entries, _ := os.ReadDir(filepath.Join(cache, "ignition", "sha256"))
				if stored := len(entries) == 1; stored != tt.stored || len(entries) > 1 {
					t.Errorf("run %d: %d cache entries, want stored = %v", run, len(entries), tt.stored)
				}
			}
		})
	}
}

// TestValidCacheKeyedByContent checks that a remembered config is found by
// its bytes only, and that a cache directory that cannot be written only
// costs time.
func TestValidCacheKeyedByContent(t *testing.T) {
	withIgnitionModule(t)
	c := newValidCache(t.TempDir())
	a := []byte(ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}}]}`))
	if _, ok := c.lookup(a); ok {
		t.Fatal("lookup() found a config never stored")
	}
	c.store(a)
	if cfg, ok := c.lookup(a); !ok || len(cfg.Storage.Files) != 1 || cfg.Storage.Files[0].Path != "/etc/a" {
		t.Fatalf("lookup() after store = %+v, %v", cfg.Storage, ok)
	}
	b := append([]byte(nil), a...)
	b[len(b)-3] = 'b' // data:,b
	if _, ok := c.lookup(b); ok {
		t.Error("lookup() found a config that differs by one byte")
	}

	blocked := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(blocked, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	in := filepath.Join(t.TempDir(), "mc.json")
	if err := os.WriteFile(in, []byte(mcJSON("00-a", string(a))), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadWith([]string{in}, nil, LoadOptions{CacheDir: blocked}); err != nil {
		t.Errorf("LoadWith() with a cache directory that is a file: %v", err)
	}
}

// withIgnitionModule gives the test an Ignition module version to key the
// cache on: test binaries record no dependencies.
func withIgnitionModule(t *testing.T) {
	t.Helper()
	saved := ignitionModule
	ignitionModule = func() string { return "v2.0.0-test h1:test" }
	t.Cleanup(func() { ignitionModule = saved })
}
