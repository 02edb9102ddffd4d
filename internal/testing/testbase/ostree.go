package testbase

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"path"
	"sort"
	"strings"
)

// objectsDir is where an ostree-shaped layer keeps its objects.
const objectsDir = "sysroot/ostree/repo/objects"

// ostreeShape rewrites planned layers the way rpm-ostree / ostree-ext
// publish an ostree commit as a container image: every regular file
// becomes an object under sysroot/ostree/repo/objects/XX/REST.file, and
// its path a hard link to that object, written right after it (files with
// the same metadata and content share one object). A layer's directories
// come first, with the objects' directories; its hard links to its own
// files are pointed at the objects; whiteouts and opaque markers stay
// where they are. Symlinks stay symlinks (ostree-ext also makes them
// objects; mcbake's hard-link-to-symlink handling is tested on its own).
func ostreeShape(layers []plannedLayer) []plannedLayer {
	out := make([]plannedLayer, len(layers))
	for i, l := range layers {
		l.entries = ostreeEntries(l.entries)
		out[i] = l
	}
	return out
}

func ostreeEntries(entries []entry) []entry {
	var dirs, rest, links []entry
	objectOf := map[string]string{} // a file's path -> its object
	written := map[string]bool{}
	objDirs := map[string]bool{}
	for _, e := range entries {
		switch {
		case e.typ == tar.TypeDir:
			dirs = append(dirs, e)
		case e.typ == tar.TypeReg && !strings.HasPrefix(path.Base(e.name), whiteoutPrefix):
			obj := objectPath(e)
			objectOf[e.name] = obj
			objDirs[path.Dir(obj)] = true
			if !written[obj] {
				written[obj] = true
				o := e
				o.name = obj
				rest = append(rest, o)
			}
			rest = append(rest, entry{name: e.name, typ: tar.TypeLink, target: obj, mode: e.mode, uid: e.uid, gid: e.gid})
		case e.typ == tar.TypeLink:
			links = append(links, e)
		default:
			rest = append(rest, e)
		}
	}
	for i, l := range links {
		if obj, ok := objectOf[l.target]; ok {
			links[i].target = obj
		}
	}
	if len(objDirs) > 0 {
		dirs = withObjectDirs(dirs, objDirs)
	}
	return append(append(dirs, rest...), links...)
}

// withObjectDirs adds the objects' directories and their parents that the
// layer does not declare, keeping the directories sorted.
func withObjectDirs(dirs []entry, objDirs map[string]bool) []entry {
	have := map[string]bool{}
	for _, d := range dirs {
		have[d.name] = true
	}
	for d := range objDirs {
		for p := d; p != "." && !have[p]; p = path.Dir(p) {
			have[p] = true
			dirs = append(dirs, entry{name: p, typ: tar.TypeDir, mode: 0o755})
		}
	}
	sort.Slice(dirs, func(i, j int) bool { return dirs[i].name < dirs[j].name })
	return dirs
}

// objectPath names a file's object after its metadata and content, as
// ostree does (with its own checksum; this one is sha256 over mode,
// owners and content, or over a bulk file's index and size, whose content
// is generated).
func objectPath(e entry) string {
	h := sha256.New()
	var meta [8 * 3]byte
	binary.LittleEndian.PutUint64(meta[0:], uint64(e.mode))
	binary.LittleEndian.PutUint64(meta[8:], uint64(e.uid))
	binary.LittleEndian.PutUint64(meta[16:], uint64(e.gid))
	h.Write(meta[:])
	if e.bulk != nil {
		fmt.Fprintf(h, "bulk %d %d", e.bulk.index, e.bulk.size)
	} else {
		h.Write(e.content)
	}
	sum := hex.EncodeToString(h.Sum(nil))
	return objectsDir + "/" + sum[:2] + "/" + sum[2:] + ".file"
}
