package systemctl

import (
	"strings"
	"testing"
)

// FuzzPresets parses arbitrary preset files (a base's, so outside data):
// never a panic, every enable rule has a pattern, and only a template's
// rule lists instances.
func FuzzPresets(f *testing.F) {
	f.Add([]byte("# c\nenable a.service\ndisable *\n"))
	f.Add([]byte("enable foo@.service a b\nignore x.service\n; comment\n"))
	f.Add([]byte("enable \"a b\\\" c\\\n\r\x00disable\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, r := range parsePresets(data) {
			if r.enable && r.pattern == "" {
				t.Fatalf("parsePresets(%q) gave an enable rule without a pattern", data)
			}
			if len(r.instances) > 0 && !nameValid(r.pattern, nameTemplate) {
				t.Fatalf("parsePresets(%q) gave instances to %q, not a template", data, r.pattern)
			}
		}
	})
}

// FuzzInstall parses arbitrary unit files' [Install] sections: never a
// panic, Also= names non-empty, valid unit names with their install info
// queued. (WantedBy=, RequiredBy= and Alias= keep an empty quoted word,
// as config_parse_strv does; enabling refuses it as an invalid name.)
func FuzzInstall(f *testing.F) {
	f.Add("a.service", []byte("[Unit]\nDescription=x\n[Install]\nWantedBy=multi-user.target\nAlso=b.service\n"))
	f.Add("t@.service", []byte("[Install]\nAlias=a.service b.service\nDefaultInstance=x\nRequiredBy=c.target\n"))
	f.Add("t@x.service", []byte("\ufeff[Install]\nWantedBy=%i.target \\\n  \"q r\".target\nAlso=%n\n"))
	f.Fuzz(func(t *testing.T, name string, data []byte) {
		s := New(NewFS(emptyBase{}))
		ctx := newContext()
		i := &info{name: name, origin: name}
		if r := (&installParser{s: s, ctx: ctx, info: i}).parse(data); r < 0 {
			return
		}
		for _, n := range i.also {
			if n == "" {
				t.Fatalf("parse(%q, %q) gave an empty Also= name", name, data)
			}
		}
		for _, n := range i.also {
			if ctx.find(n) == nil {
				t.Fatalf("parse(%q, %q): Also=%q not queued", name, data, n)
			}
		}
		if strings.ContainsRune(i.defaultInstance, '/') {
			t.Fatalf("parse(%q, %q): DefaultInstance %q has a slash", name, data, i.defaultInstance)
		}
	})
}
