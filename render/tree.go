package render

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/manifest"
)

// WriteOptions say how WriteTree and WriteEntries write.
type WriteOptions struct {
	// Chown applies the entries' owners (it needs root).
	Chown bool
}

// WriteTree writes the rendered entries under dir/rootfs (at their resolved
// paths) and the manifest to dir/manifest.json. Owners are applied with
// o.Chown. The output is built in a temporary
// sibling of dir and moved into place at the end, replacing dir (with an
// atomic exchange where the filesystem supports it); on error nothing is
// left behind and an earlier dir is kept. dir must be absent, empty, or an
// earlier WriteTree output (only rootfs and manifest.json): WriteTree never
// replaces anything else. Writing never follows a symlink inside rootfs.
// Absent entries and hard links whose target is not a rendered file are
// recorded in the manifest only. It stops, leaving nothing behind, when
// ctx is done.
func WriteTree(ctx context.Context, dir string, res *Result, m *manifest.Manifest, o WriteOptions) error {
	return atomicdir.Build(dir, "render output", []string{"rootfs", "manifest.json"}, func(tmp string) error {
		if err := WriteEntries(ctx, filepath.Join(tmp, "rootfs"), res.Entries, o); err != nil {
			return err
		}
		b, err := manifest.Marshal(m)
		if err != nil {
			return err
		}
		return writeNew(filepath.Join(tmp, "manifest.json"), b, 0o644)
	})
}

// WriteEntries writes entries into the directory rootfs (created 0755
// when missing), each at the path it occupies (Where), parents first;
// missing parent directories are created 0755 and no write ever follows a
// symlink. Owners are set with o.Chown (it needs root), file modes
// after the chown (which clears setuid and setgid). A hard link is made
// once the file it names (by the path that file occupies) is written, and
// skipped when WriteEntries does not write that file; directory modes are
// set last, deepest first, so that a read-only directory does not stop
// its children from being written. Absent entries are skipped. It is the
// one tree writer: render output and build contexts both use it. It stops
// at the first entry it reaches once ctx is done, returning ctx's error.
func WriteEntries(ctx context.Context, rootfs string, entries []Entry, o WriteOptions) error {
	sorted := append([]Entry(nil), entries...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Where() < sorted[j].Where() })
	if err := os.MkdirAll(rootfs, 0o755); err != nil {
		return err
	}
	w := &treeWriter{rootfs: rootfs, dirs: map[string]bool{}}
	files := map[string]bool{} // where regular files were written
	var hard, dirs []Entry
	for _, e := range sorted {
		if err := ctx.Err(); err != nil {
			return err
		}
		switch e.Type {
		case manifest.Absent:
			continue
		case manifest.Hardlink:
			hard = append(hard, e)
			continue
		}
		if err := w.writeEntry(e, o.Chown); err != nil {
			return fmt.Errorf("writing %s: %w", e.Where(), err)
		}
		switch e.Type {
		case manifest.File:
			files[e.Where()] = true
		case manifest.Directory:
			dirs = append(dirs, e)
		}
	}
	for _, e := range hard {
		if err := w.writeHardlink(e, files); err != nil {
			return fmt.Errorf("writing %s: %w", e.Where(), err)
		}
	}
	// Directory modes last, deepest first, so that a read-only directory
	// does not stop its children from being written.
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(filepath.Join(rootfs, dirs[i].Where()), fileMode(uint32(dirs[i].Mode))); err != nil {
			return fmt.Errorf("writing %s: %w", dirs[i].Where(), err)
		}
	}
	return nil
}

// treeWriter writes entries under rootfs. dirs are the image paths known
// to be real directories there (checked, or made by the writer): nothing
// it writes later can turn one into a symlink, so a path below one is not
// checked again, and a deep tree costs one check per directory, not one
// per directory and entry.
type treeWriter struct {
	rootfs string
	dirs   map[string]bool
}

// hostPath returns where the image path p lives under rootfs, after
// checking that p is absolute and clean and that its parent directories
// exist (created 0755 when missing) without crossing a symlink.
func (w *treeWriter) hostPath(p string) (string, error) {
	if !cleanAbs(p) || p == "/" {
		return "", fmt.Errorf("path %q is not absolute and clean", p)
	}
	if dir := path.Dir(p); !w.dirs[dir] {
		parent := filepath.Join(w.rootfs, dir)
		safe, err := securejoin.SecureJoin(w.rootfs, dir)
		if err != nil {
			return "", err
		}
		if safe != parent {
			return "", fmt.Errorf("a parent directory of %s is a symlink", p)
		}
		if err := os.MkdirAll(parent, 0o755); err != nil {
			return "", err
		}
		for d := dir; d != "/" && !w.dirs[d]; d = path.Dir(d) {
			w.dirs[d] = true
		}
	}
	return filepath.Join(w.rootfs, p), nil
}

func (w *treeWriter) writeEntry(e Entry, chown bool) error {
	p, err := w.hostPath(e.Where())
	if err != nil {
		return err
	}
	switch e.Type {
	case manifest.File:
		err = writeNew(p, e.Content, 0o600)
	case manifest.Directory:
		if err = mkdirNoFollow(p); err == nil {
			w.dirs[e.Where()] = true
		}
	case manifest.Symlink:
		err = os.Symlink(e.Target, p)
	default:
		err = fmt.Errorf("unknown entry type %q", e.Type)
	}
	if err != nil {
		return err
	}
	if chown {
		if err := os.Lchown(p, e.UID, e.GID); err != nil {
			return err
		}
	}
	if e.Type == manifest.File {
		return os.Chmod(p, fileMode(uint32(e.Mode)))
	}
	return nil
}

// fileMode converts Unix permission bits (07777) to an os.FileMode.
func fileMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return mode
}

// writeNew creates the regular file p (never following a symlink, never
// replacing anything) with data and mode, applied with chmod so the umask
// does not interfere.
func writeNew(p string, data []byte, mode os.FileMode) (err error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Chmod(mode)
}

// mkdirNoFollow creates the directory p, accepting an existing directory
// (a parent created for an earlier entry) but not a symlink to one.
func mkdirNoFollow(p string) error {
	err := os.Mkdir(p, 0o700)
	if err == nil || !errors.Is(err, os.ErrExist) {
		return err
	}
	fi, lerr := os.Lstat(p)
	if lerr != nil {
		return lerr
	}
	if !fi.IsDir() {
		return err
	}
	return nil
}

// writeHardlink links e to the written file it names; a target that was
// not written (one only the root has) is skipped.
func (w *treeWriter) writeHardlink(e Entry, files map[string]bool) error {
	if !files[e.Target] {
		return nil
	}
	p, err := w.hostPath(e.Where())
	if err != nil {
		return err
	}
	return os.Link(filepath.Join(w.rootfs, e.Target), p)
}
