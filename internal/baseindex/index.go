package baseindex

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"slices"
	"strings"
	"sync"
)

// Index is the merged filesystem metadata of an image's layers. It is
// immutable once built and safe for concurrent use.
//
// An Index is built in memory, or read from the cache of the merged view
// (view), which it then looks paths up in where they lie.
//
// Its nodes live in slots, in chunks of at most chunkSize: the chunks a
// layer's entries were decoded into, which the index adopts, and chunks
// of its own for implied directories. A node is never moved, so pointers
// to nodes stay valid as the index grows and no array of nodes is ever
// copied. A directory's children are linked through their slots; a slot
// whose node was deleted has no Type.
type Index struct {
	chunks [][]Node
	// paths maps every path to its slot, implied directories included.
	paths pathTable
	// content holds the kept contents by path.
	content map[string][]byte
	// listed counts the nodes that are not implied.
	listed int
	// view, when set, holds the nodes instead of chunks and paths.
	view *view

	// files open the unpacked files of each layer, bottom layer first (nil
	// for a layer without), for the deferred digests.
	files []func(string) (io.ReadCloser, error)
	// digests holds the deferred digests computed so far, by path.
	mu      sync.Mutex
	digests map[string]Digest
}

const (
	// chunkBits sizes the chunks of slots: 512 nodes, 56 KiB.
	chunkBits = 9
	chunkSize = 1 << chunkBits
	// noSlot ends a list of slots.
	noSlot = -1
)

// node returns the node in slot i.
func (ix *Index) node(i int32) *Node {
	return &ix.chunks[i>>chunkBits][i&(chunkSize-1)]
}

// find returns the node at a clean relative path.
func (ix *Index) find(p string) (*Node, bool) {
	i, ok := ix.get(p)
	if !ok {
		return nil, false
	}
	return ix.node(i), true
}

// Lookup returns the node at path, without following symlinks. The path is
// relative to the image root; a leading slash is ignored and it is
// cleaned. Implied directories are returned with Implied set.
func (ix *Index) Lookup(p string) (*Node, bool) {
	if v := ix.view; v != nil {
		return v.lookup(relPath(p))
	}
	return ix.find(relPath(p))
}

// Content returns the content kept for path, without following symlinks.
// Only these regular files (or hardlinks to regular files) have it:
// etc/passwd, etc/group, usr/lib/passwd, usr/lib/group, every file under
// usr/lib/systemd/system-preset/ and etc/systemd/system-preset/, and the
// files of at most 64 KiB directly under usr/lib/systemd/system/,
// etc/systemd/system/ and lib/systemd/system/. The returned slice must not
// be modified.
func (ix *Index) Content(p string) ([]byte, bool) {
	if v := ix.view; v != nil {
		return v.content(relPath(p))
	}
	b, ok := ix.content[relPath(p)]
	return b, ok
}

// ReadDir returns the direct children of the directory dir sorted by name,
// implied directories included. It returns nil if dir is not a directory.
// Symlinks are not followed.
func (ix *Index) ReadDir(dir string) []*Node {
	if v := ix.view; v != nil {
		return v.readDir(relPath(dir))
	}
	d, ok := ix.find(relPath(dir))
	if !ok || d.Type != Dir {
		return nil
	}
	var out []*Node
	for i := d.first; i != noSlot; i = ix.node(i).next {
		if n := ix.node(i); n.Type != 0 {
			out = append(out, n)
		}
	}
	if len(out) == 0 {
		return nil
	}
	slices.SortFunc(out, func(a, b *Node) int { return strings.Compare(a.Path, b.Path) })
	return out
}

// Digest returns the digest of n, a node of ix, computing it if it is
// deferred: it reads n's path from the topmost unpacked layer that has a
// file there, which is the layer that put n there (a layer above it with
// anything at that path, or a non-directory above it, would have replaced
// or removed it). The search starts at that layer when the node records
// it: each layer searched above it was a failed open of a path that
// layer does not have, and of a layer's file getter made, up to a tenth
// of a warm diff of a 48-layer containers-storage base. A computed digest
// is remembered.
func (ix *Index) Digest(n *Node) (Digest, error) {
	if !n.Deferred() {
		return n.Digest, nil
	}
	ix.mu.Lock()
	d, ok := ix.digests[n.Path]
	ix.mu.Unlock()
	if ok {
		return d, nil
	}
	d, err := ix.readDigest(n)
	if err != nil {
		return Digest{}, fmt.Errorf("digest of %s: %w", n.Path, err)
	}
	ix.mu.Lock()
	if ix.digests == nil {
		ix.digests = map[string]Digest{}
	}
	ix.digests[n.Path] = d
	ix.mu.Unlock()
	return d, nil
}

func (ix *Index) readDigest(n *Node) (Digest, error) {
	top := len(ix.files) - 1
	if l := int(n.layer); l > 0 && l <= len(ix.files) {
		top = l - 1
	}
	for i := top; i >= 0; i-- {
		if ix.files[i] == nil {
			continue
		}
		rc, err := ix.files[i](n.Path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return Digest{}, err
		}
		return hashFile(rc, n.Size)
	}
	return Digest{}, errors.New("no unpacked layer has the file")
}

// hashFile returns the digest of what rc reads, which must be size bytes,
// and closes it.
func hashFile(rc io.ReadCloser, size int64) (d Digest, err error) {
	defer func() { err = errors.Join(err, rc.Close()) }()
	h := sha256.New()
	n, err := io.Copy(h, io.LimitReader(rc, size+1))
	if err != nil {
		return d, err
	}
	if n != size {
		return d, fmt.Errorf("the unpacked file has %d bytes, the layer's tar header says %d", n, size)
	}
	h.Sum(d[:0])
	return d, nil
}

// Len returns the number of paths the layers list, implied directories
// excluded. The root counts only if a layer lists it.
func (ix *Index) Len() int {
	return ix.listed
}

// FromCache reports whether Build read the index from the cache's view
// of the chain of layers (one Options.Import put there included) rather
// than from the layers.
func (ix *Index) FromCache() bool {
	return ix.view != nil
}

// relPath cleans p and makes it relative to the root: "/etc/" is "etc",
// "/" is "". ".." components cannot climb above the root.
func relPath(p string) string {
	c := path.Clean(p)
	switch {
	case c == ".":
		return ""
	case c[0] == '/' || c == ".." || strings.HasPrefix(c, "../"):
		return path.Clean("/" + c)[1:]
	}
	return c
}

// parentDir returns the parent of a clean relative path; the root is its
// own parent.
func parentDir(p string) string {
	i := strings.LastIndexByte(p, '/')
	if i < 0 {
		return ""
	}
	return p[:i]
}

// baseName returns the last component of a clean relative path.
func baseName(p string) string {
	return p[strings.LastIndexByte(p, '/')+1:]
}

// joinPath joins a clean relative directory and a name.
func joinPath(dir, name string) string {
	if dir == "" {
		return name
	}
	return dir + "/" + name
}
