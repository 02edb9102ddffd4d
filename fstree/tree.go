// Package fstree is the filesystem tree that rendering, prediction and the node read.
//
// A Tree is a directory on disk (Dir) or a base image's index; Resolve and
// Locate find where a path lands in it through its own symlinks.
package fstree

import (
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/mcbake/mcbake/internal/fspath"
	"github.com/mcbake/mcbake/manifest"
)

// Tree is the filesystem a rendering is applied to: where owner names
// resolve, presets and base unit files are read, and parent symlinks are
// followed. A directory on disk (Dir), a base image's index and the trees
// revert prediction compares with implement it. All paths are absolute and
// clean.
//
// A Tree reports I/O failures as errors; a path that does not exist is
// not an error (ok false, or an error wrapping fs.ErrNotExist from
// ReadFile).
type Tree interface {
	// Lstat describes path as lstat(2) would once the tree is on disk,
	// without following a final symlink: Type is File, Directory, Symlink
	// or manifest.Other (a hard link is the file or symlink it shares an
	// inode with), with mode, owners, a symlink's Target, and a regular
	// file's Size and Digest (trees may leave the digest out for files
	// larger than MaxContent, which no MachineConfig file can equal).
	// Parent directories are resolved through the tree's symlinks, never
	// leaving it.
	Lstat(path string) (e manifest.Entry, ok bool, err error)
	// ReadFile returns the content of the regular file at path, following
	// symlinks inside the tree. Trees may bound the size they read.
	ReadFile(path string) ([]byte, error)
	// ReadDir lists the names in the directory at path, sorted; nil when
	// there is no directory there.
	ReadDir(path string) ([]string, error)
}

// TypeStater is implemented by Trees for which a regular file's Digest is
// the dear part of Lstat (its content is read and hashed): LstatType is
// Lstat that may leave Digest out. Resolving paths and systemd's unit
// search need types, sizes and targets only, for every path they try.
type TypeStater interface {
	LstatType(path string) (e manifest.Entry, ok bool, err error)
}

// LstatType is t's LstatType when it is a TypeStater, its Lstat
// otherwise.
func LstatType(t Tree, p string) (manifest.Entry, bool, error) {
	if ts, ok := t.(TypeStater); ok {
		return ts.LstatType(p)
	}
	return t.Lstat(p)
}

// SameFiler is implemented by Trees that know which paths are one file (an
// inode): hard links. Observe uses it to recognise a hard link.
type SameFiler interface {
	// SameFile reports whether a and b are the same file; false when
	// either does not exist.
	SameFile(a, b string) (bool, error)
}

// Empty is the tree in which nothing exists.
var Empty Tree = empty{}

type empty struct{}

func (empty) Lstat(string) (manifest.Entry, bool, error) { return manifest.Entry{}, false, nil }
func (empty) ReadFile(p string) ([]byte, error) {
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}
func (empty) ReadDir(string) ([]string, error) { return nil, nil }

// Observe returns what root has at p for comparison with want
// (manifest.Compare): Lstat's view, except that when want is a hard link,
// the file at p is reported as a hard link whose Target is want.Target
// when root says they are one file (SameFiler), and with no target
// otherwise. ok is false when p does not exist.
func Observe(root Tree, p string, want manifest.Entry) (manifest.Entry, bool, error) {
	have, ok, err := root.Lstat(p)
	if err != nil || !ok || want.Type != manifest.Hardlink || have.Type != manifest.File {
		return have, ok, err
	}
	have.Type, have.Target = manifest.Hardlink, ""
	if sf, isSF := root.(SameFiler); isSF {
		same, err := sf.SameFile(p, want.Target)
		if err != nil {
			return have, ok, err
		}
		if same {
			have.Target = want.Target
		}
	}
	return have, true, nil
}

// BaseState is root's state of the owned entry e at the path it occupies
// (e.Where()): absent, the same, or which attributes differ.
func BaseState(root Tree, e manifest.Entry) (*manifest.BaseState, error) {
	have, ok, err := Observe(root, e.Where(), e)
	if err != nil {
		return nil, err
	}
	if !ok {
		return manifest.NotInBase(), nil
	}
	return manifest.StateOf(manifest.Compare(e, have)), nil
}

// MaxSymlinks is how many symlinks Resolve follows before it gives up, the
// same limit as Linux's MAXSYMLINKS.
const MaxSymlinks = 40

// ErrTooManyLinks is returned by Resolve when a path needs more than
// MaxSymlinks symlinks to resolve, which includes every symlink loop.
var ErrTooManyLinks = errors.New("too many levels of symbolic links")

// Resolve follows every symlink in p's parent directories through root's
// symlinks, keeping the last component as it is, and returns the clean
// absolute result, as the kernel resolves a path chrooted at the root:
// absolute targets start again at the root and ".." never climbs above
// it. Components that do not exist are kept literally. More than
// MaxSymlinks symlinks (a loop) is an error wrapping ErrTooManyLinks. The
// work is bounded by MaxSymlinks times the length of a target (which
// trees cap at PATH_MAX).
func Resolve(root Tree, p string) (string, error) {
	parts := fspath.Components(p)
	if len(parts) == 0 {
		return "/", nil
	}
	last := parts[len(parts)-1]
	dir, err := resolveDir(root, parts[:len(parts)-1])
	if err != nil {
		return "", &fs.PathError{Op: "resolve", Path: p, Err: err}
	}
	if last == ".." {
		return path.Dir(dir), nil
	}
	return path.Join(dir, last), nil
}

// resolveDir walks parts from the root, following every symlink.
func resolveDir(root Tree, parts []string) (string, error) {
	w := walker{root: root, cur: "/"}
	for _, c := range parts {
		if err := w.walk(c); err != nil {
			return "", err
		}
	}
	return w.cur, nil
}

// walker resolves a path one component at a time, following every
// symlink: cur is where the components walked so far lead, and links
// counts the symlinks followed on the way, as resolveDir counts them.
type walker struct {
	root  Tree
	cur   string
	links int
}

// walk steps into the component c, and through the symlinks it leads to.
func (w *walker) walk(c string) error {
	queue := []string{c}
	for len(queue) > 0 {
		c := queue[0]
		queue = queue[1:]
		if c == ".." {
			w.cur = path.Dir(w.cur)
			continue
		}
		next := path.Join(w.cur, c)
		e, ok, err := LstatType(w.root, next)
		if err != nil {
			return err
		}
		if !ok || e.Type != manifest.Symlink {
			w.cur = next
			continue
		}
		if w.links++; w.links > MaxSymlinks {
			return ErrTooManyLinks
		}
		if strings.HasPrefix(e.Target, "/") {
			w.cur = "/"
		}
		queue = append(fspath.Components(e.Target), queue...)
	}
	return nil
}

// Locate returns where an entry of type t at p lands in root: its
// parents resolved through the root's symlinks and, for a directory, its
// own path too when the root has a symlink there (as mkdir -p follows it:
// a directory /usr/local is /var/usrlocal on RHCOS).
func Locate(root Tree, p string, t manifest.Type) (string, error) {
	rp, err := Resolve(root, p)
	if err != nil || t != manifest.Directory {
		return rp, err
	}
	n, ok, err := root.Lstat(rp)
	if err != nil {
		return "", err
	}
	if ok && n.Type == manifest.Symlink {
		inside, err := Resolve(root, path.Join(rp, "x"))
		return path.Dir(inside), err
	}
	return rp, nil
}

// ResolveAncestors calls fn with each directory above the absolute, clean
// path p, outermost first and without "/", and what Resolve returns for
// it (its parents resolved, itself as it is), until fn returns false. It walks p once, where resolving each
// directory on its own would walk its every parent again: a deep path
// costs its depth, not its depth squared.
func ResolveAncestors(root Tree, p string, fn func(dir, resolved string) bool) error {
	parts := fspath.Components(p)
	w := walker{root: root, cur: "/"}
	dir := ""
	for i := 0; i < len(parts)-1; i++ {
		dir += "/" + parts[i]
		if i > 0 {
			if err := w.walk(parts[i-1]); err != nil {
				return &fs.PathError{Op: "resolve", Path: dir, Err: err}
			}
		}
		if !fn(dir, path.Join(w.cur, parts[i])) {
			return nil
		}
	}
	return nil
}
