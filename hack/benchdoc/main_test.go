package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReplace(t *testing.T) {
	doc := "# Benchmarks\n\nintro\n\n" + Begin + "\nold figures\n" + End + "\n\nwhat they mean\n"
	got, err := Replace([]byte(doc), "make bench at abc123", []byte("cold build 2.0s\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	want := "# Benchmarks\n\nintro\n\n" + Begin + "\n\nmake bench at abc123\n\n```\ncold build 2.0s\n```\n\n" + End + "\n\nwhat they mean\n"
	if string(got) != want {
		t.Errorf("Replace =\n%s\nwant\n%s", got, want)
	}
	again, err := Replace(got, "make bench at abc123", []byte("cold build 2.0s\n"))
	if err != nil || string(again) != want {
		t.Errorf("Replace of its own output = %v\n%s\nwant the same document", err, again)
	}
	for name, bad := range map[string]string{
		"no markers":  "# Benchmarks\n",
		"no end":      Begin + "\n",
		"reversed":    End + "\n" + Begin + "\n",
		"twice begin": Begin + Begin + End,
	} {
		if _, err := Replace([]byte(bad), "h", []byte("r")); err == nil {
			t.Errorf("%s: Replace accepted %q", name, bad)
		}
	}
}

// TestRun: the document is rewritten in place; an empty report or a
// document without markers leaves it as it was.
func TestRun(t *testing.T) {
	dir := t.TempDir()
	doc, report := filepath.Join(dir, "benchmarks.md"), filepath.Join(dir, "report.txt")
	orig := "x\n" + Begin + "\n" + End + "\n"
	os.WriteFile(doc, []byte(orig), 0o644)
	os.WriteFile(report, nil, 0o644)
	if err := run(doc, report, "h"); err == nil {
		t.Error("run with an empty report succeeded")
	}
	if b, _ := os.ReadFile(doc); string(b) != orig {
		t.Errorf("a failed run changed the document: %q", b)
	}
	os.WriteFile(report, []byte("figures\n"), 0o644)
	if err := run(doc, report, "h"); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(doc); !strings.Contains(string(b), "```\nfigures\n```") {
		t.Errorf("document after run: %q", b)
	}
	// The repository's own document has the section.
	if b, err := os.ReadFile("../../docs/benchmarks.md"); err != nil || !strings.Contains(string(b), Begin) || !strings.Contains(string(b), End) {
		t.Errorf("docs/benchmarks.md has no make bench section (%v)", err)
	}
}
