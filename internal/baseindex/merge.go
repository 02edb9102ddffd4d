package baseindex

import (
	"errors"
	"fmt"
)

// merger applies layers to an index, bottom layer first.
type merger struct {
	ix *Index
	// own is the chunk the merger allocates implied directories in, and
	// owned the number of its slots in use.
	own, owned int
	// dirs remembers the last two directories entries went into, the
	// most recent first: layers list a directory's entries together, and
	// ostree-ext layers alternate between an object's directory and the
	// directory of the hardlinks to it, so most entries skip the lookup
	// of their parent.
	dirs [2]recentDir
	// kept counts the contents the index keeps.
	kept keptBudget
}

// recentDir is a directory the merge put an entry into.
type recentDir struct {
	path string
	slot int32
}

// newMerger returns a merger whose index holds only the implied root.
func newMerger() *merger {
	ix := &Index{paths: newPathTable(), content: map[string][]byte{}}
	m := &merger{ix: ix, owned: chunkSize, dirs: [2]recentDir{{slot: noSlot}, {slot: noSlot}},
		kept: keptBudget{scope: "of the layers merged so far"}}
	root := m.alloc()
	*ix.node(root) = impliedDir("")
	_, at := ix.lookup("")
	ix.insert("", root, at)
	return m
}

func impliedDir(p string) Node {
	return Node{Path: p, Type: Dir, Mode: 0o755, flags: nodeImplied, first: noSlot, next: noSlot}
}

// alloc returns a new zero slot.
func (m *merger) alloc() int32 {
	ix := m.ix
	if m.owned == chunkSize {
		ix.chunks = append(ix.chunks, make([]Node, chunkSize))
		m.own, m.owned = len(ix.chunks)-1, 0
	}
	m.owned++
	return int32(m.own<<chunkBits + m.owned - 1)
}

// adopt makes the chunks of a layer's nodes the index's and returns the
// slot of the first node.
func (m *merger) adopt(chunks [][]Node) int32 {
	first := int32(len(m.ix.chunks) << chunkBits)
	m.ix.chunks = append(m.ix.chunks, chunks...)
	return first
}

// apply merges one layer, the one at position pos (the bottom layer is 0),
// into the index, following the OCI layer rules: its whiteouts and opaque
// markers first delete from the lower layers only, then its entries are
// applied in tar order. The index adopts the slots of the layer's nodes.
func (m *merger) apply(l *layerData, pos int) error {
	for _, mk := range l.markers {
		switch mk.typ {
		case typeWhiteout:
			m.ensureDir(parentDir(mk.path))
			m.remove(mk.path)
		case typeOpaque:
			m.removeChildren(m.ensureDir(mk.path))
		}
	}
	m.ix.paths.reserve(l.count)
	first := m.adopt(l.chunks)
	for k := range l.count {
		i := first + int32(k)
		n := m.ix.node(i)
		n.layer = layerTag(pos)
		var content []byte
		if n.hasContent() {
			content = l.content[k]
		}
		if n.Type == Hardlink {
			var err error
			if content, err = m.resolveLink(n, content); err != nil {
				return err
			}
		}
		// After put, which releases what the node replaces keeps.
		p := n.Path
		m.put(i, content)
		if content != nil {
			if err := m.kept.take(p, int64(len(content))); err != nil {
				return err
			}
		}
	}
	return nil
}

// put sets the node at the path of the new node in slot i, with its kept
// content if it is not nil. A directory replacing a directory keeps its
// children; anything else replacing a directory removes them, and frees
// slot i. Missing parents are implied, and a parent that is not a
// directory is replaced by an implied one, as extracting into an overlay
// upper directory does.
func (m *merger) put(i int32, content []byte) {
	ix := m.ix
	n := ix.node(i)
	j, at := ix.lookup(n.Path)
	if j == noSlot {
		m.link(m.ensureDir(parentDir(n.Path)), i)
		ix.insert(n.Path, i, at)
		j = i
	} else {
		m.replace(j, n)
		*n = Node{}
	}
	ix.listed++
	n = ix.node(j)
	n.setContent(content != nil)
	if content != nil {
		ix.content[n.Path] = content
	}
}

// replace sets the node in slot i to n, keeping its place in its
// directory and, if both are directories, its children.
func (m *merger) replace(i int32, n *Node) {
	old := m.ix.node(i)
	if old.Type == Dir && n.Type != Dir {
		m.removeChildren(i)
	}
	if !old.Implied() {
		m.ix.listed--
	}
	m.dropContent(old)
	first, next := old.first, old.next
	*old = *n
	old.first, old.next = first, next
}

// link makes the node in slot i, which has no children, the first child
// of the directory in slot parent.
func (m *merger) link(parent, i int32) {
	d, n := m.ix.node(parent), m.ix.node(i)
	n.first, n.next = noSlot, d.first
	d.first = i
}

// ensureDir makes sure a directory exists at p, implying it (and its
// missing parents) if needed, and returns its slot.
func (m *merger) ensureDir(p string) int32 {
	if i, ok := m.recentDir(p); ok {
		return i
	}
	ix := m.ix
	i, at := ix.lookup(p)
	switch {
	case i == noSlot:
		parent := m.ensureDir(parentDir(p))
		i = m.alloc()
		n := ix.node(i)
		n.Type, n.Mode, n.flags = Dir, 0o755, nodeImplied // before the pointer, see records.node
		n.Path = p
		m.link(parent, i)
		ix.insert(p, i, at)
	case ix.node(i).Type != Dir:
		implied := impliedDir(p)
		m.replace(i, &implied)
	}
	m.dirs[0], m.dirs[1] = recentDir{path: p, slot: i}, m.dirs[0]
	return i
}

// recentDir returns the slot of the directory p if it is a recent one.
// A slot is still p's if it holds a directory: the path of a slot never
// changes, and a freed slot has no type.
func (m *merger) recentDir(p string) (int32, bool) {
	for k, d := range m.dirs {
		if d.slot != noSlot && d.path == p && m.ix.node(d.slot).Type == Dir {
			if k == 1 {
				m.dirs[0], m.dirs[1] = d, m.dirs[0]
			}
			return d.slot, true
		}
	}
	return noSlot, false
}

// remove deletes p and everything under it.
func (m *merger) remove(p string) {
	if i, ok := m.ix.get(p); ok {
		m.drop(i)
	}
}

// removeChildren deletes everything under the directory in slot i, but
// not the directory.
func (m *merger) removeChildren(i int32) {
	d := m.ix.node(i)
	for c := d.first; c != noSlot; c = m.ix.node(c).next {
		if m.ix.node(c).Type != 0 {
			m.drop(c)
		}
	}
	d.first = noSlot
}

// drop deletes the node in slot i and its subtree. The slot is left dead
// (its Type zero) but linked in its directory's children: a list of
// children skips dead slots, and is never long but for layers deleting
// what lower ones had.
func (m *merger) drop(i int32) {
	ix := m.ix
	n := ix.node(i)
	if n.Type == Dir {
		m.removeChildren(i)
	}
	ix.unset(n.Path)
	m.dropContent(n)
	if !n.Implied() {
		ix.listed--
	}
	*n = Node{next: n.next}
}

// dropContent forgets the kept content of n.
func (m *merger) dropContent(n *Node) {
	if n.hasContent() {
		m.kept.release(int64(len(m.ix.content[n.Path])))
		delete(m.ix.content, n.Path)
		n.setContent(false)
	}
}

// resolveLink resolves a hardlink against the current state of the
// index, which is the state its layer's extraction links against: it
// takes the size, digest and kept content of its target, and the type of
// the inode. It returns the link's content: its own, as its layer's scan
// found it, or its target's.
func (m *merger) resolveLink(n *Node, content []byte) ([]byte, error) {
	t, ok := m.ix.find(n.Target)
	if !ok || t.Implied() {
		return nil, fmt.Errorf("hardlink %q: target %q does not exist", n.Path, n.Target)
	}
	switch t.Type {
	case Dir:
		return nil, fmt.Errorf("hardlink %q: target %q is a directory", n.Path, n.Target)
	case Hardlink:
		n.LinkedType, n.LinkedTarget = t.LinkedType, t.LinkedTarget
	case Symlink:
		n.LinkedType, n.LinkedTarget = Symlink, t.Target
	default:
		n.LinkedType = t.Type
	}
	n.Size, n.Digest, n.Target = t.Size, t.Digest, t.Path
	n.flags = n.flags&^nodeDeferred | t.flags&nodeDeferred
	if content != nil || n.LinkedType != File {
		return content, nil
	}
	return m.linkContent(n, t)
}

// errNotKept is returned for a hardlink at a kept path whose target is in a
// lower layer, at a path whose content is not kept.
var errNotKept = errors.New("content of the target is not indexed (hardlink across layers)")

// linkContent returns the content of a hardlink's target if the link is at
// a kept path.
func (m *merger) linkContent(n, t *Node) ([]byte, error) {
	keep, err := keepContent(n.Path, n.Size)
	if err != nil || !keep {
		return nil, err
	}
	if !t.hasContent() {
		return nil, fmt.Errorf("hardlink %q to %q: %w", n.Path, n.Target, errNotKept)
	}
	return m.ix.content[t.Path], nil
}
