package node

import (
	"testing"

	"github.com/mcbake/mcbake/manifest"
)

// TestLabelerLookup follows libselinux's selabel_lookup: the last
// matching specification wins, specifications without regular expression
// characters are tried before any other, file types must match,
// <<none>> labels nothing, and substitutions apply first.
func TestLabelerLookup(t *testing.T) {
	l := &Labeler{}
	if err := l.addSpecs("file_contexts", []byte(`# comment
/etc(/.*)?	system_u:object_r:etc_t:s0
/etc/exact	system_u:object_r:exact_t:s0
/etc/e.act	system_u:object_r:regex_t:s0
/etc/kubernetes(/.*)?	system_u:object_r:kubernetes_file_t:s0
/etc/kubernetes/manifests(/.*)?	-d	system_u:object_r:manifests_dir_t:s0
/etc/nolabel	<<none>>
/srv/www(/.*)?	system_u:object_r:httpd_t:s0
`)); err != nil {
		t.Fatal(err)
	}
	if err := l.addSpecs("file_contexts.local", []byte("/etc/kubernetes/kubelet\\.conf	system_u:object_r:kubelet_conf_t:s0\n")); err != nil {
		t.Fatal(err)
	}
	l.addSubs([]byte("/var/srv /srv\n"))
	l.sortSpecs()
	tests := []struct {
		p    string
		t    manifest.Type
		want string
	}{
		{"/etc/hostname", manifest.File, "system_u:object_r:etc_t:s0"},
		{"/etc/exact", manifest.File, "system_u:object_r:exact_t:s0"}, // exact beats the later regex
		{"/etc/eXact", manifest.File, "system_u:object_r:regex_t:s0"},
		{"/etc/kubernetes/kubelet.conf", manifest.File, "system_u:object_r:kubelet_conf_t:s0"},
		{"/etc/kubernetes/manifests", manifest.Directory, "system_u:object_r:manifests_dir_t:s0"},
		{"/etc/kubernetes/manifests/x.yaml", manifest.File, "system_u:object_r:kubernetes_file_t:s0"},
		{"/etc/nolabel", manifest.File, ""},
		{"/var/srv/www/index.html", manifest.File, "system_u:object_r:httpd_t:s0"},
		{"/usr/bin/true", manifest.File, ""},
	}
	for _, tt := range tests {
		if got := l.Lookup(tt.p, tt.t); got != tt.want {
			t.Errorf("Lookup(%s, %s) = %q, want %q", tt.p, tt.t, got, tt.want)
		}
	}
	var none *Labeler
	if got := none.Lookup("/etc/x", manifest.File); got != "" {
		t.Errorf("nil Labeler Lookup = %q, want none", got)
	}
	if err := l.addSpecs("bad", []byte("/etc/x -q ctx\n")); err == nil {
		t.Error("addSpecs accepted an unknown file type")
	}
}

func TestParseGVariantString(t *testing.T) {
	tests := []struct{ in, want string }{
		{`'{"a":"b"}'`, `{"a":"b"}`},
		{`"it's"`, `it's`},
		{`'it\'s \\ \"q\" \n\u00e9'`, "it's \\ \"q\" \n\u00e9"},
	}
	for _, tt := range tests {
		got, err := parseGVariantString(tt.in)
		if err != nil || got != tt.want {
			t.Errorf("parseGVariantString(%s) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "x", `'unterminated`, `'\u12'`} {
		if _, err := parseGVariantString(bad); err == nil {
			t.Errorf("parseGVariantString(%q) = nil error", bad)
		}
	}
}
