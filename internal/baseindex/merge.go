package baseindex

import (
	"errors"
	"fmt"
)

// newIndex returns an index holding only the implied root, sized for
// about size entries.
func newIndex(size int) *Index {
	ix := &Index{
		nodes: make(map[string]*Node, size+1),
		kids:  make(map[string]map[string]*Node, size/8+1),
	}
	ix.nodes[""] = impliedDir("")
	return ix
}

func impliedDir(p string) *Node {
	return &Node{Path: p, Type: Dir, Mode: 0o755, Implied: true}
}

// apply merges one layer's entries into the index, following the OCI
// layer rules: its whiteouts and opaque markers first delete from the
// lower layers only, then its entries are applied in tar order.
func (ix *Index) apply(entries []Node) error {
	for i := range entries {
		switch e := &entries[i]; e.Type {
		case typeWhiteout:
			ix.ensureDir(parentDir(e.Path))
			ix.remove(e.Path)
		case typeOpaque:
			ix.ensureDir(e.Path)
			ix.removeChildren(e.Path)
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Type == typeWhiteout || e.Type == typeOpaque {
			continue
		}
		if e.Type == Hardlink {
			if err := ix.link(e); err != nil {
				return err
			}
		}
		ix.put(e)
	}
	return nil
}

// put sets the node at n.Path. A directory replacing a directory keeps its
// children; anything else replacing a directory removes them. Missing
// parents are implied, and a parent that is not a directory is replaced by
// an implied one, as extracting into an overlay upper directory does.
func (ix *Index) put(n *Node) {
	old, ok := ix.nodes[n.Path]
	switch {
	case !ok:
		ix.ensureDir(parentDir(n.Path))
	case old.Type == Dir && n.Type != Dir:
		ix.removeChildren(n.Path)
	}
	if ok && !old.Implied {
		ix.listed--
	}
	ix.set(n)
	ix.listed++
}

// set records n at its path and in its parent's children.
func (ix *Index) set(n *Node) {
	ix.nodes[n.Path] = n
	if n.Path == "" {
		return
	}
	dir := parentDir(n.Path)
	kids := ix.kids[dir]
	if kids == nil {
		kids = map[string]*Node{}
		ix.kids[dir] = kids
	}
	kids[baseName(n.Path)] = n
}

// ensureDir makes sure a directory exists at p, implying it (and its
// missing parents) if needed.
func (ix *Index) ensureDir(p string) {
	n, ok := ix.nodes[p]
	switch {
	case ok && n.Type == Dir:
		return
	case ok:
		ix.remove(p)
	default:
		ix.ensureDir(parentDir(p))
	}
	ix.set(impliedDir(p))
}

// remove deletes p and everything under it.
func (ix *Index) remove(p string) {
	if _, ok := ix.nodes[p]; !ok {
		return
	}
	ix.drop(p)
	delete(ix.kids[parentDir(p)], baseName(p))
}

// removeChildren deletes everything under the directory p, but not p.
func (ix *Index) removeChildren(p string) {
	for _, k := range ix.kids[p] {
		ix.drop(k.Path)
	}
	delete(ix.kids, p)
}

// drop deletes p and its subtree from nodes, leaving p in its parent's
// children for the caller to handle.
func (ix *Index) drop(p string) {
	n := ix.nodes[p]
	if n.Type == Dir {
		ix.removeChildren(p)
	}
	delete(ix.nodes, p)
	if !n.Implied {
		ix.listed--
	}
}

// link resolves a hardlink against the current state of the index, which
// is the state its layer's extraction links against: it takes the size,
// digest and kept content of its target, and the type of the inode.
func (ix *Index) link(n *Node) error {
	t, ok := ix.nodes[n.Target]
	if !ok || t.Implied {
		return fmt.Errorf("hardlink %q: target %q does not exist", n.Path, n.Target)
	}
	switch t.Type {
	case Dir:
		return fmt.Errorf("hardlink %q: target %q is a directory", n.Path, n.Target)
	case Hardlink:
		n.LinkedType, n.LinkedTarget = t.LinkedType, t.LinkedTarget
	case Symlink:
		n.LinkedType, n.LinkedTarget = Symlink, t.Target
	default:
		n.LinkedType = t.Type
	}
	n.Size, n.Digest = t.Size, t.Digest
	return ix.linkContent(n, t)
}

// errNotKept is returned for a hardlink at a kept path whose target is in a
// lower layer, at a path whose content is not kept.
var errNotKept = errors.New("content of the target is not indexed (hardlink across layers)")

// linkContent gives a hardlink at a kept path the content of its target,
// unless its layer's scan did already.
func (ix *Index) linkContent(n, t *Node) error {
	if n.content != nil || n.LinkedType != File {
		return nil
	}
	keep, err := keepContent(n.Path, n.Size)
	if err != nil || !keep {
		return err
	}
	if t.content == nil {
		return fmt.Errorf("hardlink %q to %q: %w", n.Path, n.Target, errNotKept)
	}
	n.content = t.content
	return nil
}
