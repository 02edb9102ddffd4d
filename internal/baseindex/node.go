package baseindex

import "fmt"

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
type Node struct {
	// Path is clean and relative to the image root, without a leading
	// slash ("etc/passwd"); the root itself is "".
	Path string
	Type Type
	// Mode holds the permission bits, setuid, setgid and sticky (07777).
	Mode     uint32
	UID, GID int
	// Size is the content size of a regular file, and of a hardlink to one.
	Size int64
	// Target is a symlink's target as stored in the layer, or a hardlink's
	// target path (clean, relative to the root).
	Target string
	// Digest is "sha256:<hex>" of a regular file's content; a hardlink
	// carries the digest of the file it links to.
	Digest string
	// LinkedType and LinkedTarget describe, for a Hardlink, the file it
	// shares an inode with as it was when the link's layer was applied:
	// its type (File, Symlink, ...) and, for a symlink, its target. They
	// are zero for other types. Use Lstat to get the effective values.
	LinkedType   Type
	LinkedTarget string
	// Implied is set on directories that no layer lists but that exist
	// because a layer has entries below them. Extraction creates such
	// directories 0755 root:root, which is what their Node says. They are
	// returned by Lookup and ReadDir but not counted by Index.Len.
	Implied bool

	content []byte // kept content, see Index.Content
}

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

// symlinkTarget returns the target of a symlink, or of a hardlink to one.
func (n *Node) symlinkTarget() (string, bool) {
	t, target := n.Lstat()
	return target, t == Symlink
}
