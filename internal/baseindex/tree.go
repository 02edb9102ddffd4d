package baseindex

import (
	"io/fs"
	"path"
	"strings"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/manifest"
)

// Tree is the Index seen as a fstree.Tree: the image's merged filesystem
// as a node sees it once the image is extracted. It also implements
// fstree.TypeStater, and fstree.SameFiler with the image's hard links.
// Every method returns the Index's Err, if any, rather than what it found.
func (ix *Index) Tree() fstree.Tree { return tree{ix} }

// tree is an Index's Tree.
type tree struct{ ix *Index }

func rel(p string) string { return strings.TrimPrefix(p, "/") }

// Entry is the node as lstat(2) would describe its path once the image is
// extracted: a hard link (ostree-ext bases hard-link every path to its
// object) is the file or symlink it shares an inode with, with that
// file's size and digest. Devices and fifos are manifest.Other. A
// deferred digest is not there: the Tree's Lstat computes it.
func (n *Node) Entry() manifest.Entry {
	t, target := n.Lstat()
	e := manifest.Entry{Path: "/" + n.Path, Mode: manifest.Mode(n.Mode), UID: int(n.UID), GID: int(n.GID), Target: target}
	switch t {
	case Dir:
		e.Type = manifest.Directory
	case Symlink:
		e.Type = manifest.Symlink
	case File:
		e.Type, e.Size, e.Digest = manifest.File, n.Size, n.Digest.Digest()
	default:
		e.Type = manifest.Other
	}
	return e
}

// Lstat implements fstree.Tree. Parent directories are resolved through
// the image's symlinks first.
func (r tree) Lstat(p string) (manifest.Entry, bool, error) { return r.lstat(p, true) }

// LstatType implements fstree.TypeStater: Lstat without computing a
// deferred digest (a containers-storage file's, read from the unpacked
// layer).
func (r tree) LstatType(p string) (manifest.Entry, bool, error) { return r.lstat(p, false) }

func (r tree) lstat(p string, digest bool) (manifest.Entry, bool, error) {
	n, ok, err := r.node(p)
	if err != nil || !ok {
		return manifest.Entry{}, false, err
	}
	e := n.Entry()
	e.Path = path.Clean("/" + p)
	if digest && n.Deferred() {
		d, err := r.ix.Digest(n)
		if err != nil {
			return manifest.Entry{}, false, err
		}
		e.Digest = d.Digest()
	}
	return e, true, nil
}

// node finds p's node with p's parents resolved.
func (r tree) node(p string) (*Node, bool, error) {
	// Two common cases need no resolving, for a clean path (Lookup would
	// drop a ".." lexically, before the symlink it follows): no symlink on
	// the way, as every ancestor of an indexed node is a real directory;
	// and a path missing under a parent found as it is named and not a
	// symlink, as resolving it gives the same path.
	if p == path.Clean(p) {
		if n, ok := r.ix.Lookup(rel(p)); ok {
			return n, true, nil
		}
		if dir := path.Dir(p); dir != p {
			if d, ok := r.ix.Lookup(rel(dir)); ok {
				if t, _ := d.Lstat(); t != Symlink {
					return nil, false, nil
				}
			}
		}
	}
	rp, err := fstree.Resolve(r, p)
	if err != nil {
		return nil, false, err
	}
	n, ok := r.ix.Lookup(rel(rp))
	return n, ok, nil
}

// ReadFile implements fstree.Tree for the files whose content the index
// keeps (see Index.Content), following symlinks inside the image.
func (r tree) ReadFile(p string) ([]byte, error) {
	cur := p
	for i := 0; i <= fstree.MaxSymlinks; i++ {
		rp, err := fstree.Resolve(r, cur)
		if err != nil {
			return nil, err
		}
		n, ok := r.ix.Lookup(rel(rp))
		if !ok {
			break
		}
		if target, isLink := symlinkTarget(n); isLink {
			if !strings.HasPrefix(target, "/") {
				target = path.Join(path.Dir(rp), target)
			}
			cur = target
			continue
		}
		if b, ok := r.ix.Content(rel(rp)); ok {
			return b, nil
		}
		break
	}
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

// symlinkTarget returns the target of a symlink, or of a hardlink to one.
func symlinkTarget(n *Node) (string, bool) {
	t, target := n.Lstat()
	return target, t == Symlink
}

// ReadDir implements fstree.Tree.
func (r tree) ReadDir(p string) ([]string, error) {
	rp, err := fstree.Resolve(r, p)
	if err != nil {
		return nil, err
	}
	nodes := r.ix.ReadDir(rel(rp))
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, baseName(n.Path))
	}
	return names, nil
}

// SameFile implements fstree.SameFiler: a and b are one inode when they
// are the same path, or hard links one to the other or to the same path.
func (r tree) SameFile(a, b string) (bool, error) {
	na, okA, err := r.node(a)
	if err != nil || !okA {
		return false, err
	}
	nb, okB, err := r.node(b)
	if err != nil || !okB {
		return false, err
	}
	return inode(na) == inode(nb), nil
}

// inode names the inode a node is: a hard link's target, or its own path.
func inode(n *Node) string {
	if n.Type == Hardlink {
		return n.Target
	}
	return n.Path
}
