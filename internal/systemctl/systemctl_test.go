package systemctl

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestNameValid(t *testing.T) {
	tests := []struct {
		name  string
		class int
	}{
		{"foo.service", namePlain},
		{"foo@bar.service", nameInstance},
		{"foo@.service", nameTemplate},
		{"foo@bar@baz.timer", nameInstance},
		{`dev-disk-by\x2dlabel-x.swap`, namePlain},
		{"foo.snapshot", 0},
		{"@foo.service", 0},
		{".service", 0},
		{"foo", 0},
		{"fo%o.service", 0},
		{strings.Repeat("a", 248) + ".service", 0},
	}
	for _, tt := range tests {
		if got := classify(tt.name); got != tt.class {
			t.Errorf("classify(%q) = %d, want %d", tt.name, got, tt.class)
		}
	}
}

func TestValidateAlias(t *testing.T) {
	tests := []struct {
		alias, target string
		want          int
	}{
		{"a.service", "b.service", 0},
		{"a.service", "a.service", -eLOOP},
		{"a.socket", "b.service", -eXDEV},
		{"a@x.service", "b@x.service", 0},
		{"a@x.service", "b@y.service", -eXDEV},
		{"a@x.service", "b@.service", 0},
		{"a@.service", "b.service", -eXDEV},
		{"a.mount", "b.mount", -eINVAL},
	}
	for _, tt := range tests {
		if got := validateAlias(tt.alias, tt.target); got != tt.want {
			t.Errorf("validateAlias(%q, %q) = %d, want %d", tt.alias, tt.target, got, tt.want)
		}
	}
}

func TestFnmatch(t *testing.T) {
	tests := []struct {
		pattern, name string
		want          bool
	}{
		{"*", "a.service", true},
		{"a*.service", "abc.service", true},
		{"a*.service", "abc.socket", false},
		{"?.service", "a.service", true},
		{"?.service", "ab.service", false},
		{"[a-c].service", "b.service", true},
		{"[!a-c].service", "b.service", false},
		{"[^a-c].service", "d.service", true},
		{"[[:digit:]]x", "1x", true},
		{"[]]", "]", true},
		{"[a", "[a", true},
		{`a\*`, `a\b`, true}, // FNM_NOESCAPE: a backslash is a backslash
		{"t@*", "t@x.service", true},
		{"more words.service", "more.service", false},
		{strings.Repeat("*a", 30) + "b", strings.Repeat("a", 60), false},
	}
	for _, tt := range tests {
		if got := fnmatch(tt.pattern, tt.name); got != tt.want {
			t.Errorf("fnmatch(%q, %q) = %v, want %v", tt.pattern, tt.name, got, tt.want)
		}
	}
}

func TestExtractWord(t *testing.T) {
	tests := []struct {
		in                    string
		unquote, retainEscape bool
		words                 []string
		r                     int
	}{
		{`a b  c`, true, true, []string{"a", "b", "c"}, 0},
		{`"a b" 'c'`, true, true, []string{"a b", "c"}, 0},
		{`"a b`, true, true, nil, -eINVAL},
		{`a\ b`, false, false, []string{"a b"}, 0},
		{`a\ b`, true, true, []string{`a\`, "b"}, 0},
		{`a\`, false, false, nil, -eINVAL},
		{`""`, true, true, []string{""}, 0},
	}
	for _, tt := range tests {
		var words []string
		r := 0
		for rest, more := tt.in, true; more; {
			var w string
			var found bool
			w, found, rest, more, r = extractWord(rest, tt.unquote, tt.retainEscape)
			if r < 0 || !found {
				break
			}
			words = append(words, w)
		}
		if r != tt.r || r == 0 && !cmp.Equal(words, tt.words) {
			t.Errorf("extractWord(%q) = %q, %d, want %q, %d", tt.in, words, r, tt.words, tt.r)
		}
	}
}

func TestParsePresets(t *testing.T) {
	got := parsePresets([]byte("# c\n; c\n\nenable a.service\r\ndisable b*  c\nenable t@.service x  y\nenable a.service x\nignore z.service\nenablefoo\n"))
	want := []presetRule{{pattern: "a.service", enable: true}, {pattern: "b*  c"}, {pattern: "t@.service", enable: true, instances: []string{"x", "y"}}}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(presetRule{})); diff != "" {
		t.Errorf("parsePresets() mismatch (-want +got):\n%s", diff)
	}
}

func TestPrintf(t *testing.T) {
	s := New(NewFS(emptyBase{}))
	i := &info{name: "foo-bar@baz.service"}
	tests := []struct {
		in, want string
		r        int
	}{
		{"%i %p %j %n %N %%", "baz foo-bar bar foo-bar@baz.service foo-bar@baz %", 0},
		{"%u:%U:%g:%G", "root:0:root:0", 0},
		{"x%", "x%", 0},
		{"%-", "%-", 0},
		{"%I", "", -eBADSLT},
		{"%H", "", -eNODE},
	}
	for _, tt := range tests {
		got, r := s.printf(i, tt.in)
		if got != tt.want || r != tt.r {
			t.Errorf("printf(%q) = %q, %d, want %q, %d", tt.in, got, r, tt.want, tt.r)
		}
	}
	tmpl := &info{name: "t@.service", defaultInstance: "d"}
	if got, _ := s.printf(tmpl, "%i %n %N"); got != "d t@d.service t@d" {
		t.Errorf("printf on a template with a default instance = %q", got)
	}
}

// mapBase is a Base from a map: a value "-> T" is a symlink, "/" a
// directory, anything else a file.
type mapBase map[string]string

func (m mapBase) Lstat(p string) (Node, bool, error) {
	if p == "/" {
		return Node{Kind: Dir}, true, nil
	}
	v, ok := m[p]
	switch {
	case !ok:
		for k := range m {
			if strings.HasPrefix(k, p+"/") {
				return Node{Kind: Dir}, true, nil
			}
		}
		return Node{}, false, nil
	case v == "/":
		return Node{Kind: Dir}, true, nil
	case strings.HasPrefix(v, "-> "):
		return Node{Kind: Symlink, Target: v[3:]}, true, nil
	}
	return Node{Kind: File, Size: int64(len(v))}, true, nil
}

func (m mapBase) ReadFile(p string) ([]byte, error) { return []byte(m[p]), nil }

func (m mapBase) ReadDir(p string) ([]string, error) {
	seen := map[string]bool{}
	for k := range m {
		if rest, ok := strings.CutPrefix(k, strings.TrimSuffix(p, "/")+"/"); ok {
			seen[strings.SplitN(rest, "/", 2)[0]] = true
		}
	}
	var out []string
	for n := range seen {
		out = append(out, n)
	}
	return out, nil
}

// TestFS: paths resolve as the kernel resolves them chrooted, changes
// hide the base, and Changes reports the final state with the tag.
func TestFS(t *testing.T) {
	f := NewFS(mapBase{
		"/lib":                        "-> usr/lib",
		"/usr/lib/x/a.service":        "A",
		"/etc/l":                      "-> ../../../lib/x/a.service",
		"/etc/d/old":                  "o",
		"/etc/loop":                   "-> /etc/loop",
		"/etc/systemd/system/m.wants": "/",
	})
	if b, e := f.ReadFile("/etc/l", false); e != 0 || string(b) != "A" {
		t.Errorf("ReadFile through a relative symlink = %q, %d", b, e)
	}
	if _, e := f.ReadFile("/etc/l", true); e != -eLOOP {
		t.Errorf("ReadFile(nofollow) of a symlink = %d, want -ELOOP", e)
	}
	if _, e := f.Stat("/etc/loop"); e != -eLOOP {
		t.Errorf("Stat of a loop = %d, want -ELOOP", e)
	}
	f.SetTag("t1")
	if e := f.RemoveAll("/etc/d"); e != 0 {
		t.Fatal(e)
	}
	if e := f.Mkdir("/etc/d"); e != 0 {
		t.Fatal(e)
	}
	if ents, _ := f.ReadDir("/etc/d"); len(ents) != 0 {
		t.Errorf("a directory made again lists %v, want nothing of the base's", ents)
	}
	if e := f.Symlink("/lib/x/a.service", "/etc/systemd/system/m.wants/a.service"); e != 0 {
		t.Fatal(e)
	}
	if e := f.Symlink("x", "/etc/systemd/system/m.wants/a.service"); e != -eEXIST {
		t.Errorf("Symlink over a symlink = %d, want -EEXIST", e)
	}
	f.SetTag(nil)
	got := map[string]Change{}
	for _, c := range f.Changes() {
		c.Content = nil
		got[c.Path] = c
	}
	want := map[string]Change{
		"/etc/d":                                {Path: "/etc/d", Node: Node{Kind: Dir}, InBase: true, BaseDir: true, Tag: "t1"},
		"/etc/systemd/system/m.wants/a.service": {Path: "/etc/systemd/system/m.wants/a.service", Node: Node{Kind: Symlink, Target: "/lib/x/a.service"}, Tag: "t1"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Changes() mismatch (-want +got):\n%s", diff)
	}
}

// TestPathSimplify: systemd's own examples of path_simplify (its comment
// and test-path-util.c).
func TestPathSimplify(t *testing.T) {
	for in, want := range map[string]string{
		"":                                      "",
		".":                                     ".",
		"./":                                    ".",
		"/":                                     "/",
		"///":                                   "/",
		"///.":                                  "/",
		"////.//":                               "/",
		"///foo//./bar/.":                       "/foo/bar",
		".//./foo//./bar/.":                     "foo/bar",
		"aaa/bbb////ccc":                        "aaa/bbb/ccc",
		"//aaa/.////ccc":                        "/aaa/ccc",
		"//./.../././..../././..//":             "/.../..../..",
		".//./a/":                               "a",
		"./a/..":                                "a/..",
		"a/../b.target":                         "a/../b.target",
		".hidden/x":                             ".hidden/x",
		"/etc/systemd/system/a.wants/b.service": "/etc/systemd/system/a.wants/b.service",
	} {
		if got := pathSimplify(in); got != want {
			t.Errorf("pathSimplify(%q) = %q, want %q", in, got, want)
		}
	}
	long := strings.Repeat("n", 256)
	if got, want := pathSimplify("/a//"+long+"//b/./c"), "/a/"+long+"//b/./c"; got != want {
		t.Errorf("pathSimplify(a component past NAME_MAX) = %q, want %q", got, want)
	}
}
