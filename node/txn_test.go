package node

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/testing/roottest"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// TestTxnRollbackLabels: a failed transaction puts back the mode, owner
// and SELinux context of the existing directories it changed, removing
// a context one did not have (on a host without SELinux the xattr is
// stored as given, and a new directory has none).
func TestTxnRollbackLabels(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	mustMkdir(t, filepath.Join(rootDir, "etc", "labelled"), 0o755)
	mustMkdir(t, filepath.Join(rootDir, "etc", "bare"), 0o755)
	if err := unix.Lsetxattr(filepath.Join(rootDir, "etc", "labelled"), xattrSELinux, []byte("system_u:object_r:old_t:s0\x00"), 0); err != nil {
		t.Skipf("no security.selinux xattrs here: %v", err)
	}
	label := func(p string) string {
		buf := make([]byte, 256)
		n, err := unix.Lgetxattr(filepath.Join(rootDir, p), xattrSELinux, buf)
		if errors.Is(err, unix.ENODATA) {
			return ""
		}
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimRight(string(buf[:n]), "\x00")
	}
	before, bareBefore := roottest.Tree(t, rootDir), label("etc/bare")
	boom := errors.New("injected failure")
	tx := &txn{root: r, failAt: func(i int) error {
		if i == 2 {
			return boom
		}
		return nil
	}}
	dir := func(p string) render.Entry {
		return render.Entry{Entry: manifest.Entry{Path: p, Type: manifest.Directory, Mode: 0o700, UID: 1000, GID: 1000}}
	}
	tx.add("/etc/labelled", dir("/etc/labelled"), "system_u:object_r:new_t:s0")
	tx.add("/etc/bare", dir("/etc/bare"), "system_u:object_r:new_t:s0")
	tx.add("/etc/f", render.Entry{Entry: manifest.Entry{Path: "/etc/f", Type: manifest.File, Mode: 0o644}}, "system_u:object_r:new_t:s0")
	if err := tx.run(); !errors.Is(err, boom) {
		t.Fatalf("run = %v, want the injected failure", err)
	}
	for _, w := range tx.writes[:2] {
		if !w.commited {
			t.Fatalf("%s was not committed before the failure: the test proves nothing", w.path)
		}
	}
	if diff := cmp.Diff(before, roottest.Tree(t, rootDir)); diff != "" {
		t.Errorf("a failed transaction left changes (-before +after):\n%s", diff)
	}
	if got := label("etc/labelled"); got != "system_u:object_r:old_t:s0" {
		t.Errorf("etc/labelled's context after the rollback = %q, want the old one", got)
	}
	if got := label("etc/bare"); got != bareBefore {
		t.Errorf("etc/bare's context after the rollback = %q, want %q as before", got, bareBefore)
	}
}

// TestTxnRollbackUntouched: a rollback leaves alone the writes the
// transaction never began (below a directory it could not make, say):
// they are old, not unknown, and the error is the failure alone.
func TestTxnRollbackUntouched(t *testing.T) {
	requireRoot(t)
	rootDir, _, r := setup(t)
	if err := os.WriteFile(filepath.Join(rootDir, "etc", "in-the-way"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	tx := &txn{root: r}
	tx.add("/etc/a.conf", render.Entry{Entry: manifest.Entry{Path: "/etc/a.conf", Type: manifest.File, Mode: 0o644}}, "")
	tx.add("/etc/in-the-way/sub", render.Entry{Entry: manifest.Entry{Path: "/etc/in-the-way/sub", Type: manifest.Directory, Mode: 0o755}}, "")
	tx.add("/etc/in-the-way/sub/f", render.Entry{Entry: manifest.Entry{Path: "/etc/in-the-way/sub/f", Type: manifest.File, Mode: 0o644}}, "")
	err := tx.run()
	if err == nil || strings.Contains(err.Error(), "restoring") {
		t.Errorf("run = %v, want the failure to make the directory alone", err)
	}
	for _, w := range tx.writes {
		if w.state != StateOld {
			t.Errorf("%s: state %s, want old", w.path, w.state)
		}
	}
}
