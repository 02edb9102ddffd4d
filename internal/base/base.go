// Package base is a base OS image as mcbake sees it: opened through
// internal/images, indexed through internal/baseindex (streamed once, then
// cached), seen by the renderer as a render.Root, and compared with owned
// manifest entries.
package base

import (
	"io/fs"
	"strings"

	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/manifest"
	"github.com/mcbake/mcbake/internal/render"
)

// Root lets the renderer see a base image through its index.
type Root struct{ Index *baseindex.Index }

func rel(p string) string { return strings.TrimPrefix(p, "/") }

func nodeType(t baseindex.Type) manifest.Type {
	switch t {
	case baseindex.Dir:
		return manifest.Directory
	case baseindex.Symlink:
		return manifest.Symlink
	case baseindex.File:
		return manifest.File
	}
	return manifest.Type(t.String())
}

// Lstat describes p as lstat(2) would see it in the extracted image: a
// hardlink (ostree-ext bases hardlink every path to its object) is the
// file or symlink it shares an inode with.
func (r Root) Lstat(p string) (render.Node, bool) {
	n, ok := r.Index.Lookup(rel(p))
	if !ok {
		return render.Node{}, false
	}
	t, target := n.Lstat()
	return render.Node{Type: nodeType(t), Mode: n.Mode, UID: int(n.UID), GID: int(n.GID), Target: target}, true
}

func (r Root) ReadFile(p string) ([]byte, error) {
	if b, ok := r.Index.Content(rel(p)); ok {
		return b, nil
	}
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

func (r Root) ReadDir(p string) []string {
	nodes := r.Index.ReadDir(rel(p))
	names := make([]string, 0, len(nodes))
	for _, n := range nodes {
		names = append(names, n.Path[strings.LastIndex(n.Path, "/")+1:])
	}
	return names
}

func (r Root) Resolve(p string) (string, error) {
	rp, err := r.Index.Resolve(rel(p))
	if err != nil {
		return "", err
	}
	return "/" + rp, nil
}

// State compares an owned entry with the base's node at the entry's
// resolved path.
func State(e *manifest.Entry, ix *baseindex.Index) *manifest.BaseState {
	n, ok := ix.Lookup(rel(e.Where()))
	if !ok {
		return &manifest.BaseState{State: manifest.StateAbsent}
	}
	var d []string
	add := func(attr string, differs bool) {
		if differs {
			d = append(d, attr)
		}
	}
	t, target := n.Lstat()
	bt := nodeType(t)
	if e.Type == manifest.Hardlink && n.Type == baseindex.Hardlink {
		bt, target = manifest.Hardlink, n.Target
	}
	add(manifest.DiffType, bt != e.Type)
	if e.Type != manifest.Absent && len(d) == 0 {
		add(manifest.DiffContent, e.Type == manifest.File && n.Digest.String() != e.Digest)
		add(manifest.DiffTarget, e.Type == manifest.Symlink && target != e.Target ||
			e.Type == manifest.Hardlink && target != rel(e.Target))
		add(manifest.DiffMode, e.Type != manifest.Symlink && e.Type != manifest.Hardlink && n.Mode != uint32(e.Mode))
		add(manifest.DiffUID, e.Type != manifest.Hardlink && int(n.UID) != e.UID)
		add(manifest.DiffGID, e.Type != manifest.Hardlink && int(n.GID) != e.GID)
	}
	if len(d) == 0 {
		return &manifest.BaseState{State: manifest.StateSame}
	}
	return &manifest.BaseState{State: manifest.StateDiffers, Differs: d}
}
