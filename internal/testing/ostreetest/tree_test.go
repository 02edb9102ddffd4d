package ostreetest

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"
)

// entry is one filesystem entry as ostree's /etc merge compares it: type,
// permission bits, owners, and content or symlink target.
type entry struct {
	Type     byte // 'f' regular file, 'd' directory, 'l' symlink
	Mode     fs.FileMode
	UID, GID int
	Data     string // file content or symlink target
}

func file(mode fs.FileMode, data string) entry { return entry{Type: 'f', Mode: mode, Data: data} }
func dir(mode fs.FileMode) entry               { return entry{Type: 'd', Mode: mode} }
func link(target string) entry                 { return entry{Type: 'l', Mode: 0o777, Data: target} }

func (e entry) owned(uid, gid int) entry {
	e.UID, e.GID = uid, gid
	return e
}

// put creates path (replacing what is there, but keeping an existing
// directory) with e's type, content, mode and owners, without following
// a symlink at path. Missing parents are created 0755 root:root.
func put(path string, e entry) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if fi, err := os.Lstat(path); err == nil && !(fi.IsDir() && e.Type == 'd') {
		if err := os.RemoveAll(path); err != nil {
			return err
		}
	}
	if err := create(path, e); err != nil {
		return err
	}
	if err := os.Lchown(path, e.UID, e.GID); err != nil {
		return err
	}
	if e.Type == 'l' {
		return nil
	}
	return os.Chmod(path, e.Mode) // after chown, which clears setuid bits
}

func create(path string, e entry) error {
	switch e.Type {
	case 'f':
		return os.WriteFile(path, []byte(e.Data), 0o600)
	case 'd':
		err := os.Mkdir(path, 0o700)
		if errors.Is(err, fs.ErrExist) {
			return nil
		}
		return err
	case 'l':
		return os.Symlink(e.Data, path)
	}
	return errors.New("unknown entry type")
}

// read returns the entry at path, or nil when there is none.
func read(path string) (*entry, error) {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	e := &entry{Mode: fi.Mode() & (fs.ModePerm | fs.ModeSetuid | fs.ModeSetgid | fs.ModeSticky), UID: int(st.Uid), GID: int(st.Gid)}
	switch {
	case fi.Mode().IsRegular():
		e.Type = 'f'
		b, err := os.ReadFile(path)
		e.Data = string(b)
		return e, err
	case fi.IsDir():
		e.Type = 'd'
	case fi.Mode()&fs.ModeSymlink != 0:
		e.Type = 'l'
		e.Data, err = os.Readlink(path)
	default:
		e.Type = '?'
	}
	return e, err
}

// image writes an image root in a new directory: etc (0755) holding the
// entries of etc, keyed by path relative to /etc, plus the entries of
// other, keyed by path relative to the root.
func image(t *testing.T, etc, other map[string]entry) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to set file owners")
	}
	root := t.TempDir()
	all := map[string]entry{"etc": dir(0o755)}
	for p, e := range etc {
		all[filepath.Join("etc", p)] = e
	}
	for p, e := range other {
		all[p] = e
	}
	paths := make([]string, 0, len(all))
	for p := range all {
		paths = append(paths, p)
	}
	sort.Strings(paths) // parents first
	for _, p := range paths {
		if err := put(filepath.Join(root, p), all[p]); err != nil {
			t.Fatal(err)
		}
	}
	return root
}

// op is one thing the machine-config-daemon (or an admin) does to the
// node's live /etc.
type op func(etc string) error

func write(p string, e entry) op {
	return func(etc string) error { return put(filepath.Join(etc, p), e) }
}
func remove(p string) op {
	return func(etc string) error { return os.RemoveAll(filepath.Join(etc, p)) }
}
func chmod(p string, m fs.FileMode) op {
	return func(etc string) error { return os.Chmod(filepath.Join(etc, p), m) }
}

func touch(p string, when time.Time) op {
	return func(etc string) error { return os.Chtimes(filepath.Join(etc, p), when, when) }
}

func setxattr(p, name, value string) op {
	return func(etc string) error { return unix.Lsetxattr(filepath.Join(etc, p), name, []byte(value), 0) }
}

func apply(ops []op) func(string) error {
	return func(etc string) error {
		for _, o := range ops {
			if err := o(etc); err != nil {
				return err
			}
		}
		return nil
	}
}

// readAll reads the given paths (relative to dir); absent ones are nil.
func readAll(t *testing.T, dir string, paths []string) map[string]*entry {
	t.Helper()
	got := map[string]*entry{}
	for _, p := range paths {
		e, err := read(filepath.Join(dir, p))
		if err != nil {
			t.Fatal(err)
		}
		got[p] = e
	}
	return got
}

func keys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

func TestStageTree(t *testing.T) {
	src := image(t, map[string]entry{"a": file(0o640, "A").owned(0, 10)}, map[string]entry{
		"run":                dir(0o755),
		"run/x":              file(0o644, "x"),
		"tmp":                dir(fs.ModeSticky | 0o777),
		"tmp/x":              file(0o644, "x"),
		"var":                dir(0o755),
		"var/lib":            dir(0o755),
		"var/lib/x":          file(0o644, "x"),
		"opt":                link("var/opt"),
		"usr":                dir(0o755),
		"usr/lib":            dir(0o755),
		"usr/lib/os-release": file(0o644, "ID=test\n"),
	})
	dst := filepath.Join(t.TempDir(), "staged")
	if err := stageTree(src, dst); err != nil {
		t.Fatal(err)
	}
	want := map[string]*entry{
		"etc":                            nil,
		"usr/etc":                        {Type: 'd', Mode: 0o755},
		"usr/etc/a":                      {Type: 'f', Mode: 0o640, GID: 10, Data: "A"},
		"run":                            {Type: 'd', Mode: 0o755},
		"run/x":                          nil,
		"tmp":                            {Type: 'd', Mode: fs.ModeSticky | 0o777},
		"tmp/x":                          nil,
		"var/lib/x":                      {Type: 'f', Mode: 0o644, Data: "x"},
		"opt":                            {Type: 'l', Mode: 0o777, Data: "var/opt"},
		"usr/lib/os-release":             {Type: 'f', Mode: 0o644, Data: "ID=test\n"},
		fakeKernelDir + "/vmlinuz":       {Type: 'f', Mode: 0o644, Data: "ostreetest fake kernel\n"},
		fakeKernelDir + "/initramfs.img": {Type: 'f', Mode: 0o644, Data: "ostreetest fake initramfs\n"},
	}
	if diff := cmp.Diff(want, readAll(t, dst, keys(want))); diff != "" {
		t.Errorf("staged tree (-want +got):\n%s", diff)
	}
	if e, err := read(filepath.Join(src, "etc", "a")); err != nil || e == nil {
		t.Errorf("source etc/a after staging = %v, %v; want it untouched", e, err)
	}
}

func TestStageTreeKeepsKernelAndOSRelease(t *testing.T) {
	src := image(t, nil, map[string]entry{
		"usr/lib/modules/6.1/vmlinuz": file(0o755, "k"),
		"etc/os-release":              link("../usr/lib/os-release"),
		"usr/lib/os-release":          file(0o644, "ID=rhcos\n"),
	})
	dst := filepath.Join(t.TempDir(), "staged")
	if err := stageTree(src, dst); err != nil {
		t.Fatal(err)
	}
	want := map[string]*entry{
		"usr/lib/modules/6.1/vmlinuz": {Type: 'f', Mode: 0o755, Data: "k"},
		fakeKernelDir:                 nil,
		"usr/lib/os-release":          {Type: 'f', Mode: 0o644, Data: "ID=rhcos\n"},
		"usr/etc/os-release":          {Type: 'l', Mode: 0o777, Data: "../usr/lib/os-release"},
	}
	if diff := cmp.Diff(want, readAll(t, dst, keys(want))); diff != "" {
		t.Errorf("staged tree (-want +got):\n%s", diff)
	}
}

func TestStageTreeErrors(t *testing.T) {
	tests := []struct {
		name  string
		other map[string]entry
		noEtc bool
	}{
		{name: "etc and usr/etc", other: map[string]entry{"usr/etc/x": file(0o644, "x")}},
		{name: "no etc", noEtc: true},
		{name: "etc is a symlink", other: map[string]entry{"etc": link("usr/etc")}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := image(t, nil, tt.other)
			if tt.noEtc {
				if err := os.Remove(filepath.Join(src, "etc")); err != nil {
					t.Fatal(err)
				}
			}
			if err := stageTree(src, filepath.Join(t.TempDir(), "staged")); err == nil {
				t.Errorf("stageTree(%s) = nil, want an error", tt.name)
			}
		})
	}
}
