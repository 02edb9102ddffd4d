package render

import (
	"errors"
	"io/fs"
	"path"
	"slices"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// occupant is the rendered entry that occupies a resolved path.
type occupant struct {
	typ  manifest.Type
	path string
	src  manifest.Source
}

// place resolves every entry's parents through the root's symlinks,
// refuses type clashes with the root and between entries, and adds the
// parent directories the MCD would create (0755 root:root) where neither
// the root nor the rendering has them.
func (r *renderer) place() {
	owned := map[string]occupant{}
	for i := range r.entries {
		r.locate(&r.entries[i], owned)
	}
	r.linkTargets()
	dirOK := map[string]bool{}
	var parents []Entry
	for _, e := range r.entries {
		if e.Type == manifest.Absent || !cleanAbs(e.Path) || e.Path == "/" {
			continue
		}
		parents = append(parents, r.parents(e, owned, dirOK)...)
	}
	r.entries = append(r.entries, parents...)
}

// linkTargets points every hard link at the rendered file it names, at
// that file's resolved path, and gives it the file's metadata: a hard link
// is the same inode, and a layer's link entry must name the path its
// target was written at. A hard link to a file the MachineConfigs do not
// write cannot be expressed in a layer and is refused.
func (r *renderer) linkTargets() {
	files := map[string]*Entry{}
	for i := range r.entries {
		if e := &r.entries[i]; e.Type == manifest.File {
			files[e.Path] = e
		}
	}
	for i := range r.entries {
		e := &r.entries[i]
		if e.Type != manifest.Hardlink {
			continue
		}
		f, ok := files[e.Target]
		if !ok {
			r.fail(r.sourceOf(e.Source), "hard link %s: target %s is not a file the MachineConfigs write", e.Path, e.Target)
			continue
		}
		e.Target, e.Mode, e.UID, e.GID, e.Size, e.Digest = f.Where(), f.Mode, f.UID, f.GID, f.Size, f.Digest
	}
}

// cleanAbs reports whether p is absolute and clean.
func cleanAbs(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p
}

// locate sets e's resolved path and checks it against the root and the
// entries already located.
func (r *renderer) locate(e *Entry, owned map[string]occupant) {
	switch {
	case !cleanAbs(e.Path):
		r.fail(r.sourceOf(e.Source), "path %q is not absolute and clean", e.Path)
		return
	case e.Path == "/":
		r.fail(r.sourceOf(e.Source), "path %q is the root directory itself", e.Path)
		return
	}
	rp, err := r.resolve(e.Path, e.Type)
	if err != nil {
		r.fail(r.sourceOf(e.Source), "%s: resolving in the root: %v", e.Path, err)
		return
	}
	if rp != e.Path {
		e.ResolvedPath = rp
	}
	if rp == machineconfig.ForceFile && e.Type != manifest.Absent {
		r.fail(r.sourceOf(e.Source), "%s lands at %s, which would make the machine-config-daemon skip validation", e.Path, rp)
	}
	if o, ok := owned[rp]; ok && (o.typ != manifest.Directory || e.Type != manifest.Directory) {
		r.fail(r.sourceOf(e.Source), "%s and %s (%s: %s) are the same path %s in the root", e.Path, o.path, o.src.MachineConfig, o.src.Field, rp)
		return
	}
	owned[rp] = occupant{typ: e.Type, path: e.Path, src: e.Source}
	r.clash(e)
}

// resolve resolves p's parents; for a directory whose path is a symlink to
// a directory in the root, the symlink is followed too (as mkdir -p does).
func (r *renderer) resolve(p string, t manifest.Type) (string, error) {
	return fstree.Locate(r.root, p, t)
}

func (r *renderer) clash(e *Entry) {
	n, ok := r.lstat(e.Where())
	if !ok {
		return
	}
	src := r.sourceOf(e.Source)
	switch {
	case n.Type == manifest.Directory && e.Type != manifest.Directory && e.Type != manifest.Absent:
		r.fail(src, "%s: the base has a directory at %s, the MachineConfig writes a %s", e.Path, e.Where(), e.Type)
	case n.Type != manifest.Directory && e.Type == manifest.Directory:
		r.fail(src, "%s: the base has a %s at %s, the MachineConfig wants a directory", e.Path, n.Type, e.Where())
	}
}

func (r *renderer) sourceOf(s manifest.Source) machineconfig.Source {
	return machineconfig.Source{MachineConfig: s.MachineConfig, Field: s.Field, File: r.fileOf(s.MachineConfig)}
}

func (r *renderer) fileOf(mcName string) string {
	for _, mc := range r.m.MachineConfigs {
		if mc.Name == mcName {
			return mc.File
		}
	}
	return "<merged>"
}

// ancestors returns the directories above the absolute path p, outermost
// first, without "/" and p itself.
func ancestors(p string) []string {
	var chain []string
	for d := path.Dir(p); d != "/" && d != "."; d = path.Dir(d) {
		chain = append(chain, d)
	}
	slices.Reverse(chain)
	return chain
}

// parents returns the directories to create for e, outermost first. Each
// ancestor of e.Path is resolved through the root; where that crosses a
// root symlink whose target does not exist yet (RHCOS's /usr/local ->
// ../var/usrlocal in an image whose /var is empty), the target's missing
// directories are created too, as mkdir -p on a node would.
func (r *renderer) parents(e Entry, owned map[string]occupant, dirOK map[string]bool) []Entry {
	var out []Entry
	ensure := func(p, rp string) bool {
		d, ok := r.parentDir(p, rp, e, owned, dirOK)
		if d != nil {
			out = append(out, *d)
		}
		return ok
	}
	// seen are the directories ensured as they are in the root: those
	// above one are ensured too, so a walk up from a path stops there.
	seen := map[string]bool{}
	ensureAbove := func(p string) bool {
		var up []string
		for d := path.Dir(p); d != "/" && d != "." && !seen[d]; d = path.Dir(d) {
			up = append(up, d)
		}
		for i := len(up) - 1; i >= 0; i-- {
			if !ensure(up[i], up[i]) {
				return false
			}
			seen[up[i]] = true
		}
		return true
	}
	ok := true
	err := fstree.ResolveAncestors(r.root, e.Path, func(p, rp string) bool {
		if ok = ensureAbove(rp) && ensure(p, rp); ok && p == rp {
			seen[p] = true
		}
		return ok
	})
	if err != nil {
		p := e.Path
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			p = pe.Path
		}
		r.fail(r.sourceOf(e.Source), "%s: resolving %s in the root: %v", e.Path, p, err)
		return out
	}
	if ok {
		ensureAbove(e.Where())
	}
	return out
}

// parentDir checks that the parent p (at rp in the root) is or will be a
// directory. It returns the directory entry to create when neither the
// root nor the rendering has one, and false when p cannot be a directory.
func (r *renderer) parentDir(p, rp string, e Entry, owned map[string]occupant, dirOK map[string]bool) (*Entry, bool) {
	if dirOK[rp] {
		return nil, true
	}
	if n, ok := r.lstat(rp); ok {
		switch n.Type {
		case manifest.Directory:
			dirOK[rp] = true
			return nil, true
		case manifest.Symlink:
			// Followed when the next component is resolved.
			return nil, true
		}
		r.fail(r.sourceOf(e.Source), "%s: parent %s is a %s in the base, not a directory", e.Path, rp, n.Type)
		return nil, false
	}
	if o, ok := owned[rp]; ok {
		if o.typ == manifest.Directory {
			dirOK[rp] = true
			return nil, true
		}
		r.fail(r.sourceOf(e.Source), "%s: parent %s is a %s (%s: %s), not a directory", e.Path, rp, o.typ, o.src.MachineConfig, o.src.Field)
		return nil, false
	}
	owned[rp] = occupant{typ: manifest.Directory, path: p, src: e.Source}
	dirOK[rp] = true
	d := Entry{Entry: manifest.Entry{Path: p, Type: manifest.Directory, Mode: 0o755, Source: e.Source}}
	if rp != p {
		d.ResolvedPath = rp
	}
	return &d, true
}
