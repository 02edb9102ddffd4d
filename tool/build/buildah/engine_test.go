package buildah

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/signature"

	"github.com/mcbake/mcbake/tool/image"
)

func TestHasRun(t *testing.T) {
	tests := []struct {
		name, containerfile string
		want                bool
	}{
		{"no run", "FROM a\nCOPY rootfs/ /\nLABEL a=b\n", false},
		{"run", "FROM a\nRUN [\"rm\", \"-f\", \"/x\"]\n", true},
		{"lower case", "FROM a\nrun true\n", true},
		{"later stage", "FROM a AS build\nCOPY x /x\nFROM b\nRUN true\n", true},
		{"continued", "FROM a\nLABEL a=b \\\n  c=d\nRUN \\\n  true\n", true},
		{"onbuild", "FROM a\nONBUILD RUN true\n", false},
		{"comment", "FROM a\n# RUN true\n", false},
		{"heredoc text", "FROM a\nCOPY <<EOF /x\nRUN true\nEOF\n", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := filepath.Join(t.TempDir(), "Containerfile")
			if err := os.WriteFile(f, []byte(tt.containerfile), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := hasRun(f)
			if err != nil || got != tt.want {
				t.Errorf("hasRun(%q) = %v, %v, want %v", tt.containerfile, got, err, tt.want)
			}
		})
	}
}

// TestBuildNoRuntime checks that a RUN without crun or runc in PATH fails
// before anything else (no store is opened).
func TestBuildNoRuntime(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "Containerfile"), []byte("FROM scratch\nRUN true\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("PATH", t.TempDir())
	root := filepath.Join(dir, "store")
	_, err := Build(context.Background(), dir, Options{Output: "oci:" + filepath.Join(dir, "out"), Store: image.Store{Root: root}})
	if !errors.Is(err, ErrNoRuntime) || err.Error() != "RUN needs an OCI runtime: install crun or runc" {
		t.Errorf("Build() = %v, want %v", err, ErrNoRuntime)
	}
	if _, err := os.Stat(root); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Build opened a store before checking for a runtime (%v)", err)
	}
}

func TestPolicyFile(t *testing.T) {
	p, cleanup, err := image.Options{InsecurePolicy: true}.PolicyFile()
	if err != nil {
		t.Fatal(err)
	}
	pol, err := signature.NewPolicyFromFile(p)
	if err != nil {
		t.Fatalf("the insecure policy file does not parse: %v", err)
	}
	if len(pol.Default) != 1 || !strings.Contains(string(mustRead(t, p)), "insecureAcceptAnything") {
		t.Errorf("insecure policy = %s", mustRead(t, p))
	}
	if err := cleanup(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("cleanup left %s", p)
	}
	if p, _, err := (image.Options{SignaturePolicy: "/etc/x.json"}).PolicyFile(); p != "/etc/x.json" || err != nil {
		t.Errorf("PolicyFile(SignaturePolicy) = %q, %v", p, err)
	}
	if _, _, err := (image.Options{SignaturePolicy: "/etc/x.json", InsecurePolicy: true}).PolicyFile(); err == nil {
		t.Errorf("PolicyFile(both) = nil error")
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestOptionsErrors(t *testing.T) {
	if _, err := image.CompressionOf("xz"); err == nil {
		t.Errorf(`image.CompressionOf("xz") = nil error`)
	}
	if got := annotations(map[string]string{"b": "2", "a": "1"}); !cmp.Equal(got, []string{"a=1", "b=2"}) {
		t.Errorf("annotations = %v", got)
	}
}

func TestBuildLogTail(t *testing.T) {
	l := logFor(nil)
	for i := 0; i < 3000; i++ {
		if _, err := l.Write([]byte("line of output\n")); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := l.Write([]byte("STEP 9/10: RUN false\nerror: exit status 1\n")); err != nil {
		t.Fatal(err)
	}
	err := l.wrap(errors.New("buildah: failed"))
	msg := err.Error()
	if !strings.HasPrefix(msg, "buildah: failed\nbuildah output (end):\n") || !strings.HasSuffix(msg, "STEP 9/10: RUN false\nerror: exit status 1") {
		t.Errorf("wrapped error = %q", msg)
	}
	if len(msg) > logTail+100 {
		t.Errorf("wrapped error is %d bytes, want at most about %d", len(msg), logTail)
	}
	if !strings.Contains(msg, "\nline of output\n") || strings.Contains(msg, "\nne of output") {
		t.Errorf("the kept output does not start at a line: %q", msg[:80])
	}
}

func TestCheckBase(t *testing.T) {
	a, b, c := digest.FromString("a"), digest.FromString("b"), digest.FromString("c")
	tests := []struct {
		name      string
		got, want []digest.Digest
		ok        bool
	}{
		{"not asked", []digest.Digest{a}, nil, true},
		{"base and one layer", []digest.Digest{a, b, c}, []digest.Digest{a, b}, true},
		{"another base", []digest.Digest{a, c, b}, []digest.Digest{a, b}, false},
		{"fewer layers", []digest.Digest{a}, []digest.Digest{a, b}, false},
	}
	for _, tt := range tests {
		err := checkBase(tt.got, tt.want)
		if (err == nil) != tt.ok || (err != nil && !errors.Is(err, ErrBaseChanged)) {
			t.Errorf("%s: checkBase() = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}
