package render

import (
	"bytes"
	"context"
	"crypto/sha512"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

func TestRenderFiles(t *testing.T) {
	gzText := "compressed\ncontent\n"
	sum := sha512.Sum512([]byte(gzText))
	doc := mcDoc("00-f", `"storage":{"files":[`+
		`{"path":"/etc/plain","contents":{"source":"data:,hello%20world"}},`+
		`{"path":"/etc/b64","mode":384,"contents":{"source":"data:text/plain;base64,aGVsbG8="}},`+
		fmt.Sprintf(`{"path":"/etc/gz-b64","contents":{"compression":"gzip","source":%q}},`, base64URL(gz(t, []byte(gzText))))+
		fmt.Sprintf(`{"path":"/etc/gz-pct","mode":493,"contents":{"compression":"gzip","source":%q,"verification":{"hash":"sha512-%s"}}},`, percentURL(gz(t, []byte(gzText))), hex.EncodeToString(sum[:]))+
		fmt.Sprintf(`{"path":"/etc/hashed","contents":{"source":"data:,x","verification":{"hash":"sha256-%s"}}},`, sha("x").Encoded())+
		`{"path":"/etc/empty"},`+
		`{"path":"/etc/owned","user":{"id":42},"group":{"id":43},"contents":{"source":"data:,"}},`+
		// No source is an empty file, compressed or not (the MCD's
		// DecodeIgnitionFileContents gunzips only a source).
		`{"path":"/etc/gz-empty","contents":{"compression":"gzip"}},`+
		// The MCD makes the kubeconfig 0600 after every write.
		`{"path":"/etc/kubernetes/kubeconfig","mode":420,"contents":{"source":"data:,k"}}]}`)
	res, err := renderDocs(t, nil, doc)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	file := func(p, content string, mode manifest.Mode, uid, gid, i int) manifest.Entry {
		return manifest.Entry{Path: p, Type: manifest.File, Mode: mode, UID: uid, GID: gid, Size: int64(len(content)),
			Digest: sha(content), Source: src("00-f", fmt.Sprintf("spec.config.storage.files[%d]", i))}
	}
	want := map[string]manifest.Entry{
		"/etc/plain":                 file("/etc/plain", "hello world", 0o644, 0, 0, 0),
		"/etc/b64":                   file("/etc/b64", "hello", 0o600, 0, 0, 1),
		"/etc/gz-b64":                file("/etc/gz-b64", gzText, 0o644, 0, 0, 2),
		"/etc/gz-pct":                file("/etc/gz-pct", gzText, 0o755, 0, 0, 3),
		"/etc/hashed":                file("/etc/hashed", "x", 0o644, 0, 0, 4),
		"/etc/empty":                 file("/etc/empty", "", 0o644, 0, 0, 5),
		"/etc/owned":                 file("/etc/owned", "", 0o644, 42, 43, 6),
		"/etc/gz-empty":              file("/etc/gz-empty", "", 0o644, 0, 0, 7),
		"/etc/kubernetes/kubeconfig": file("/etc/kubernetes/kubeconfig", "k", 0o600, 0, 0, 8),
		"/etc":                       {Path: "/etc", Type: manifest.Directory, Mode: 0o755, Source: src("00-f", "spec.config.storage.files[0]")},
	}
	if diff := cmp.Diff(want, pick(res, keys(want)...)); diff != "" {
		t.Errorf("Render() entries mismatch (-want +got):\n%s", diff)
	}
	for p, wantContent := range map[string]string{"/etc/plain": "hello world", "/etc/b64": "hello", "/etc/gz-b64": gzText, "/etc/gz-pct": gzText} {
		if got, _ := content(res, p); got != wantContent {
			t.Errorf("Render() content of %s = %q, want %q", p, got, wantContent)
		}
	}
}

func TestRenderFileErrors(t *testing.T) {
	bomb := gz(t, make([]byte, 65<<20))
	tests := []struct {
		name, file, want string
	}{{
		name: "gzip bomb",
		file: fmt.Sprintf(`{"path":"/etc/bomb","contents":{"compression":"gzip","source":%q}}`, base64URL(bomb)),
		want: "mc0.yaml: 00-e: spec.config.storage.files[0].contents: gzip content expands past 64 MiB",
	}, {
		name: "verification hash mismatch",
		file: fmt.Sprintf(`{"path":"/etc/h","contents":{"source":"data:,y","verification":{"hash":"sha256-%s"}}}`, sha("x").Encoded()),
		want: "mc0.yaml: 00-e: spec.config.storage.files[0].contents: verification hash mismatch: content has " + strings.Replace(sha("y").String(), ":", "-", 1),
	}, {
		name: "hash of the compressed bytes instead of the content",
		file: fmt.Sprintf(`{"path":"/etc/h","contents":{"compression":"gzip","source":%q,"verification":{"hash":"sha256-%s"}}}`,
			base64URL(gz(t, []byte("z"))), sha(string(gz(t, []byte("z")))).Encoded()),
		want: "mc0.yaml: 00-e: spec.config.storage.files[0].contents: verification hash mismatch: content has " + strings.Replace(sha("z").String(), ":", "-", 1),
	}, {
		// The MCD's dataurl.DecodeString("") fails: the update with it.
		name: "an empty source",
		file: `{"path":"/etc/e","contents":{"source":""}}`,
		want: "mc0.yaml: 00-e: spec.config.storage.files[0].contents: decoding data URL: missing data prefix",
	}, {
		name: "not gzip data",
		file: `{"path":"/etc/g","contents":{"compression":"gzip","source":"data:,this%20is%20not%20gzip"}}`,
		want: "mc0.yaml: 00-e: spec.config.storage.files[0].contents: invalid gzip content: gzip: invalid header",
	}, {
		name: "truncated gzip data",
		file: fmt.Sprintf(`{"path":"/etc/g","contents":{"compression":"gzip","source":%q}}`, base64URL(gz(t, []byte("truncated"))[:12])),
		want: "mc0.yaml: 00-e: spec.config.storage.files[0].contents: invalid gzip content: unexpected EOF",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderDocs(t, nil, mcDoc("00-e", `"storage":{"files":[`+tt.file+`]}`))
			if err == nil || err.Error() != tt.want {
				t.Errorf("Render() = %v, want %q", err, tt.want)
			}
		})
	}
}

// TestGunzipBounded checks that decompression stops at the limit instead
// of expanding everything first: 1 GiB of zeros (16 gzip members) must be
// refused having allocated far less than 1 GiB.
func TestGunzipBounded(t *testing.T) {
	member := gz(t, make([]byte, 64<<20))
	stream := bytes.Repeat(member, 16)
	gzip, source := "gzip", base64URL(stream)
	res := types.Resource{Compression: &gzip, Source: &source}
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := decode(res, fstree.MaxContent)
	runtime.ReadMemStats(&after)
	if err == nil || err.Error() != "gzip content expands past 64 MiB" {
		t.Errorf("decode(1 GiB gzip stream) = %v, want the 64 MiB refusal", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 512<<20 {
		t.Errorf("decode(1 GiB gzip stream) allocated %d MiB, want at most 512 MiB", alloc>>20)
	}
}

// TestGunzipRefusesBySize: content whose gzip trailer says it is larger
// than what is left is counted, not kept, so refusing it allocates next
// to nothing; a trailer that lies about the size still gets the gzip
// reader's own error, and content that fits is read whole.
func TestGunzipRefusesBySize(t *testing.T) {
	big := gz(t, make([]byte, 30<<20))
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := gunzip(big, 4<<20)
	runtime.ReadMemStats(&after)
	if want := "gzip content expands past what is left of 64 MiB for all the MachineConfigs' files"; err == nil || err.Error() != want {
		t.Errorf("gunzip(30 MiB, limit 4 MiB) = %v, want %q", err, want)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("gunzip(30 MiB, limit 4 MiB) allocated %d KiB, want at most 1 MiB", alloc>>10)
	}
	// A trailer that understates the size keeps no more than it states.
	small := append([]byte(nil), big...)
	binary.LittleEndian.PutUint32(small[len(small)-4:], 0)
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err = gunzip(small, 4<<20)
	runtime.ReadMemStats(&after)
	if err == nil || !strings.HasPrefix(err.Error(), "gzip content expands past") {
		t.Errorf("gunzip(30 MiB saying 0, limit 4 MiB) = %v, want the refusal", err)
	}
	if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
		t.Errorf("gunzip(30 MiB saying 0, limit 4 MiB) allocated %d KiB, want at most 1 MiB", alloc>>10)
	}
	for _, size := range []uint32{0, 8 << 20} {
		lying := gz(t, []byte("small"))
		binary.LittleEndian.PutUint32(lying[len(lying)-4:], size)
		if _, err := gunzip(lying, 4<<20); err == nil || !strings.HasPrefix(err.Error(), "invalid gzip content: ") {
			t.Errorf("gunzip(trailer saying %d for 5 bytes) = %v, want invalid gzip content", size, err)
		}
	}
	// Several members: the trailer states the last one's size, and the
	// content is read whole all the same.
	multi := append(gz(t, bytes.Repeat([]byte("a"), 1<<20)), gz(t, []byte("b"))...)
	if out, err := gunzip(multi, 4<<20); err != nil || len(out) != 1<<20+1 || out[len(out)-1] != 'b' {
		t.Errorf("gunzip(two members) = %d bytes, %v; want %d", len(out), err, 1<<20+1)
	}
	exact := make([]byte, 4<<20)
	exact[len(exact)-1] = 1
	if out, err := gunzip(gz(t, exact), 4<<20); err != nil || !bytes.Equal(out, exact) {
		t.Errorf("gunzip(4 MiB, limit 4 MiB) = %d bytes, %v; want the content", len(out), err)
	}
}

func TestRenderOwners(t *testing.T) {
	root := makeRoot(t, rhcosSpec())
	doc := mcDoc("00-o", `"storage":{"files":[`+
		`{"path":"/etc/o/by-id","user":{"id":1234},"group":{"id":5678}},`+
		`{"path":"/etc/o/by-name","user":{"name":"core"},"group":{"name":"wheel"}},`+
		`{"path":"/etc/o/altfiles","user":{"name":"containers"},"group":{"name":"hugetlbfs"}},`+
		`{"path":"/etc/o/group-only","group":{"name":"core"}},`+
		`{"path":"/etc/o/root","user":{"name":"root"},"group":{"id":0}}],`+
		`"directories":[{"path":"/etc/o/d","mode":448,"user":{"name":"core"},"group":{"name":"core"}}],`+
		`"links":[{"path":"/etc/o/l","target":"by-id","user":{"name":"core"},"group":{"id":7}}]}`)
	res, err := renderDocs(t, root, doc)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	type owner struct{ UID, GID int }
	want := map[string]owner{
		"/etc/o/by-id":      {1234, 5678},
		"/etc/o/by-name":    {1000, 10}, // etc/passwd wins over usr/lib/passwd's 4000
		"/etc/o/altfiles":   {993, 801}, // only in usr/lib
		"/etc/o/group-only": {0, 1000},  // etc/group wins over usr/lib/group's 4000
		"/etc/o/root":       {0, 0},
		"/etc/o/d":          {1000, 1000},
		"/etc/o/l":          {1000, 7},
	}
	got := map[string]owner{}
	for p, e := range pick(res, keys(want)...) {
		got[p] = owner{e.UID, e.GID}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Render() owners mismatch (-want +got):\n%s", diff)
	}
}

func TestRenderUnknownOwners(t *testing.T) {
	doc := mcDoc("00-o", `"storage":{"files":[`+
		`{"path":"/etc/a","user":{"name":"nobody2"},"group":{"name":"nogroup2"}},`+
		`{"path":"/etc/b","user":{"name":"core"}},`+
		`{"path":"/etc/c","user":{"name":"nobody2"}}],`+
		`"directories":[{"path":"/etc/d","user":{"name":"ghost"}}],`+
		`"links":[{"path":"/etc/l","target":"a","user":{"name":"broken"}}]}`)
	tests := []struct {
		name string
		root fstree.Tree
		want []string
	}{{
		name: "root",
		root: makeRoot(t, rhcosSpec()),
		want: []string{
			`mc0.yaml: 00-o: spec.config.storage.files[0].group: unknown group "nogroup2" (not in etc/group or usr/lib/group of the root)`,
			`mc0.yaml: 00-o: spec.config.storage.links[0].user: unknown user "broken" (not in etc/passwd or usr/lib/passwd of the root)`,
			`mc0.yaml: 00-o: spec.config.storage.directories[0].user: unknown user "ghost" (not in etc/passwd or usr/lib/passwd of the root)`,
			`mc0.yaml: 00-o: spec.config.storage.files[0].user: unknown user "nobody2" (not in etc/passwd or usr/lib/passwd of the root)`,
			`mc0.yaml: 00-o: spec.config.storage.files[2].user: unknown user "nobody2" (not in etc/passwd or usr/lib/passwd of the root)`,
		},
	}, {
		name: "no root",
		want: []string{
			`mc0.yaml: 00-o: spec.config.storage.files[0].group: unknown group "nogroup2" (no root with etc/group or usr/lib/group to resolve it)`,
			`mc0.yaml: 00-o: spec.config.storage.links[0].user: unknown user "broken" (no root with etc/passwd or usr/lib/passwd to resolve it)`,
			`mc0.yaml: 00-o: spec.config.storage.files[1].user: unknown user "core" (no root with etc/passwd or usr/lib/passwd to resolve it)`,
			`mc0.yaml: 00-o: spec.config.storage.directories[0].user: unknown user "ghost" (no root with etc/passwd or usr/lib/passwd to resolve it)`,
			`mc0.yaml: 00-o: spec.config.storage.files[0].user: unknown user "nobody2" (no root with etc/passwd or usr/lib/passwd to resolve it)`,
			`mc0.yaml: 00-o: spec.config.storage.files[2].user: unknown user "nobody2" (no root with etc/passwd or usr/lib/passwd to resolve it)`,
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := renderDocs(t, tt.root, doc)
			if err == nil {
				t.Fatalf("Render() = nil error, want %q", tt.want)
			}
			if diff := cmp.Diff(tt.want, strings.Split(err.Error(), "\n")); diff != "" {
				t.Errorf("Render() error lines mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRenderDirectoriesAndLinks(t *testing.T) {
	doc := mcDoc("00-d", `"storage":{"files":[{"path":"/etc/f","contents":{"source":"data:,f"}}],`+
		`"directories":[{"path":"/etc/d"},{"path":"/etc/e","mode":448,"user":{"id":5},"group":{"id":6}}],`+
		`"links":[{"path":"/etc/l","target":"../usr/bin/x"},{"path":"/etc/abs","target":"/usr/bin/x"},`+
		`{"path":"/etc/h","target":"/etc/f","hard":true}]}`)
	res, err := renderDocs(t, nil, doc)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	want := map[string]manifest.Entry{
		"/etc/d":   {Path: "/etc/d", Type: manifest.Directory, Mode: 0o755, Source: src("00-d", "spec.config.storage.directories[0]")},
		"/etc/e":   {Path: "/etc/e", Type: manifest.Directory, Mode: 0o700, UID: 5, GID: 6, Source: src("00-d", "spec.config.storage.directories[1]")},
		"/etc/l":   {Path: "/etc/l", Type: manifest.Symlink, Mode: 0o777, Target: "../usr/bin/x", Source: src("00-d", "spec.config.storage.links[0]")},
		"/etc/abs": {Path: "/etc/abs", Type: manifest.Symlink, Mode: 0o777, Target: "/usr/bin/x", Source: src("00-d", "spec.config.storage.links[1]")},
		"/etc/h":   {Path: "/etc/h", Type: manifest.Hardlink, Target: "/etc/f", Mode: 0o644, Size: 1, Digest: sha("f"), Source: src("00-d", "spec.config.storage.links[2]")},
	}
	if diff := cmp.Diff(want, pick(res, keys(want)...)); diff != "" {
		t.Errorf("Render() entries mismatch (-want +got):\n%s", diff)
	}
}

// TestRenderPlacement checks parent directories, resolution through the
// root's symlinks and type clashes with the root.
func TestRenderPlacement(t *testing.T) {
	dir := func(p, resolved string, mode manifest.Mode, s manifest.Source) manifest.Entry {
		return manifest.Entry{Path: p, ResolvedPath: resolved, Type: manifest.Directory, Mode: mode, Source: s}
	}
	file := func(p, resolved string, s manifest.Source) manifest.Entry {
		return manifest.Entry{Path: p, ResolvedPath: resolved, Type: manifest.File, Mode: 0o644, Digest: sha(""), Source: s}
	}
	f0 := src("00-p", "spec.config.storage.files[0]")
	tests := []struct {
		name        string
		root        map[string]string // nil: no root
		docs        []string
		want        map[string]manifest.Entry
		wantMissing []string
		wantErr     string
	}{{
		name: "parents created where the root lacks them",
		root: map[string]string{"etc/": ""},
		docs: []string{mcDoc("00-p", `"storage":{"files":[{"path":"/etc/new/deep/x"}]}`)},
		want: map[string]manifest.Entry{
			"/etc/new/deep/x": file("/etc/new/deep/x", "", f0),
			"/etc/new":        dir("/etc/new", "", 0o755, f0),
			"/etc/new/deep":   dir("/etc/new/deep", "", 0o755, f0),
		},
		wantMissing: []string{"/etc"},
	}, {
		name: "every parent created without a root",
		docs: []string{mcDoc("00-p", `"storage":{"files":[{"path":"/etc/new/x"}]}`)},
		want: map[string]manifest.Entry{
			"/etc":     dir("/etc", "", 0o755, f0),
			"/etc/new": dir("/etc/new", "", 0o755, f0),
		},
	}, {
		name: "a directory of the MachineConfig is not created again",
		docs: []string{mcDoc("00-p", `"storage":{"files":[{"path":"/etc/p/x"}],"directories":[{"path":"/etc/p","mode":448}]}`)},
		want: map[string]manifest.Entry{
			"/etc/p": dir("/etc/p", "", 0o700, src("00-p", "spec.config.storage.directories[0]")),
		},
	}, {
		name: "parents resolved through the root's symlinks",
		root: map[string]string{"usr/": "", "usr/local": "-> ../var/usrlocal", "var/usrlocal/": ""},
		docs: []string{mcDoc("00-p", `"storage":{"files":[{"path":"/usr/local/bin/x"}]}`)},
		want: map[string]manifest.Entry{
			"/usr/local/bin/x": file("/usr/local/bin/x", "/var/usrlocal/bin/x", f0),
			"/usr/local/bin":   dir("/usr/local/bin", "/var/usrlocal/bin", 0o755, f0),
		},
		wantMissing: []string{"/usr", "/usr/local", "/var", "/var/usrlocal"},
	}, {
		name: "dangling root symlink: its target is created",
		root: map[string]string{"usr/": "", "usr/local": "-> ../var/usrlocal", "var/": ""},
		docs: []string{mcDoc("00-p", `"storage":{"files":[{"path":"/usr/local/bin/x"},{"path":"/usr/local/y"}]}`)},
		want: map[string]manifest.Entry{
			"/usr/local/bin/x": file("/usr/local/bin/x", "/var/usrlocal/bin/x", f0),
			"/usr/local/y":     file("/usr/local/y", "/var/usrlocal/y", src("00-p", "spec.config.storage.files[1]")),
			"/var/usrlocal":    dir("/var/usrlocal", "", 0o755, f0),
			"/usr/local/bin":   dir("/usr/local/bin", "/var/usrlocal/bin", 0o755, f0),
		},
		wantMissing: []string{"/usr/local", "/var"},
	}, {
		name: "absolute root symlink and one pointing above the root stay inside",
		root: map[string]string{"opt": "-> /var/opt", "var/opt/": "", "etc/evil": "-> ../../../../../tmp", "tmp/": ""},
		docs: []string{mcDoc("00-p", `"storage":{"files":[{"path":"/opt/x"},{"path":"/etc/evil/x"}]}`)},
		want: map[string]manifest.Entry{
			"/opt/x":      file("/opt/x", "/var/opt/x", f0),
			"/etc/evil/x": file("/etc/evil/x", "/tmp/x", src("00-p", "spec.config.storage.files[1]")),
		},
	}, {
		name: "directory at a root symlink to a directory",
		root: map[string]string{"home": "-> var/home", "var/home/": "", "opt": "-> var/opt", "var/opt/": ""},
		docs: []string{mcDoc("00-p", `"storage":{"directories":[{"path":"/home/core/d"},{"path":"/opt"}]}`)},
		want: map[string]manifest.Entry{
			"/home/core/d": dir("/home/core/d", "/var/home/core/d", 0o755, src("00-p", "spec.config.storage.directories[0]")),
			"/home/core":   dir("/home/core", "/var/home/core", 0o755, src("00-p", "spec.config.storage.directories[0]")),
			"/opt":         dir("/opt", "/var/opt", 0o755, src("00-p", "spec.config.storage.directories[1]")),
		},
	}, {
		name:    "file where the root has a directory",
		root:    map[string]string{"etc/foo/": ""},
		docs:    []string{mcDoc("00-p", `"storage":{"files":[{"path":"/etc/foo"}]}`)},
		wantErr: "mc0.yaml: 00-p: spec.config.storage.files[0]: /etc/foo: the base has a directory at /etc/foo, the MachineConfig writes a file",
	}, {
		name:    "symlink where the root has a directory",
		root:    map[string]string{"etc/foo/": ""},
		docs:    []string{mcDoc("00-p", `"storage":{"links":[{"path":"/etc/foo","target":"bar"}]}`)},
		wantErr: "mc0.yaml: 00-p: spec.config.storage.links[0]: /etc/foo: the base has a directory at /etc/foo, the MachineConfig writes a symlink",
	}, {
		name:    "directory where the root has a file",
		root:    map[string]string{"etc/foo": "x"},
		docs:    []string{mcDoc("00-p", `"storage":{"directories":[{"path":"/etc/foo"}]}`)},
		wantErr: "mc0.yaml: 00-p: spec.config.storage.directories[0]: /etc/foo: the base has a file at /etc/foo, the MachineConfig wants a directory",
	}, {
		name:    "parent is a file in the root",
		root:    map[string]string{"etc/foo": "x"},
		docs:    []string{mcDoc("00-p", `"storage":{"files":[{"path":"/etc/foo/bar"}]}`)},
		wantErr: "mc0.yaml: 00-p: spec.config.storage.files[0]: /etc/foo/bar: parent /etc/foo is a file in the base, not a directory",
	}, {
		name: "parent is a file of another MachineConfig",
		docs: []string{
			mcDoc("00-a", `"storage":{"files":[{"path":"/etc/x"}]}`),
			mcDoc("01-b", `"storage":{"files":[{"path":"/etc/x/y"}]}`),
		},
		wantErr: "mc1.yaml: 01-b: spec.config.storage.files[0]: /etc/x/y: parent /etc/x is a file (00-a: spec.config.storage.files[0]), not a directory",
	}, {
		name: "file and directory at one path in two MachineConfigs",
		docs: []string{
			mcDoc("00-a", `"storage":{"files":[{"path":"/etc/x"}]}`),
			mcDoc("01-b", `"storage":{"directories":[{"path":"/etc/x"}]}`),
		},
		wantErr: "mc1.yaml: 01-b: spec.config.storage.directories[0].path: path /etc/x is also defined by mc0.yaml: 00-a: spec.config.storage.files[0]",
	}, {
		name:    "two spellings of one path in the root",
		root:    map[string]string{"usr/": "", "usr/local": "-> ../var/usrlocal", "var/usrlocal/": ""},
		docs:    []string{mcDoc("00-p", `"storage":{"files":[{"path":"/usr/local/x"},{"path":"/var/usrlocal/x"}]}`)},
		wantErr: "mc0.yaml: 00-p: spec.config.storage.files[1]: /var/usrlocal/x and /usr/local/x (00-p: spec.config.storage.files[0]) are the same path /var/usrlocal/x in the root",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var root fstree.Tree
			if tt.root != nil {
				root = makeRoot(t, tt.root)
			}
			res, err := renderDocs(t, root, tt.docs...)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Errorf("Render() = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tt.want, pick(res, keys(tt.want)...)); diff != "" {
				t.Errorf("Render() entries mismatch (-want +got):\n%s", diff)
			}
			if got := present(res, tt.wantMissing...); got != nil {
				t.Errorf("Render() has entries for %q, want none", got)
			}
		})
	}
}

func TestRenderSSHKeys(t *testing.T) {
	docs := []string{
		mcDoc("00-ssh", `"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA1 a","ssh-ed25519 AAAA2 b"]}]}`),
		mcDoc("10-ssh", `"passwd":{"users":[{"name":"core","sshAuthorizedKeys":["ssh-ed25519 AAAA2 b","ssh-rsa AAAA3 c"]}]}`),
	}
	keysField := src("00-ssh", "spec.config.passwd.users[0].sshAuthorizedKeys")
	const allKeys = "ssh-ed25519 AAAA1 a\nssh-ed25519 AAAA2 b\nssh-rsa AAAA3 c\n"
	tests := []struct {
		name        string
		root        map[string]string
		want        map[string]manifest.Entry
		wantMissing []string
	}{{
		name: "home directory missing from the root",
		root: rhcosSpec(),
		want: map[string]manifest.Entry{
			"/home/core":      {Path: "/home/core", ResolvedPath: "/var/home/core", Type: manifest.Directory, Mode: 0o700, UID: 1000, GID: 1000, Source: keysField},
			"/home/core/.ssh": {Path: "/home/core/.ssh", ResolvedPath: "/var/home/core/.ssh", Type: manifest.Directory, Mode: 0o700, UID: 1000, GID: 1000, Source: keysField},
			"/home/core/.ssh/authorized_keys.d": {Path: "/home/core/.ssh/authorized_keys.d", ResolvedPath: "/var/home/core/.ssh/authorized_keys.d",
				Type: manifest.Directory, Mode: 0o700, UID: 1000, GID: 1000, Source: keysField},
			SSHKeysFile: {Path: SSHKeysFile, ResolvedPath: "/var/home/core/.ssh/authorized_keys.d/ignition", Type: manifest.File, Mode: 0o600, UID: 1000, GID: 1000,
				Size: int64(len(allKeys)), Digest: sha(allKeys), Source: keysField},
		},
		wantMissing: []string{"/home", "/var/home"},
	}, {
		name: "home directory in the root",
		root: map[string]string{"etc/passwd": "core:x:1000:1000::/home/core:/bin/bash\n", "etc/group": "core:x:1000:\n", "home/core/": ""},
		want: map[string]manifest.Entry{
			"/home/core/.ssh": {Path: "/home/core/.ssh", Type: manifest.Directory, Mode: 0o700, UID: 1000, GID: 1000, Source: keysField},
		},
		wantMissing: []string{"/home", "/home/core"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := renderDocs(t, makeRoot(t, tt.root), docs...)
			if err != nil {
				t.Fatalf("Render() = %v", err)
			}
			if diff := cmp.Diff(tt.want, pick(res, keys(tt.want)...)); diff != "" {
				t.Errorf("Render() entries mismatch (-want +got):\n%s", diff)
			}
			if got := present(res, tt.wantMissing...); got != nil {
				t.Errorf("Render() has entries for %q, want none", got)
			}
			if got, _ := content(res, SSHKeysFile); got != allKeys {
				t.Errorf("Render() %s = %q, want %q", SSHKeysFile, got, allKeys)
			}
		})
	}
}

// TestRenderMerge checks that rendering follows the merge: the later
// MachineConfig's file and unit win, and the current config is the merged
// MachineConfig.
func TestRenderMerge(t *testing.T) {
	mcs := parseDocs(t,
		mcDoc("10-b", `"storage":{"files":[{"path":"/etc/x","mode":384,"contents":{"source":"data:,b"}}]},`+
			`"systemd":{"units":[{"name":"u.service","contents":"[Unit]\nDescription=b\n"}]}`),
		mcDoc("00-a", `"storage":{"files":[{"path":"/etc/x","contents":{"source":"data:,a"}},{"path":"/etc/only-a","contents":{"source":"data:,a"}}]},`+
			`"systemd":{"units":[{"name":"u.service","contents":"[Unit]\nDescription=a\n"}]}`),
	)
	const unitB = "[Unit]\nDescription=b\n"
	m := machineconfig.Merge(mcs)
	res, err := Render(context.Background(), m, nil)
	if err != nil {
		t.Fatalf("Render() = %v", err)
	}
	current, err := m.JSON()
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]manifest.Entry{
		"/etc/x":      {Path: "/etc/x", Type: manifest.File, Mode: 0o600, Size: 1, Digest: sha("b"), Source: src("10-b", "spec.config.storage.files[0]")},
		"/etc/only-a": {Path: "/etc/only-a", Type: manifest.File, Mode: 0o644, Size: 1, Digest: sha("a"), Source: src("00-a", "spec.config.storage.files[1]")},
		"/etc/systemd/system/u.service": {Path: "/etc/systemd/system/u.service", Type: manifest.File, Mode: 0o644, Size: int64(len(unitB)),
			Digest: sha(unitB), Source: src("10-b", "spec.config.systemd.units[u.service].contents")},
		CurrentConfig: {Path: CurrentConfig, Type: manifest.File, Mode: 0o644, Size: int64(len(current)), Digest: sha(string(current)), Source: src(m.Name, "spec")},
	}
	if diff := cmp.Diff(want, pick(res, keys(want)...)); diff != "" {
		t.Errorf("Render() entries mismatch (-want +got):\n%s", diff)
	}
	if got, _ := content(res, CurrentConfig); got != string(current) {
		t.Errorf("Render() %s = %s, want Merged.JSON() %s", CurrentConfig, got, current)
	}
	man := res.Manifest(m.MachineConfigs)
	var names []string
	for _, mc := range man.MachineConfigs {
		names = append(names, mc.Name+" "+mc.Digest.String())
	}
	wantNames := []string{"00-a " + m.MachineConfigs[0].Digest.String(), "10-b " + m.MachineConfigs[1].Digest.String()}
	if diff := cmp.Diff(wantNames, names); diff != "" {
		t.Errorf("Result.Manifest().MachineConfigs mismatch (-want +got):\n%s", diff)
	}
}

// TestRenderRefusesUncheckedPaths renders merged configs that did not go
// through Load's checks: Render must refuse paths that are not absolute
// and clean rather than place them.
func TestRenderRefusesUncheckedPaths(t *testing.T) {
	tests := []struct{ path, want string }{
		{"etc/x", `<merged>: 00-u: spec.config.storage.files[0]: path "etc/x" is not absolute and clean`},
		{"/etc/../../x", `<merged>: 00-u: spec.config.storage.files[0]: path "/etc/../../x" is not absolute and clean`},
		{"", `<merged>: 00-u: spec.config.storage.files[0]: path "" is not absolute and clean`},
		{"/", `<merged>: 00-u: spec.config.storage.files[0]: path "/" is the root directory itself`},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			m := &machineconfig.Merged{Name: "00-u", Files: []machineconfig.File{{
				File:   types.File{Node: types.Node{Path: tt.path}},
				Source: machineconfig.Source{MachineConfig: "00-u", Field: "spec.config.storage.files[0]"},
			}}}
			_, err := Render(context.Background(), m, nil)
			if err == nil || err.Error() != tt.want {
				t.Errorf("Render(file %q) = %v, want %q", tt.path, err, tt.want)
			}
		})
	}
}

// TestRenderLinkedParent: a symlink of one MachineConfig used as the parent
// of another's file would write through the link (on the build host, out
// of the tree); it is refused.
func TestRenderLinkedParent(t *testing.T) {
	_, err := renderDocs(t, nil,
		mcDoc("00-a", `"storage":{"links":[{"path":"/etc/x","target":"/tmp/elsewhere"}]}`),
		mcDoc("01-b", `"storage":{"files":[{"path":"/etc/x/payload","contents":{"source":"data:,p"}}]}`))
	want := "mc1.yaml: 01-b: spec.config.storage.files[0]: /etc/x/payload: parent /etc/x is a symlink (00-a: spec.config.storage.links[0]), not a directory"
	if err == nil || err.Error() != want {
		t.Errorf("Render() = %v, want %q", err, want)
	}
}

// TestHardLinkTargets: a hard link takes its target's metadata and resolved
// path (the same inode, where the layer wrote it); a link to a file the
// MachineConfigs do not write cannot be put in a layer and is refused.
func TestHardLinkTargets(t *testing.T) {
	root := makeRoot(t, map[string]string{"usr/local": "-> ../var/usrlocal", "var/usrlocal/": "", "etc/hosts": "127.0.0.1 localhost\n"})
	res, err := renderDocs(t, root, mcDoc("00-h", `"storage":{"files":[{"path":"/usr/local/bin/x","mode":488,"user":{"id":7},"contents":{"source":"data:,x"}}],`+
		`"links":[{"path":"/usr/local/bin/y","target":"/usr/local/bin/x","hard":true}]}`))
	if err != nil {
		t.Fatal(err)
	}
	got := pick(res, "/usr/local/bin/y")["/usr/local/bin/y"]
	if got.Target != "/var/usrlocal/bin/x" || got.Mode != 0o750 || got.UID != 7 || got.Digest != sha("x") {
		t.Errorf("hard link = %+v, want target /var/usrlocal/bin/x with mode 0750, uid 7 and x's digest", got)
	}
	_, err = renderDocs(t, root, mcDoc("00-h", `"storage":{"links":[{"path":"/etc/h","target":"/etc/hosts","hard":true}]}`))
	if err == nil || !strings.Contains(err.Error(), "target /etc/hosts is not a file the MachineConfigs write") {
		t.Errorf("Render(hard link to a root file) = %v, want a refusal", err)
	}
}

// cancellingTree cancels a context on its first ReadFile.
type cancellingTree struct {
	fstree.Tree
	cancel context.CancelFunc
}

func (c cancellingTree) ReadFile(p string) ([]byte, error) {
	c.cancel()
	return c.Tree.ReadFile(p)
}

// TestRenderStopsWhenCancelled: once ctx is done, Render returns its
// error and no rendering: cancelled before it starts, and while it reads
// the root.
func TestRenderStopsWhenCancelled(t *testing.T) {
	mcs := parseDocs(t, mcDoc("00-a", `"storage":{"files":[{"path":"/etc/a","contents":{"source":"data:,a"}},{"path":"/etc/b","contents":{"source":"data:,b"}}]},`))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if res, err := Render(ctx, machineconfig.Merge(mcs), nil); !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("Render(a cancelled context) = %v, %v; want nil and context.Canceled", res, err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	defer cancel()
	if res, err := Render(ctx, machineconfig.Merge(mcs), cancellingTree{fstree.Empty, cancel}); !errors.Is(err, context.Canceled) || res != nil {
		t.Errorf("Render(cancelled while reading the root) = %v, %v; want nil and context.Canceled", res, err)
	}
	if _, err := Render(context.Background(), machineconfig.Merge(mcs), fstree.Empty); err != nil {
		t.Errorf("Render(not cancelled) = %v", err)
	}
}
