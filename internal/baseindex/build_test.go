package baseindex_test

import (
	"archive/tar"
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/baseindex"
)

// buildCase is a base and what Build makes of it.
type buildCase struct {
	name    string
	layers  [][]ent
	want    []string
	wantErr string
}

// buildCases are the merge rules, for every way a layer is read (see
// TestBuild and TestSources).
var buildCases = []buildCase{
	{
		name: "types modes owners",
		layers: [][]ent{{
			dir("./").withMode(0o555),
			dir("etc/"),
			file("etc/passwd", "root:x:0:0::/root:/bin/bash\n"),
			file("usr/bin/sudo", "elf").withMode(0o4111),
			dir("tmp/").withMode(0o1777),
			file("home/core/.bashrc", "x").withMode(0o600).withOwner(1000, 1001),
			symlink("usr/local", "../var/usrlocal"),
			{name: "dev/null", flag: tar.TypeChar, mode: 0o666},
			{name: "dev/sda", flag: tar.TypeBlock, mode: 0o660, gid: 6},
			{name: "run/fifo", flag: tar.TypeFifo, mode: 0o600},
		}},
		want: []string{
			"/ dir 0555 0:0",
			"dev dir 0755 0:0 implied",
			"dev/null char 0666 0:0",
			"dev/sda block 0660 0:6",
			"etc dir 0755 0:0",
			`etc/passwd file 0644 0:0 "root:x:0:0::/root:/bin/bash\n"`,
			"home dir 0755 0:0 implied",
			"home/core dir 0755 0:0 implied",
			`home/core/.bashrc file 0600 1000:1001 "x"`,
			"run dir 0755 0:0 implied",
			"run/fifo fifo 0600 0:0",
			"tmp dir 1777 0:0",
			"usr dir 0755 0:0 implied",
			"usr/bin dir 0755 0:0 implied",
			`usr/bin/sudo file 4111 0:0 "elf"`,
			"usr/local symlink 0777 0:0 -> ../var/usrlocal",
		},
	},
	{
		name:   "names are cleaned",
		layers: [][]ent{{file("./etc/a", "a"), file("/etc/b", "b"), dir("etc//c/./"), file("etc/c/../d", "d")}},
		want: []string{
			"etc dir 0755 0:0 implied",
			`etc/a file 0644 0:0 "a"`,
			`etc/b file 0644 0:0 "b"`,
			"etc/c dir 0755 0:0",
			`etc/d file 0644 0:0 "d"`,
		},
	},
	{
		name:    "name escaping the root",
		layers:  [][]ent{{file("../etc/evil", "x")}},
		wantErr: `escapes the root`,
	},
	{
		name: "later layer replaces a file",
		layers: [][]ent{
			{file("etc/a", "old"), file("etc/b", "b")},
			{file("etc/a", "new").withMode(0o600)},
		},
		want: []string{
			"etc dir 0755 0:0 implied",
			`etc/a file 0600 0:0 "new"`,
			`etc/b file 0644 0:0 "b"`,
		},
	},
	{
		name: "whiteout deletes a file",
		layers: [][]ent{
			{dir("a/"), file("a/x", "x"), file("a/y", "y")},
			{whiteout("a/.wh.x")},
		},
		want: []string{"a dir 0755 0:0", `a/y file 0644 0:0 "y"`},
	},
	{
		name: "whiteout deletes a subtree",
		layers: [][]ent{
			{dir("d/"), dir("d/e/"), file("d/e/f", "f"), file("g", "g")},
			{whiteout(".wh.d")},
		},
		want: []string{`g file 0644 0:0 "g"`},
	},
	{
		name: "whiteout of a missing path implies its parent",
		layers: [][]ent{
			{file("g", "g")},
			{whiteout("q/.wh.z")},
		},
		want: []string{`g file 0644 0:0 "g"`, "q dir 0755 0:0 implied"},
	},
	{
		name: "whiteout does not delete its own layer's entries",
		layers: [][]ent{
			{file("a/x", "old")},
			{file("a/x", "new"), whiteout("a/.wh.x")},
		},
		want: []string{"a dir 0755 0:0 implied", `a/x file 0644 0:0 "new"`},
	},
	{
		name: "opaque directory hides lower entries",
		layers: [][]ent{
			{dir("d/"), file("d/old", "old"), dir("d/sub/"), file("d/sub/x", "x"), file("e", "e")},
			{dir("d/").withMode(0o700), whiteout("d/.wh..wh..opq"), file("d/new", "new")},
		},
		want: []string{
			"d dir 0700 0:0",
			`d/new file 0644 0:0 "new"`,
			`e file 0644 0:0 "e"`,
		},
	},
	{
		name: "opaque marker keeps the directory and its own layer's entries",
		layers: [][]ent{
			{dir("d/").withMode(0o750), file("d/a", "a1"), file("d/b", "b1")},
			{file("d/a", "a2"), whiteout("d/.wh..wh..opq"), file("d/c", "c2")},
		},
		want: []string{
			"d dir 0750 0:0",
			`d/a file 0644 0:0 "a2"`,
			`d/c file 0644 0:0 "c2"`,
		},
	},
	{
		name: "whited-out paths come back in a later layer",
		layers: [][]ent{
			{dir("a/"), file("a/x", "x1"), file("a/y", "y"), dir("d/"), file("d/e/f", "f")},
			{whiteout("a/.wh.x"), whiteout(".wh.d")},
			{file("a/x", "x2"), file("d/g", "g")},
		},
		want: []string{
			"a dir 0755 0:0",
			`a/x file 0644 0:0 "x2"`,
			`a/y file 0644 0:0 "y"`,
			"d dir 0755 0:0 implied",
			`d/g file 0644 0:0 "g"`,
		},
	},
	{
		name: "path listed twice in a layer",
		layers: [][]ent{{
			file("a", "first"), dir("d/"), file("d/x", "x"),
			file("a", "second").withMode(0o600), file("d", "a file now"),
		}},
		want: []string{`a file 0600 0:0 "second"`, `d file 0644 0:0 "a file now"`},
	},
	{
		name: "aufs metadata is ignored",
		layers: [][]ent{
			{file("a", "a")},
			{dir(".wh..wh.plnk/"), file(".wh..wh.plnk/1.2", "")},
		},
		want: []string{`a file 0644 0:0 "a"`},
	},
	{
		name: "file replaces a directory and its subtree",
		layers: [][]ent{
			{dir("d/"), dir("d/e/"), file("d/e/f", "f")},
			{file("d", "now a file")},
		},
		want: []string{`d file 0644 0:0 "now a file"`},
	},
	{
		name: "symlink replaces a directory and its subtree",
		layers: [][]ent{
			{dir("usr/local/"), file("usr/local/bin/x", "x")},
			{symlink("usr/local", "../var/usrlocal")},
		},
		want: []string{"usr dir 0755 0:0 implied", "usr/local symlink 0777 0:0 -> ../var/usrlocal"},
	},
	{
		name: "directory replaces a directory and keeps its children",
		layers: [][]ent{
			{dir("d/"), file("d/x", "x")},
			{dir("d/").withMode(0o700).withOwner(5, 6)},
		},
		want: []string{"d dir 0700 5:6", `d/x file 0644 0:0 "x"`},
	},
	{
		name: "directory replaces a file",
		layers: [][]ent{
			{file("d", "file")},
			{dir("d/"), file("d/y", "y")},
		},
		want: []string{"d dir 0755 0:0", `d/y file 0644 0:0 "y"`},
	},
	{
		name: "entry below a lower file implies a directory in its place",
		layers: [][]ent{
			{file("d", "file")},
			{file("d/y", "y")},
		},
		want: []string{"d dir 0755 0:0 implied", `d/y file 0644 0:0 "y"`},
	},
	{
		name: "listed directory replaces an implied one",
		layers: [][]ent{
			{file("d/x", "x")},
			{dir("d/").withMode(0o711)},
		},
		want: []string{"d dir 0711 0:0", `d/x file 0644 0:0 "x"`},
	},
	{
		name: "hardlinks in the same and a lower layer",
		layers: [][]ent{
			{file("obj/1", "one").withMode(0o755), hardlink("usr/bin/a", "obj/1").withMode(0o755)},
			{hardlink("usr/bin/b", "./obj/1"), hardlink("usr/bin/c", "usr/bin/a")},
		},
		want: []string{
			"obj dir 0755 0:0 implied",
			`obj/1 file 0755 0:0 "one"`,
			"usr dir 0755 0:0 implied",
			"usr/bin dir 0755 0:0 implied",
			`usr/bin/a hardlink 0755 0:0 => obj/1 (file) "one"`,
			`usr/bin/b hardlink 0644 0:0 => obj/1 (file) "one"`,
			`usr/bin/c hardlink 0644 0:0 => usr/bin/a (file) "one"`,
		},
	},
	{
		name: "hardlink to a symlink",
		layers: [][]ent{{
			symlink("obj/2", "../var/usrlocal"),
			hardlink("usr/local", "obj/2").withMode(0o777),
		}},
		want: []string{
			"obj dir 0755 0:0 implied",
			"obj/2 symlink 0777 0:0 -> ../var/usrlocal",
			"usr dir 0755 0:0 implied",
			"usr/local hardlink 0777 0:0 => obj/2 (symlink -> ../var/usrlocal)",
		},
	},
	{
		name: "hardlink keeps the inode its layer linked",
		layers: [][]ent{
			{file("obj", "v1"), hardlink("link", "obj")},
			{file("obj", "v2")},
		},
		want: []string{`link hardlink 0644 0:0 => obj (file) "v1"`, `obj file 0644 0:0 "v2"`},
	},
	{
		name:    "hardlink to a missing target",
		layers:  [][]ent{{file("a", "a")}, {hardlink("b", "nope")}},
		wantErr: `hardlink "b": target "nope" does not exist`,
	},
	{
		name:    "hardlink to a whited-out target",
		layers:  [][]ent{{file("a", "a")}, {whiteout(".wh.a"), hardlink("b", "a")}},
		wantErr: `target "a" does not exist`,
	},
	{
		name:    "hardlink to a directory",
		layers:  [][]ent{{dir("d/"), hardlink("b", "d")}},
		wantErr: `target "d" is a directory`,
	},
	{
		name:    "whiteout of ..",
		layers:  [][]ent{{file("a/b", "b")}, {whiteout("a/.wh...")}},
		wantErr: `invalid whiteout ".wh..."`,
	},
	{
		name:    "whiteout without a name",
		layers:  [][]ent{{file("a/b", "b")}, {whiteout("a/.wh.")}},
		wantErr: `invalid whiteout ".wh."`,
	},
	{
		name:    "root that is not a directory",
		layers:  [][]ent{{file(".", "")}},
		wantErr: "root is a file",
	},
	{
		name:    "owner beyond a uid",
		layers:  [][]ent{{file("a", "a").withOwner(1<<32, 0)}},
		wantErr: "owner 4294967296:0 is not a valid uid:gid",
	},
	{
		name:    "negative owner",
		layers:  [][]ent{{file("a", "a").withOwner(0, -2)}},
		wantErr: "owner 0:-2 is not a valid uid:gid",
	},
	{
		name:   "no layers",
		layers: nil,
		want:   nil,
	},
}

func TestBuild(t *testing.T) {
	for _, tt := range buildCases {
		t.Run(tt.name, func(t *testing.T) {
			layers := gzLayers(t, tt.layers...)
			ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Build() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Build() error = %v", err)
			}
			if diff := cmp.Diff(tt.want, listing(t, ix, bodies(tt.layers))); diff != "" {
				t.Errorf("Build() index mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestBuildErrorNamesLayer(t *testing.T) {
	layers := gzLayers(t, []ent{file("a", "a")}, []ent{hardlink("b", "nope")})
	_, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	want := "layer " + layers[1].Digest.String() + ": "
	if err == nil || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("Build() error = %v, want it to start with %q", err, want)
	}
}

func TestLookup(t *testing.T) {
	layers := gzLayers(t, []ent{dir("etc/"), file("etc/os-release", "ID=rhcos\n"), file("var/lib/x", "x")})
	ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		path     string
		wantPath string
		wantType baseindex.Type
		implied  bool
		found    bool
	}{
		{path: "etc/os-release", wantPath: "etc/os-release", wantType: baseindex.File, found: true},
		{path: "/etc/os-release", wantPath: "etc/os-release", wantType: baseindex.File, found: true},
		{path: "etc/", wantPath: "etc", wantType: baseindex.Dir, found: true},
		{path: "var/lib", wantPath: "var/lib", wantType: baseindex.Dir, implied: true, found: true},
		{path: "", wantPath: "", wantType: baseindex.Dir, implied: true, found: true},
		{path: "/", wantPath: "", wantType: baseindex.Dir, implied: true, found: true},
		{path: "etc/missing"},
	}
	for _, tt := range tests {
		n, ok := ix.Lookup(tt.path)
		if ok != tt.found {
			t.Errorf("Lookup(%q) found = %v, want %v", tt.path, ok, tt.found)
			continue
		}
		if !ok {
			continue
		}
		if n.Path != tt.wantPath || n.Type != tt.wantType || n.Implied() != tt.implied {
			t.Errorf("Lookup(%q) = {Path %q Type %v Implied %v}, want {%q %v %v}",
				tt.path, n.Path, n.Type, n.Implied(), tt.wantPath, tt.wantType, tt.implied)
		}
	}
	if n, _ := ix.Lookup("var/lib"); n.Mode != 0o755 || n.UID != 0 || n.GID != 0 {
		t.Errorf("Lookup(var/lib) = mode %o owner %d:%d, want an implied 0755 0:0", n.Mode, n.UID, n.GID)
	}
}

func TestReadDir(t *testing.T) {
	layers := gzLayers(t, []ent{
		dir("etc/systemd/system/multi-user.target.wants/"),
		symlink("etc/systemd/system/multi-user.target.wants/sshd.service", "/usr/lib/systemd/system/sshd.service"),
		symlink("etc/systemd/system/multi-user.target.wants/crio.service", "/etc/systemd/system/crio.service"),
		file("etc/systemd/system/multi-user.target.wants/b.service", "x"),
		file("etc/systemd/system/multi-user.target.wants/sub/x", "x"),
	})
	ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		dir  string
		want []string
	}{
		{"etc/systemd/system/multi-user.target.wants", []string{"b.service", "crio.service", "sshd.service", "sub"}},
		{"/etc/systemd/", []string{"system"}},
		{"", []string{"etc"}},
		{"etc/systemd/system/multi-user.target.wants/b.service", nil},
		{"nope", nil},
	}
	for _, tt := range tests {
		var got []string
		for _, n := range ix.ReadDir(tt.dir) {
			got = append(got, n.Path[strings.LastIndex(n.Path, "/")+1:])
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("ReadDir(%q) mismatch (-want +got):\n%s", tt.dir, diff)
		}
	}
}

func TestResolve(t *testing.T) {
	layers := gzLayers(t,
		[]ent{
			dir("usr/"), dir("var/"), dir("var/usrlocal/"),
			symlink("usr/local", "../var/usrlocal"),
			symlink("opt", "var/opt"),
			symlink("home", "/var/home"),
			symlink("sbin", "usr/sbin"),
			symlink("up", "../../../.."),
			symlink("abs-up", "/../../var"),
			symlink("loop1", "loop2"),
			symlink("loop2", "/loop1"),
			symlink("self", "."),
			symlink("var/usrlocal/lib", "/usr/lib64"),
			symlink("usr/lib64/dot", "./x/../"),
			file("usr/lexical", "lexical"), file("var/lexical", "resolved"),
		},
		[]ent{
			symlink("obj/1", "/var/roothome"),
			hardlink("root", "obj/1").withMode(0o777),
		},
	)
	ix, err := baseindex.Build(context.Background(), descriptors(layers), baseindex.Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		in, want string
		loop     bool
	}{
		{in: "usr/local/bin/x", want: "var/usrlocal/bin/x"},
		{in: "/usr/local/bin/x", want: "var/usrlocal/bin/x"},
		{in: "usr/local", want: "usr/local"},
		{in: "usr/local/", want: "usr/local"},
		{in: "opt/foo/bar", want: "var/opt/foo/bar"},
		{in: "home/core/.ssh/authorized_keys.d/ignition", want: "var/home/core/.ssh/authorized_keys.d/ignition"},
		{in: "root/.bashrc", want: "var/roothome/.bashrc"},
		{in: "usr/local/lib/libfoo.so", want: "usr/lib64/libfoo.so"},
		{in: "usr/local/lib/dot/f", want: "usr/lib64/f"},
		{in: "up/etc/passwd", want: "etc/passwd"},
		{in: "abs-up/tmp/x", want: "var/tmp/x"},
		{in: "../../etc/x", want: "etc/x"},
		{in: "usr/local/../x", want: "var/x"},
		{in: "self/self/etc/x", want: "etc/x"},
		{in: "etc/missing/x", want: "etc/missing/x"},
		{in: "sbin", want: "sbin"},
		{in: "usr/local/..", want: "var"},
		{in: "", want: ""},
		{in: "/", want: ""},
		{in: "loop1/x", loop: true},
		{in: "loop2/x/y", loop: true},
	}
	for _, tt := range tests {
		got, err := fstree.Resolve(ix.Tree(), tt.in)
		got = strings.TrimPrefix(got, "/")
		if tt.loop {
			if !errors.Is(err, fstree.ErrTooManyLinks) {
				t.Errorf("Resolve(%q) = %q, %v, want ErrTooManyLinks", tt.in, got, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("Resolve(%q) = %q, %v, want %q", tt.in, got, err, tt.want)
		}
	}
	// Lstat resolves the same way: ".." after a symlink climbs from its
	// target, not lexically; a path missing under a real directory is
	// missing.
	for _, tt := range []struct {
		in   string
		want string // the entry's path; "" for none
	}{
		{"/usr/local/../lexical", "/usr/local/../lexical"}, // var/lexical, named as asked
		{"/usr/lexical", "/usr/lexical"},
		{"/usr/local/bin/absent", ""},
		{"/var/absent", ""},
		{"/etc/missing/x", ""},
	} {
		e, ok, err := ix.Tree().Lstat(tt.in)
		if err != nil || ok != (tt.want != "") {
			t.Errorf("Lstat(%q) = %+v, %v, %v; want found %v", tt.in, e, ok, err, tt.want != "")
			continue
		}
		if ok && e.Size != int64(len("resolved")) && tt.in != "/usr/lexical" {
			t.Errorf("Lstat(%q) found the lexical path (size %d), want var/lexical's", tt.in, e.Size)
		}
	}
}
