package node

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"strings"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/fstree"
)

// Root is a node's root filesystem, or an ostree deployment's, mounted at a
// host directory: a fstree.Dir (reads through openat2 with RESOLVE_IN_ROOT,
// never leaving the directory) with atomic writes. Every write goes
// through a parent directory opened inside the root and names a single
// component in it; files and symlinks are written to a temporary name in
// the same directory, fsynced, renamed over the destination and the
// directory fsynced, so a crash leaves either the old or the new entry.
// Close it when done.
type Root struct {
	*fstree.Dir
}

// Open opens dir as a root.
func Open(dir string) (*Root, error) {
	d, err := fstree.Open(dir)
	if err != nil {
		return nil, err
	}
	return &Root{Dir: d}, nil
}

// openDir opens the directory dir (absolute, inside the root) with every
// symlink resolved inside the root.
func (r *Root) openDir(dir string) (int, error) {
	return r.OpenIn(dir, unix.O_RDONLY|unix.O_DIRECTORY)
}

// clean returns p as an absolute, clean path inside the root: ".."
// cannot climb above "/".
func clean(p string) string { return path.Clean("/" + p) }

// split returns the parent directory and the name of the path p, which
// must not be the root itself: every write goes through a parent
// directory opened inside the root, and the name is a single component
// (never "..", never absolute).
func split(p string) (dir, name string, err error) {
	c := clean(p)
	if c == "/" {
		return "", "", &os.PathError{Op: "resolve", Path: p, Err: errors.New("the root directory itself cannot be written")}
	}
	return path.Dir(c), path.Base(c), nil
}

// MkdirAll creates dir and its missing parents inside the root. Missing
// directories get mode and uid/gid from parent (called with each missing
// path, outermost first).
func (r *Root) MkdirAll(dir string, parent func(p string) (mode uint32, uid, gid int)) error {
	cur := "/"
	for _, c := range strings.Split(strings.Trim(clean(dir), "/"), "/") {
		if c == "" {
			continue
		}
		next := path.Join(cur, c)
		if _, err := r.openDirClose(next); err == nil {
			cur = next
			continue
		} else if !errors.Is(err, unix.ENOENT) {
			return err
		}
		mode, uid, gid := parent(next)
		if err := r.Mkdir(next, mode, uid, gid); err != nil {
			return err
		}
		cur = next
	}
	return nil
}

func (r *Root) openDirClose(dir string) (struct{}, error) {
	fd, err := r.openDir(dir)
	if err == nil {
		unix.Close(fd)
	}
	return struct{}{}, err
}

// withDir runs fn with the open parent directory of p and p's base name,
// then fsyncs the directory.
func (r *Root) withDir(p string, fn func(dfd int, name string) error) error {
	dir, name, err := split(p)
	if err != nil {
		return err
	}
	dfd, err := r.openDir(dir)
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := fn(dfd, name); err != nil {
		return &os.PathError{Op: "write", Path: p, Err: err}
	}
	return unix.Fsync(dfd)
}

// Mkdir makes the directory p, or sets its mode and owner if it exists.
// An existing non-directory (a symlink included) is an error. A missing
// directory appears with its mode and owner already set (see mkdirAt),
// and the temporary entries of p that killed runs left are removed
// first: a caller that may run beside another writer of the root holds
// its lock.
func (r *Root) Mkdir(p string, mode uint32, uid, gid int) error {
	return r.withDir(p, func(dfd int, name string) error {
		var st unix.Stat_t
		if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); errors.Is(err, unix.ENOENT) {
			sweepTemp(dfd, func(n string) bool { return isTempOf(n, name) })
			if err := mkdirAt(dfd, name, mode, uid, gid, ""); !errors.Is(err, unix.EEXIST) {
				return err
			}
		} else if err != nil {
			return err
		}
		err := setDirMeta(dfd, name, mode, uid, gid, "")
		if errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP) {
			return errors.New("exists and is not a directory")
		}
		return err
	})
}

// rename renames p to the name of newPath, in the same directory.
func (r *Root) rename(p, newPath string) error {
	if path.Dir(clean(p)) != path.Dir(clean(newPath)) {
		return fmt.Errorf("rename %s to %s: not in one directory", p, newPath)
	}
	return r.withDir(p, func(dfd int, name string) error {
		return unix.Renameat(dfd, name, dfd, path.Base(newPath))
	})
}

// lock takes the root's writer lock (flock on the root directory): one
// writer at a time, so that under the lock any temporary entry is a dead
// run's leftover.
func (r *Root) lock() (unlock func(), err error) {
	if err := unix.Flock(r.FD(), unix.LOCK_EX); err != nil {
		return nil, &os.PathError{Op: "flock", Path: r.Path(), Err: err}
	}
	return func() { _ = unix.Flock(r.FD(), unix.LOCK_UN) }, nil
}

// mkdirAt makes the directory name in dfd so that it never exists with
// other metadata than its own, whenever the process dies: it is made
// under a temporary name (mode 0700), given its owner, mode and label
// there, and renamed into place without replacing anything (EEXIST when
// name exists). A killed run leaves only the empty temporary directory,
// which sweepTemp removes.
func mkdirAt(dfd int, name string, mode uint32, uid, gid int, label string) error {
	tmp := tempName(name)
	if err := unix.Mkdirat(dfd, tmp, 0o700); err != nil {
		return err
	}
	err := setDirMeta(dfd, tmp, mode, uid, gid, label)
	if err == nil {
		if beforeRename != nil {
			beforeRename(tmp)
		}
		err = unix.Renameat2(dfd, tmp, dfd, name, unix.RENAME_NOREPLACE)
		if errors.Is(err, unix.EINVAL) {
			// A filesystem without RENAME_NOREPLACE (NFS, some FUSE):
			// the caller found name missing under the root's lock, and a
			// rename onto anything but an empty directory fails.
			err = unix.Renameat(dfd, tmp, dfd, name)
		}
	}
	if err != nil {
		_ = unix.Unlinkat(dfd, tmp, unix.AT_REMOVEDIR)
	}
	return err
}

// beforeRename, when set, is called by mkdirAt with the temporary name
// just before the rename (tests look at the root then).
var beforeRename func(tmp string)

// sweepTemp removes from the directory dfd the temporary entries
// (tempPattern) of dead runs whose names match: files, symlinks and
// empty directories; a directory with anything in it is left alone.
func sweepTemp(dfd int, match func(name string) bool) {
	fd, err := unix.Openat(dfd, ".", unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return
	}
	f := os.NewFile(uintptr(fd), ".")
	defer f.Close()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return
	}
	removed := false
	for _, n := range names {
		if !tempPattern.MatchString(n) || !match(n) {
			continue
		}
		err := unix.Unlinkat(dfd, n, 0)
		if errors.Is(err, unix.EISDIR) {
			err = unix.Unlinkat(dfd, n, unix.AT_REMOVEDIR)
		}
		removed = removed || err == nil
	}
	if removed {
		_ = unix.Fsync(dfd)
	}
}

// WriteFile atomically replaces p with a regular file.
func (r *Root) WriteFile(p string, content []byte, mode uint32, uid, gid int) error {
	return r.withDir(p, func(dfd int, name string) error {
		tmp := tempName(name)
		fd, err := unix.Openat(dfd, tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
		if err != nil {
			return err
		}
		f := os.NewFile(uintptr(fd), tmp)
		err = writeAll(f, content, mode, uid, gid)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return renameInto(dfd, tmp, name, err)
	})
}

// writeAll writes a new file's content, owners and mode, and fsyncs it.
func writeAll(f *os.File, content []byte, mode uint32, uid, gid int) error {
	if err := writeContent(f, content, mode, uid, gid); err != nil {
		return err
	}
	return f.Sync()
}

// writeContent is writeAll without the fsync, for a caller that syncs
// the filesystem once for many files (see txn.sync).
func writeContent(f *os.File, content []byte, mode uint32, uid, gid int) error {
	if _, err := f.Write(content); err != nil {
		return err
	}
	if err := f.Chown(uid, gid); err != nil {
		return err
	}
	// After the chown, which clears setuid and setgid; unix.Fchmod keeps
	// them and the sticky bit, which os.FileMode's permission bits lack.
	return unix.Fchmod(int(f.Fd()), mode&0o7777)
}

// renameInto renames tmp over name, or removes tmp when err is set.
func renameInto(dfd int, tmp, name string, err error) error {
	if err == nil {
		err = unix.Renameat(dfd, tmp, dfd, name)
	}
	if err != nil {
		unix.Unlinkat(dfd, tmp, 0)
	}
	return err
}

// Symlink atomically replaces p with a symlink to target.
func (r *Root) Symlink(p, target string, uid, gid int) error {
	return r.withDir(p, func(dfd int, name string) error {
		tmp := tempName(name)
		if err := unix.Symlinkat(target, dfd, tmp); err != nil {
			return err
		}
		err := unix.Fchownat(dfd, tmp, uid, gid, unix.AT_SYMLINK_NOFOLLOW)
		return renameInto(dfd, tmp, name, err)
	})
}

// Link atomically replaces p with a hard link to the file at target.
func (r *Root) Link(p, target string) error {
	tdir, tname, err := split(target)
	if err != nil {
		return err
	}
	tfd, err := r.openDir(tdir)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	return r.withDir(p, func(dfd int, name string) error {
		tmp := tempName(name)
		if err := unix.Linkat(tfd, tname, dfd, tmp, 0); err != nil {
			return err
		}
		return renameInto(dfd, tmp, name, nil)
	})
}

// Remove removes the non-directory p if it exists (a missing parent
// directory means it does not).
func (r *Root) Remove(p string) error {
	dir, name, err := split(p)
	if err != nil {
		return err
	}
	dfd, err := r.openDir(dir)
	if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
		return nil
	}
	if err != nil {
		return err
	}
	defer unix.Close(dfd)
	if err := unix.Unlinkat(dfd, name, 0); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return &os.PathError{Op: "remove", Path: p, Err: err}
	}
	return unix.Fsync(dfd)
}

// isTempOf reports whether n is a temporary name tempName(name) gives.
func isTempOf(n, name string) bool {
	return strings.HasPrefix(n, "."+tempStem(name)+".mcbake-") && tempPattern.MatchString(n)
}

// tempName is a random temporary name for name in its directory. It
// keeps at most the first tempStemMax bytes of name, so that it is no
// longer than NAME_MAX for any name that is.
func tempName(name string) string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf(".%s.mcbake-%s", tempStem(name), hex.EncodeToString(b[:]))
}

// tempStemMax leaves room in NAME_MAX (255) for tempName's 21 bytes of
// its own and backupName's ".old".
const tempStemMax = 200

func tempStem(name string) string { return name[:min(len(name), tempStemMax)] }
