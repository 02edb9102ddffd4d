package node

import (
	"errors"
	"fmt"
	"os"
	"path"
	"regexp"
	"slices"
	"sort"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// State says whether a path of a transaction holds its old or its new
// entry once the transaction is over.
type State string

// States.
const (
	StateNew State = "new"
	StateOld State = "old"
	// StateUnknown: the transaction failed and putting the old entry back
	// failed too (the error says how).
	StateUnknown State = "unknown"
)

// txnWrite is one path a transaction makes what entry says.
type txnWrite struct {
	// root is the root the path is in: the transaction's, or another
	// (the stateroot's /var, say) whose writes commit with it.
	root  *Root
	path  string
	entry render.Entry
	// label is the SELinux context to give the path, "" for none.
	label string

	tmp     string // the new entry, prepared under a temporary name
	backup  string // the old entry, kept under a temporary name
	created bool   // a directory the transaction made
	restore *manifest.Entry
	// oldLabel is an existing directory's SELinux context before the
	// commit ("" for none), put back by a rollback.
	oldLabel string
	commited bool
	state    State
}

// txn writes several paths of a Root so that, whatever fails, each of them
// ends either old or new and the caller knows which: it prepares every
// new entry first (files and symlinks under temporary names in their
// directories, missing directories made), then puts them in place one
// rename each, keeping the old entries under temporary names; on a
// failure it renames the old entries back. Only then are the old entries
// deleted. The paths may lie in several roots (see addIn): they commit
// and roll back together. The prepared entries are made durable before
// the first rename, and the renames before the old entries are deleted,
// with one syncfs(2) a root each time instead of a fsync a file and a
// directory (100,000 paths: seconds instead of minutes).
type txn struct {
	root   *Root
	writes []*txnWrite
	// byKey finds a queued write by root and path.
	byKey map[txnKey]*txnWrite
	// dirs are the parent directories open during run, by root and path:
	// each is opened once, and synced with its filesystem (see sync).
	dirs map[txnKey]int
	// failAt, when set, makes the commit of the write with that index
	// fail (tests inject failures with it).
	failAt func(i int) error
}

// add queues a write of e at p (e's type Absent removes p), replacing an
// earlier one of the same path.
func (t *txn) add(p string, e render.Entry, label string) {
	t.addIn(t.root, p, e, label)
}

// txnKey names a path of one root.
type txnKey struct {
	root *Root
	path string
}

// addIn is add for a path in root, which need not be the transaction's.
func (t *txn) addIn(root *Root, p string, e render.Entry, label string) {
	w := &txnWrite{root: root, path: clean(p), entry: e, label: label, state: StateOld}
	if t.byKey == nil {
		t.byKey = map[txnKey]*txnWrite{}
	}
	k := txnKey{root, w.path}
	if old, ok := t.byKey[k]; ok {
		t.writes[slices.Index(t.writes, old)] = w
	} else {
		t.writes = append(t.writes, w)
	}
	t.byKey[k] = w
}

// queued reports whether a write of p (in the transaction's root) is
// queued.
func (t *txn) queued(p string) bool { return t.queuedIn(t.root, p) }

// queuedIn reports whether a write of p in root is queued.
func (t *txn) queuedIn(root *Root, p string) bool {
	_, ok := t.byKey[txnKey{root, p}]
	return ok
}

// run prepares and commits every write; on error every path is old again
// (or unknown, when restoring failed). Directories come first, parents
// before children, hard links last.
func (t *txn) run() error {
	sort.SliceStable(t.writes, func(i, j int) bool { return order(t.writes[i]) < order(t.writes[j]) })
	// One writer at a time per root; under the lock, any temporary entry
	// is a dead run's leftover.
	for _, r := range t.roots() {
		unlock, err := r.lock()
		if err != nil {
			return err
		}
		defer unlock()
	}
	defer t.closeDirs()
	t.sweep()
	// The prepared entries are on disk before the first rename, and the
	// renames before the old entries go: one syncfs a root each time,
	// rather than a fsync a file and a directory.
	err := t.prepare()
	if err == nil {
		err = t.sync()
	}
	if err == nil {
		err = t.commit()
	}
	if err != nil {
		return errors.Join(err, t.rollback(), t.sync())
	}
	if err := t.sync(); err != nil {
		return err
	}
	return errors.Join(t.finish(), t.sync())
}

// inDir runs fn with the open parent directory of w's path and the
// path's base name, the directory opened (inside w's root) the first
// time and kept open until the run ends.
func (t *txn) inDir(w *txnWrite, fn func(dfd int, name string) error) error {
	dir, name, err := split(w.path)
	if err != nil {
		return err
	}
	if t.dirs == nil {
		t.dirs = map[txnKey]int{}
	}
	k := txnKey{w.root, dir}
	dfd, ok := t.dirs[k]
	if !ok {
		if dfd, err = w.root.openDir(dir); err != nil {
			return err
		}
		t.dirs[k] = dfd
	}
	if err := fn(dfd, name); err != nil {
		return &os.PathError{Op: "write", Path: w.path, Err: err}
	}
	return nil
}

// sync flushes the filesystem of every root the transaction writes
// (syncfs(2)): what is written so far is on disk.
func (t *txn) sync() error {
	var errs []error
	for _, r := range t.roots() {
		if err := unix.Syncfs(r.FD()); err != nil {
			errs = append(errs, &os.PathError{Op: "syncfs", Path: r.Path(), Err: err})
		}
	}
	return errors.Join(errs...)
}

// closeDirs closes the directories inDir opened.
func (t *txn) closeDirs() {
	for k, fd := range t.dirs {
		unix.Close(fd)
		delete(t.dirs, k)
	}
}

// roots are the roots the writes are in, the transaction's first.
func (t *txn) roots() []*Root {
	out := []*Root{t.root}
	for _, w := range t.writes {
		if !slices.Contains(out, w.root) {
			out = append(out, w.root)
		}
	}
	return out
}

// order sorts directories first (by path), then everything else, hard
// links last.
func order(w *txnWrite) string {
	switch w.entry.Type {
	case manifest.Directory:
		return "0" + w.path
	case manifest.Hardlink:
		return "2" + w.path
	}
	return "1" + w.path
}

func (t *txn) prepare() error {
	for _, w := range t.writes {
		if err := t.prepareOne(w); err != nil {
			return &os.PathError{Op: "prepare", Path: w.path, Err: err}
		}
	}
	return nil
}

func (t *txn) prepareOne(w *txnWrite) error {
	e := w.entry
	return t.inDir(w, func(dfd int, name string) error {
		old, ok, err := lstatAt(dfd, name)
		if err != nil {
			return err
		}
		if ok && old.Type == manifest.Directory && e.Type != manifest.Directory && e.Type != manifest.Absent {
			return errors.New("a directory is in the way")
		}
		switch e.Type {
		case manifest.Directory:
			return t.prepareDir(dfd, name, w, old, ok)
		case manifest.File:
			w.tmp = tempName(name)
			return t.writeTemp(dfd, w)
		case manifest.Symlink:
			w.tmp = tempName(name)
			if err := unix.Symlinkat(e.Target, dfd, w.tmp); err != nil {
				return err
			}
			if err := unix.Fchownat(dfd, w.tmp, e.UID, e.GID, unix.AT_SYMLINK_NOFOLLOW); err != nil {
				return err
			}
			return setLabel(dfd, w.tmp, w.label)
		case manifest.Hardlink:
			w.tmp = tempName(name)
			return t.linkTemp(dfd, w)
		case manifest.Absent:
			return nil
		}
		return fmt.Errorf("unknown entry type %q", e.Type)
	})
}

// lstatAt is the type, mode and owners of name in the directory dfd,
// not following a symlink; false when there is none.
func lstatAt(dfd int, name string) (manifest.Entry, bool, error) {
	var st unix.Stat_t
	err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW)
	if errors.Is(err, unix.ENOENT) {
		return manifest.Entry{}, false, nil
	}
	if err != nil {
		return manifest.Entry{}, false, err
	}
	e := manifest.Entry{Type: manifest.Other, Mode: manifest.Mode(st.Mode & 0o7777), UID: int(st.Uid), GID: int(st.Gid)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type = manifest.File
	case unix.S_IFDIR:
		e.Type = manifest.Directory
	case unix.S_IFLNK:
		e.Type = manifest.Symlink
	}
	return e, true, nil
}

// prepareDir makes a missing directory, or remembers an existing one's
// metadata to change at commit.
func (t *txn) prepareDir(dfd int, name string, w *txnWrite, old manifest.Entry, exists bool) error {
	e := w.entry
	if exists {
		if old.Type != manifest.Directory {
			return fmt.Errorf("a %s is in the way", old.Type)
		}
		w.restore = &old
		if w.label != "" {
			l, err := getLabel(dfd, name)
			if err != nil {
				return err
			}
			w.oldLabel = l
		}
		return nil
	}
	if err := mkdirAt(dfd, name, uint32(e.Mode), e.UID, e.GID, w.label); err != nil {
		return err
	}
	w.created, w.state = true, StateNew
	return nil
}

// writeTemp writes a file's new content under its temporary name.
func (t *txn) writeTemp(dfd int, w *txnWrite) (err error) {
	e := w.entry
	fd, err := unix.Openat(dfd, w.tmp, unix.O_WRONLY|unix.O_CREAT|unix.O_EXCL|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0o600)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(fd), w.tmp)
	defer func() { err = errors.Join(err, f.Close()) }()
	if err := writeContent(f, e.Content, uint32(e.Mode), e.UID, e.GID); err != nil {
		return err
	}
	return setLabelFD(fd, w.label)
}

// linkTemp makes a hard link to the link's target under its temporary
// name; a target written by this transaction is linked in its prepared
// form, so both end as one inode.
func (t *txn) linkTemp(dfd int, w *txnWrite) error {
	target := clean(w.entry.Target)
	if o, ok := t.byKey[txnKey{w.root, target}]; ok && o.tmp != "" {
		target = path.Join(path.Dir(target), o.tmp)
	}
	tdir, tname, err := split(target)
	if err != nil {
		return err
	}
	tfd, err := w.root.openDir(tdir)
	if err != nil {
		return err
	}
	defer unix.Close(tfd)
	return unix.Linkat(tfd, tname, dfd, w.tmp, 0)
}

func (t *txn) commit() error {
	for i, w := range t.writes {
		if t.failAt != nil {
			if err := t.failAt(i); err != nil {
				return err
			}
		}
		if err := t.inDir(w, func(dfd int, name string) error { return t.commitOne(dfd, name, w) }); err != nil {
			return err
		}
	}
	return nil
}

// commitOne puts w's new entry in place, keeping the old one.
func (t *txn) commitOne(dfd int, name string, w *txnWrite) error {
	if w.entry.Type == manifest.Directory {
		if w.restore == nil {
			return nil // made by prepare
		}
		w.commited, w.state = true, StateNew
		e := w.entry
		return setDirMeta(dfd, name, uint32(e.Mode), e.UID, e.GID, w.label)
	}
	var st unix.Stat_t
	exists := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW) == nil
	if exists {
		w.backup = backupName(name)
		// A hard link keeps the old entry (a symlink, not its target)
		// while the rename replaces the name in one step.
		if err := unix.Linkat(dfd, name, dfd, w.backup, 0); err != nil {
			return err
		}
	}
	w.commited = true
	if w.entry.Type == manifest.Absent {
		if exists {
			if err := unix.Unlinkat(dfd, name, 0); err != nil {
				return err
			}
		}
		w.state = StateNew
		return nil
	}
	if err := unix.Renameat(dfd, w.tmp, dfd, name); err != nil {
		return err
	}
	w.tmp, w.state = "", StateNew
	return nil
}

// setDirMeta gives the existing directory name its mode, owners and label
// ("" leaves the label), through the directory itself, opened without
// following a symlink, so that nothing swapped in is changed in its place.
func setDirMeta(dfd int, name string, mode uint32, uid, gid int, label string) error {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	if err := unix.Fchown(fd, uid, gid); err != nil {
		return err
	}
	if err := unix.Fchmod(fd, mode&0o7777); err != nil {
		return err
	}
	return setLabelFD(fd, label)
}

// rollback puts every committed path back as it was, removes prepared
// temporary entries and the directories the transaction made; a write
// it never began is left alone, old.
func (t *txn) rollback() error {
	var errs []error
	for i := len(t.writes) - 1; i >= 0; i-- {
		w := t.writes[i]
		if w.tmp == "" && !w.created && !w.commited {
			continue // never begun: its parent may not even exist
		}
		err := t.inDir(w, func(dfd int, name string) error { return t.undo(dfd, name, w) })
		if err != nil {
			w.state = StateUnknown
			errs = append(errs, fmt.Errorf("restoring %s: %w", w.path, err))
		}
	}
	return errors.Join(errs...)
}

func (t *txn) undo(dfd int, name string, w *txnWrite) error {
	if w.tmp != "" {
		_ = unix.Unlinkat(dfd, w.tmp, 0)
		w.tmp = ""
	}
	switch {
	case w.entry.Type == manifest.Directory && w.created:
		if err := unix.Unlinkat(dfd, name, unix.AT_REMOVEDIR); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	case w.entry.Type == manifest.Directory && w.commited:
		if err := setDirMeta(dfd, name, uint32(w.restore.Mode), w.restore.UID, w.restore.GID, ""); err != nil {
			return err
		}
		if w.label != "" && w.oldLabel != w.label {
			if err := restoreLabel(dfd, name, w.oldLabel); err != nil {
				return err
			}
		}
	case w.commited && w.backup != "":
		if err := unix.Renameat(dfd, w.backup, dfd, name); err != nil {
			return err
		}
		w.backup = ""
	case w.commited:
		if err := unix.Unlinkat(dfd, name, 0); err != nil && !errors.Is(err, unix.ENOENT) {
			return err
		}
	}
	w.state = StateOld
	return nil
}

// finish deletes the old entries kept during the commit (run syncs the
// filesystem after it).
func (t *txn) finish() error {
	var errs []error
	for _, w := range t.writes {
		if w.backup == "" {
			continue
		}
		err := t.inDir(w, func(dfd int, name string) error {
			err := unix.Unlinkat(dfd, w.backup, 0)
			w.backup = ""
			return err
		})
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

func backupName(name string) string { return tempName(name + ".old") }

// tempPattern matches the temporary names of tempName and backupName.
var tempPattern = regexp.MustCompile(`^\..+\.mcbake-[0-9a-f]{12}$`)

// sweep removes the temporary entries a killed run left in the
// directories this transaction writes into.
func (t *txn) sweep() {
	type rootDir struct {
		root *Root
		dir  string
	}
	seen := map[rootDir]bool{}
	for _, w := range t.writes {
		dir := path.Dir(w.path)
		if seen[rootDir{w.root, dir}] {
			continue
		}
		seen[rootDir{w.root, dir}] = true
		dfd, err := w.root.openDir(dir)
		if err != nil {
			continue
		}
		sweepTemp(dfd, func(string) bool { return true })
		unix.Close(dfd)
	}
}
