package baseindex

import (
	"crypto/sha256"
	"fmt"

	digest "github.com/opencontainers/go-digest"
)

// Type is the kind of a filesystem entry.
type Type uint8

// Entry types. The zero Type is invalid so that an unset field is visible.
const (
	File Type = iota + 1
	Dir
	Symlink
	Hardlink
	CharDevice
	BlockDevice
	FIFO

	// typeWhiteout and typeOpaque only appear in per-layer data, never in
	// an Index: a whiteout deletes Path from lower layers, an opaque
	// marker deletes everything lower layers had under the directory Path.
	typeWhiteout
	typeOpaque
)

var typeNames = [...]string{
	File:         "file",
	Dir:          "dir",
	Symlink:      "symlink",
	Hardlink:     "hardlink",
	CharDevice:   "char",
	BlockDevice:  "block",
	FIFO:         "fifo",
	typeWhiteout: "whiteout",
	typeOpaque:   "opaque",
}

func (t Type) String() string {
	if int(t) < len(typeNames) && typeNames[t] != "" {
		return typeNames[t]
	}
	return fmt.Sprintf("Type(%d)", uint8(t))
}

// Node is the metadata of one path of the merged image filesystem.
//
// Its fields holding pointers (the strings) come first, see records.node.
type Node struct {
	// Path is clean and relative to the image root, without a leading
	// slash ("etc/passwd"); the root itself is "".
	Path string
	// Target is a symlink's target as stored in the layer, or a hardlink's
	// target path (clean, relative to the root).
	Target string
	// LinkedTarget and LinkedType describe, for a Hardlink, the file it
	// shares an inode with as it was when the link's layer was applied:
	// its type (File, Symlink, ...) and, for a symlink, its target. They
	// are zero for other types. Use Lstat to get the effective values.
	LinkedTarget string
	// Size is the content size of a regular file, and of a hardlink to one.
	Size int64
	// Digest is the SHA-256 of a regular file's content; a hardlink
	// carries the digest of the file it links to. It is zero for the
	// other types, and while the digest is deferred (see Deferred).
	Digest Digest
	// Mode holds the permission bits, setuid, setgid and sticky (07777).
	Mode     uint32
	UID, GID uint32
	Type     Type
	// LinkedType, see LinkedTarget.
	LinkedType Type

	// flags has nodeImplied (see Implied), nodeContent when the index
	// keeps the node's content, and nodeDeferred when its digest is
	// deferred.
	flags nodeFlags
	// layer is 1 + the position (the bottom layer is 0) of the layer
	// whose entry the node is, 0 when unknown: an implied directory, or a
	// layer past the 255th. A deferred digest is read from that layer
	// (Index.Digest).
	layer uint8
	// first and next link a node of an Index into its directory's
	// children: they are the slots of its own first child and of its
	// next sibling, noSlot ending a list.
	first, next int32
}

// nodeFlags are a Node's private flags.
type nodeFlags uint8

const (
	nodeContent nodeFlags = 1 << iota
	nodeDeferred
	nodeImplied
)

// Implied reports whether n is a directory that no layer lists but that
// exists because a layer has entries below it. Extraction creates such
// directories 0755 root:root, which is what their Node says. They are
// returned by Lookup and ReadDir but not counted by Index.Len.
func (n *Node) Implied() bool { return n.flags&nodeImplied != 0 }

// layerTag is Node.layer for the layer at position i.
func layerTag(i int) uint8 {
	if i < 0 || i >= 255 {
		return 0
	}
	return uint8(i + 1)
}

func (n *Node) hasContent() bool { return n.flags&nodeContent != 0 }

func (n *Node) setContent(on bool) {
	if on {
		n.flags |= nodeContent
	} else {
		n.flags &^= nodeContent
	}
}

// Deferred reports whether the node is a regular file, or a hardlink to
// one, whose Digest the index has not computed: a layer listed from its
// tar-split (containers-storage) records no digests, and the index reads
// the file from the unpacked layer the first time its digest is asked
// for (the Tree's Lstat, Index.Digest).
func (n *Node) Deferred() bool { return n.flags&nodeDeferred != 0 }

// Digest is the SHA-256 of a regular file's content.
type Digest [sha256.Size]byte

// Digest returns d as an OCI digest ("sha256:<hex>"), or "" for the zero
// Digest (a node that is not a regular file).
func (d Digest) Digest() digest.Digest {
	if d == (Digest{}) {
		return ""
	}
	return digest.NewDigestFromBytes(digest.SHA256, d[:])
}

// String returns d.Digest() as a string.
func (d Digest) String() string { return string(d.Digest()) }

// Lstat returns the type and symlink target that lstat(2) and readlink(2)
// report for the node's path once the image is extracted: a hardlink
// reports the file it shares an inode with. The target is "" for
// anything but a symlink.
func (n *Node) Lstat() (Type, string) {
	switch n.Type {
	case Hardlink:
		return n.LinkedType, n.LinkedTarget
	case Symlink:
		return Symlink, n.Target
	default:
		return n.Type, ""
	}
}
