package node

import (
	"github.com/mcbake/mcbake/manifest"
)

// NodeChange is what the node did to a path of /etc, relative to the
// booted deployment's defaults: what ostree's finalization applies to the
// staged deployment's /etc (docs/design.md, "ostree's /etc merge").
type NodeChange string

// Node changes.
const (
	// Unmodified: the node has the booted deployment's default (or
	// neither has the path): finalization leaves the staged /etc as it
	// is, so whatever is written there survives.
	Unmodified NodeChange = "unmodified"
	// Modified: the node changed the path: its copy replaces the staged
	// one.
	Modified NodeChange = "modified"
	// Added: the node has a path the defaults lack: its copy is added.
	Added NodeChange = "added"
	// Removed: the node removed a default: finalization removes the path.
	Removed NodeChange = "removed"
)

// observed is what one tree has at a path: the entry, and whether it
// exists.
type observed struct {
	e  manifest.Entry
	ok bool
}

// nodeChange classifies a path from the booted deployment's default
// (usr/etc) and the node's live /etc, as ostree's diff does: two entries
// are equal when type, content or target, mode, uid and gid are, and a
// directory whose only change is its mode or owners is unmodified (the
// merge drops such a change).
func nodeChange(def, live observed) NodeChange {
	switch {
	case !def.ok && !live.ok:
		return Unmodified
	case !def.ok:
		return Added
	case !live.ok:
		return Removed
	case def.e.Type == manifest.Directory && live.e.Type == manifest.Directory:
		return Unmodified
	case len(manifest.Compare(def.e, live.e)) > 0:
		return Modified
	}
	return Unmodified
}

// finalized is what finalization leaves at a path of the new /etc: the
// node's copy when the node modified or added it, nothing when the node
// removed it, and the staged deployment's content otherwise.
func finalized(change NodeChange, live, staged observed) observed {
	switch change {
	case Modified, Added:
		return live
	case Removed:
		return observed{}
	}
	return staged
}
