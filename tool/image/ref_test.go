package image

import (
	"errors"
	"strings"
	"testing"
)

func TestParseReference(t *testing.T) {
	srv := t.TempDir() // stands for /srv: containers/image resolves parents of paths
	tests := []struct {
		in        string
		transport string // "" = error expected
		errText   string // exact error, when set
		missing   bool   // error wraps ErrMissingTransport
	}{
		{in: "oci:/srv/layout:tag", transport: "oci"},
		{in: "oci:/srv/layout", transport: "oci"},
		{in: "oci-archive:/srv/a.tar:tag", transport: "oci-archive"},
		{in: "docker-archive:/srv/a.tar", transport: "docker-archive"},
		{in: "docker-archive:/srv/a.tar:example.com/x:1", transport: "docker-archive"},
		{in: "dir:/srv/dir", transport: "dir"},
		{in: "containers-storage:localhost/x:1", transport: "containers-storage"},
		{in: "docker://quay.io/x:1", transport: "docker"},
		{
			in:      "quay.io/x:1",
			errText: `"quay.io/x:1": missing transport (use one of oci:, oci-archive:, docker-archive:, dir:, containers-storage:, docker://)`,
			missing: true,
		},
		{in: "localhost:5000/x", missing: true},
		{in: "fedora", missing: true},
		{in: "", missing: true},
		{in: "docker:quay.io/x"},
		{in: "docker://Not_Valid"},
		{in: "docker-daemon:x:1", errText: `"docker-daemon:x:1": transport "docker-daemon" is not supported (use one of oci:, oci-archive:, docker-archive:, dir:, containers-storage:, docker://)`},
		{in: "oci:"},
		{in: "oci::tag"},
		{in: "dir:"},
		{in: "containers-storage:"},
		{in: "containers-storage:[vfs@/r+/rr]x:1"},
		{in: "oci:/srv/layout:Bad Tag"},
	}
	for _, tt := range tests {
		tt.in = strings.ReplaceAll(tt.in, "/srv", srv)
		got, err := ParseReference(tt.in)
		if tt.transport != "" {
			if err != nil {
				t.Errorf("ParseReference(%q) = %v, want transport %q", tt.in, err, tt.transport)
				continue
			}
			if got.Transport() != tt.transport || got.String() != tt.in {
				t.Errorf("ParseReference(%q) = %s/%q, want %s/%q", tt.in, got.Transport(), got.String(), tt.transport, tt.in)
			}
			continue
		}
		if err == nil {
			t.Errorf("ParseReference(%q) = %v, want an error", tt.in, got)
			continue
		}
		if tt.errText != "" && err.Error() != tt.errText {
			t.Errorf("ParseReference(%q) error = %q, want %q", tt.in, err, tt.errText)
		}
		if errors.Is(err, ErrMissingTransport) != tt.missing {
			t.Errorf("ParseReference(%q) error %q: errors.Is(ErrMissingTransport) = %v, want %v", tt.in, err, !tt.missing, tt.missing)
		}
	}
}

func TestRefPathAndSuffix(t *testing.T) {
	d := t.TempDir() // containers/image resolves paths: their parents must exist
	tests := []struct{ in, path, suffix string }{
		{"oci:" + d + "/b:tag", d + "/b", ":tag"},
		{"oci:" + d + "/b", d + "/b", ""},
		{"oci-archive:" + d + "/a.tar:t", d + "/a.tar", ":t"},
		{"docker-archive:" + d + "/a.tar:example.com/x:1", d + "/a.tar", ":example.com/x:1"},
		{"dir:" + d + "/a:b", d + "/a:b", ""},
		{"docker://quay.io/x", "", "//quay.io/x"},
	}
	for _, tt := range tests {
		r, err := ParseReference(tt.in)
		if err != nil {
			t.Fatalf("ParseReference(%q): %v", tt.in, err)
		}
		if r.path() != tt.path || r.suffix() != tt.suffix {
			t.Errorf("ParseReference(%q) path, suffix = %q, %q, want %q, %q", tt.in, r.path(), r.suffix(), tt.path, tt.suffix)
		}
	}
}
