package node

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/mcbake/mcbake/manifest"
)

// FuzzLabeler parses arbitrary file_contexts and looks paths up: never a
// panic, and a label is a context of the file, never "<<none>>".
func FuzzLabeler(f *testing.F) {
	f.Add([]byte("/etc(/.*)?\tsystem_u:object_r:etc_t:s0\n/etc/x\t--\tsystem_u:object_r:x_t:s0\n/etc/n <<none>>\n"), "/etc/x")
	f.Add([]byte("/a[\tctx\n"), "/a")
	f.Fuzz(func(t *testing.T, fc []byte, p string) {
		l := &Labeler{}
		if err := l.addSpecs("fc", fc); err != nil {
			return
		}
		l.addSubs(fc)
		l.sortSpecs()
		for _, typ := range []manifest.Type{manifest.File, manifest.Directory, manifest.Symlink} {
			got := l.Lookup(p, typ)
			if got == "<<none>>" || strings.ContainsAny(got, " \t\n") || (got != "" && !strings.Contains(string(fc), got)) {
				t.Fatalf("Lookup(%q) = %q from %q", p, got, fc)
			}
		}
	})
}

// FuzzParseGVariantString decodes arbitrary GVariant text strings: never
// a panic, and a result is valid UTF-8.
func FuzzParseGVariantString(f *testing.F) {
	f.Add(`'{"a":"\u00e9"}'`)
	f.Add(`"\'\\\""`)
	f.Fuzz(func(t *testing.T, s string) {
		got, err := parseGVariantString(s)
		if err == nil && !utf8.ValidString(got) {
			t.Fatalf("parseGVariantString(%q) = %q, not UTF-8", s, got)
		}
	})
}

// FuzzParseBootEntry reads arbitrary bootloader entries: never a panic,
// and the ostree= argument is one of the options.
func FuzzParseBootEntry(f *testing.F) {
	f.Add([]byte("title Debian\nversion 2\nlinux /ostree/x/vmlinuz\noptions root=/dev/vda rw ostree=/ostree/boot.1/os/abc/0\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e := parseBootEntry(b)
		if e.ostree != "" && !strings.Contains(e.options, "ostree="+e.ostree) {
			t.Fatalf("parseBootEntry(%q): ostree %q is not in options %q", b, e.ostree, e.options)
		}
	})
}
