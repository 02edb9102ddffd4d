package atomicdir

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestBuild: Build makes a directory 0755 from nothing, replaces an
// earlier output, keeps it when fill fails, refuses a directory holding
// other names without calling fill, and leaves no temporary sibling.
func TestBuild(t *testing.T) {
	parent := t.TempDir()
	dir := filepath.Join(parent, "out")
	write := func(content string) func(string) error {
		return func(tmp string) error { return os.WriteFile(filepath.Join(tmp, "a"), []byte(content), 0o644) }
	}
	read := func() string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "a"))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	if err := Build(dir, "test output", []string{"a"}, write("one")); err != nil {
		t.Fatalf("Build into nothing: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || fi.Mode().Perm() != 0o755 {
		t.Errorf("the built directory: %v, %v; want mode 0755", fi, err)
	}
	if err := Build(dir, "test output", []string{"a"}, write("two")); err != nil || read() != "two" {
		t.Errorf("Build over an earlier output = %v, content %q; want two", err, read())
	}

	boom := errors.New("boom")
	err := Build(dir, "test output", []string{"a"}, func(tmp string) error {
		if err := write("three")(tmp); err != nil {
			return err
		}
		return boom
	})
	if !errors.Is(err, boom) || read() != "two" {
		t.Errorf("Build with a failing fill = %v, content %q; want boom and the earlier output kept", err, read())
	}

	if err := os.WriteFile(filepath.Join(dir, "b"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	called := false
	err = Build(dir, "test output", []string{"a"}, func(string) error { called = true; return nil })
	if err == nil || called || !strings.Contains(err.Error(), "not an earlier test output") {
		t.Errorf("Build over a directory with other names = %v (fill called: %v); want it refused before fill", err, called)
	}

	if ents, err := os.ReadDir(parent); err != nil || len(ents) != 1 || ents[0].Name() != "out" {
		t.Errorf("the parent holds %v (%v), want only out", ents, err)
	}
}
