package fspath

import (
	"slices"
	"testing"
)

func TestComponents(t *testing.T) {
	for _, tt := range []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"/", nil},
		{"/etc/passwd", []string{"etc", "passwd"}},
		{"etc//./ssh/", []string{"etc", "ssh"}},
		{"../usr/./lib/../bin", []string{"..", "usr", "lib", "..", "bin"}},
	} {
		if got := Components(tt.in); !slices.Equal(got, tt.want) {
			t.Errorf("Components(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
