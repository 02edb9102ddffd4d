package testbase

import (
	"archive/tar"
	"fmt"
	"path"
	"sort"
	"strings"
)

const (
	whiteoutPrefix = ".wh."
	opaqueMarker   = ".wh..wh..opq"
)

// entry is one tar entry of a planned layer, or one path of an applied
// filesystem state.
type entry struct {
	name     string // clean, relative, no trailing slash
	typ      byte
	mode     int64
	uid, gid int
	content  []byte
	target   string
	bulk     *bulkFile // generated content; content is nil when set
}

func (e entry) size() int64 {
	switch {
	case e.typ != tar.TypeReg:
		return 0
	case e.bulk != nil:
		return e.bulk.size
	default:
		return int64(len(e.content))
	}
}

// layerSpec is a validated Layer (or a bulk layer) before planning.
type layerSpec struct {
	files       []entry
	whiteouts   []string
	opaque      []string
	compression string
	comment     string
}

// plannedLayer is the exact, sorted list of entries of one layer tar.
type plannedLayer struct {
	entries     []entry
	compression string
	comment     string
}

func specFromLayer(l Layer, docker bool) (layerSpec, error) {
	s := layerSpec{compression: l.Compression, comment: l.Comment}
	switch s.compression {
	case "":
		s.compression = "gzip"
	case "gzip", "none":
	case "zstd":
		if docker {
			return s, fmt.Errorf("zstd compression: docker schema2 has no zstd layer media type")
		}
	default:
		return s, fmt.Errorf("unknown compression %q (want gzip, zstd or none)", l.Compression)
	}
	for _, f := range l.Files {
		e, err := entryFromFile(f)
		if err != nil {
			return s, err
		}
		s.files = append(s.files, e)
	}
	var err error
	if s.whiteouts, err = cleanPaths(l.Whiteouts); err != nil {
		return s, fmt.Errorf("whiteout: %w", err)
	}
	if s.opaque, err = cleanPaths(l.Opaque); err != nil {
		return s, fmt.Errorf("opaque directory: %w", err)
	}
	return s, nil
}

func entryFromFile(f File) (entry, error) {
	name, err := cleanPath(f.Path)
	if err != nil {
		return entry{}, err
	}
	e := entry{name: name, typ: typeOf(f.Type), mode: f.Mode, uid: f.UID, gid: f.GID, content: f.Content, target: f.Target}
	if strings.HasPrefix(path.Base(name), whiteoutPrefix) {
		return e, fmt.Errorf("file %q: whiteout names are reserved, use Layer.Whiteouts or Layer.Opaque", f.Path)
	}
	if f.Mode < 0 || f.Mode > 0o7777 {
		return e, fmt.Errorf("file %q: mode %#o is not within 07777", f.Path, f.Mode)
	}
	if f.UID < 0 || f.GID < 0 {
		return e, fmt.Errorf("file %q: negative owner %d:%d", f.Path, f.UID, f.GID)
	}
	if err := checkKind(e); err != nil {
		return e, fmt.Errorf("file %q: %w", f.Path, err)
	}
	if e.typ == tar.TypeLink {
		e.target, err = cleanPath(f.Target)
	}
	return e, err
}

// checkKind checks that content and target fit the entry type.
func checkKind(e entry) error {
	switch e.typ {
	case tar.TypeReg:
		if e.target != "" {
			return fmt.Errorf("a regular file has no target")
		}
		return nil
	case tar.TypeDir, tar.TypeSymlink, tar.TypeLink:
		if len(e.content) > 0 {
			return fmt.Errorf("only regular files have content")
		}
		if (e.typ == tar.TypeDir) != (e.target == "") {
			return fmt.Errorf("links need a target, directories have none")
		}
		return nil
	default:
		return fmt.Errorf("unsupported type %q", e.typ)
	}
}

// cleanPath drops a leading slash and refuses anything that is not a
// clean path inside the root.
func cleanPath(p string) (string, error) {
	q := strings.TrimPrefix(p, "/")
	if q == "" || q == "." || path.Clean(q) != q || q == ".." || strings.HasPrefix(q, "../") {
		return "", fmt.Errorf("path %q is not a clean path inside the root", p)
	}
	return q, nil
}

func cleanPaths(ps []string) ([]string, error) {
	var out []string
	for _, p := range ps {
		q, err := cleanPath(p)
		if err != nil {
			return nil, err
		}
		out = append(out, q)
	}
	return out, nil
}

// plan turns layer specs into sorted tar entry lists, adding the parent
// directories each layer needs with the metadata of the layers below.
func plan(specs []layerSpec) ([]plannedLayer, error) {
	state := map[string]entry{}
	var out []plannedLayer
	for i, s := range specs {
		entries, err := planLayer(s, state)
		if err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		if err := apply(state, entries); err != nil {
			return nil, fmt.Errorf("layer %d: %w", i, err)
		}
		out = append(out, plannedLayer{entries: entries, compression: s.compression, comment: s.comment})
	}
	return out, nil
}

func planLayer(s layerSpec, lower map[string]entry) ([]entry, error) {
	decl, err := declare(s)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(decl))
	for name := range decl {
		names = append(names, name)
	}
	for _, name := range names {
		if err := addParents(decl, lower, name); err != nil {
			return nil, err
		}
	}
	if err := resolveHardLinks(decl); err != nil {
		return nil, err
	}
	return sorted(decl), nil
}

// declare collects a layer's own entries, whiteout markers included.
func declare(s layerSpec) (map[string]entry, error) {
	decl := map[string]entry{}
	all := append([]entry(nil), s.files...)
	for _, w := range s.whiteouts {
		all = append(all, marker(path.Join(path.Dir(w), whiteoutPrefix+path.Base(w))))
	}
	for _, d := range s.opaque {
		all = append(all, marker(path.Join(d, opaqueMarker)))
	}
	for _, e := range all {
		if _, dup := decl[e.name]; dup {
			return nil, fmt.Errorf("path %q declared twice", e.name)
		}
		decl[e.name] = e
	}
	return decl, nil
}

func marker(name string) entry {
	return entry{name: name, typ: tar.TypeReg}
}

// addParents declares every missing ancestor of name as a directory,
// copying its metadata from the lower layers when it exists there.
func addParents(decl, lower map[string]entry, name string) error {
	for dir := path.Dir(name); dir != "."; dir = path.Dir(dir) {
		if e, ok := decl[dir]; ok {
			if e.typ != tar.TypeDir {
				return fmt.Errorf("parent %q of %q is not a directory in this layer", dir, name)
			}
			continue
		}
		e, ok := lower[dir]
		if !ok {
			decl[dir] = entry{name: dir, typ: tar.TypeDir, mode: 0o755}
			continue
		}
		if e.typ != tar.TypeDir {
			return fmt.Errorf("parent %q of %q is not a directory in the layers below", dir, name)
		}
		decl[dir] = entry{name: dir, typ: tar.TypeDir, mode: e.mode, uid: e.uid, gid: e.gid}
	}
	return nil
}

// resolveHardLinks checks each hard link targets a regular file of the
// same layer and gives the link its target's mode and owner, as tar does.
func resolveHardLinks(decl map[string]entry) error {
	for name, e := range decl {
		if e.typ != tar.TypeLink {
			continue
		}
		t, ok := decl[e.target]
		if !ok || t.typ != tar.TypeReg {
			return fmt.Errorf("hard link %q: target %q is not a regular file of the same layer", name, e.target)
		}
		e.mode, e.uid, e.gid = t.mode, t.uid, t.gid
		decl[name] = e
	}
	return nil
}

// sorted orders entries by name, hard links last so their targets come
// first. A name sorts after every one of its prefixes, so parents precede
// children.
func sorted(decl map[string]entry) []entry {
	out := make([]entry, 0, len(decl))
	for _, e := range decl {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool {
		li, lj := out[i].typ == tar.TypeLink, out[j].typ == tar.TypeLink
		if li != lj {
			return lj
		}
		return out[i].name < out[j].name
	})
	return out
}

// apply applies one layer's entries to a filesystem state with OCI layer
// semantics: whiteouts act on the lower layers only, a non-directory
// replacing a directory removes its contents, and a hard link takes its
// target's content, mode and owner.
func apply(state map[string]entry, entries []entry) error {
	for _, e := range entries {
		applyWhiteout(state, e.name)
	}
	for _, e := range entries {
		if strings.HasPrefix(path.Base(e.name), whiteoutPrefix) {
			continue
		}
		if old, ok := state[e.name]; ok && old.typ == tar.TypeDir && e.typ != tar.TypeDir {
			removeUnder(state, e.name)
		}
		if e.typ == tar.TypeLink {
			t, ok := state[e.target]
			if !ok || t.typ == tar.TypeDir || t.typ == tar.TypeSymlink {
				return fmt.Errorf("hard link %q: target %q is not a file", e.name, e.target)
			}
			e.content, e.bulk, e.mode, e.uid, e.gid = t.content, t.bulk, t.mode, t.uid, t.gid
		}
		state[e.name] = e
	}
	return nil
}

func applyWhiteout(state map[string]entry, name string) {
	base := path.Base(name)
	switch {
	case base == opaqueMarker:
		removeUnder(state, path.Dir(name))
	case strings.HasPrefix(base, whiteoutPrefix):
		gone := path.Join(path.Dir(name), strings.TrimPrefix(base, whiteoutPrefix))
		delete(state, gone)
		removeUnder(state, gone)
	}
}

// removeUnder deletes everything below dir ("." is the root).
func removeUnder(state map[string]entry, dir string) {
	prefix := dir + "/"
	if dir == "." {
		prefix = ""
	}
	for name := range state {
		if strings.HasPrefix(name, prefix) {
			delete(state, name)
		}
	}
}
