package manifest

// Attr names an attribute in which two entries of the same path can
// differ. These are the attributes ostree's /etc merge compares (see
// docs/design.md, "ostree's /etc merge"); xattrs and mtimes are not among
// them.
type Attr string

// Attributes, in the order Compare reports them.
const (
	AttrType    Attr = "type"
	AttrContent Attr = "content"
	AttrTarget  Attr = "target"
	AttrMode    Attr = "mode"
	AttrUID     Attr = "uid"
	AttrGID     Attr = "gid"
)

// Compare returns the attributes in which have, what a tree holds at a
// path, differs from want, what the MachineConfigs own there; nil when
// have is what want asks for. It is the one comparison mcbake makes:
// base states, revert predictions, on-disk validation, rewrites and the
// verify rules all use it.
//
// A different type is reported alone. Otherwise a file compares content
// (when want has a digest), mode and owners; a directory mode and owners;
// a symlink its target and owners (a symlink's mode means nothing); a hard
// link only its target, because it is the file it links to, whose own
// entry carries the metadata; an absent entry has nothing else. have must
// describe a hard link by the path it shares an inode with (the observer
// of the tree decides that, e.g. fstree.Observe), and Other for anything
// that is not a file, directory or symlink.
func Compare(want, have Entry) []Attr {
	if want.Type != have.Type {
		return []Attr{AttrType}
	}
	var d []Attr
	add := func(a Attr, differs bool) {
		if differs {
			d = append(d, a)
		}
	}
	switch want.Type {
	case File:
		add(AttrContent, want.Digest != "" && have.Digest != want.Digest)
	case Symlink, Hardlink:
		add(AttrTarget, have.Target != want.Target)
	}
	switch want.Type {
	case File, Directory:
		add(AttrMode, have.Mode != want.Mode)
		fallthrough
	case Symlink:
		add(AttrUID, have.UID != want.UID)
		add(AttrGID, have.GID != want.GID)
	}
	return d
}
