package render

import (
	"io/fs"
	"os"
	"path"
	"sort"
	"strings"
	"syscall"

	securejoin "github.com/cyphar/filepath-securejoin"

	"github.com/mcbake/mcbake/internal/manifest"
)

// Root is the filesystem the rendering is applied to: where owner names
// resolve, presets and base unit files are read, and parent symlinks are
// followed. A directory (DirRoot) or a base image index implements it.
// All paths are absolute and clean.
type Root interface {
	// Lstat describes path without following a final symlink.
	Lstat(path string) (Node, bool)
	// ReadFile returns the content of the regular file at path.
	ReadFile(path string) ([]byte, error)
	// ReadDir lists the names in the directory at path, sorted.
	ReadDir(path string) []string
	// Resolve follows every symlink in path's parent directories, never
	// leaving the root, and returns the resulting absolute path.
	Resolve(path string) (string, error)
}

// Node is what a Root knows about one path.
type Node struct {
	Type   manifest.Type
	Mode   uint32
	UID    int
	GID    int
	Target string
}

// DirRoot is a Root backed by a directory on disk.
type DirRoot string

func (d DirRoot) host(p string) (string, error) {
	return securejoin.SecureJoin(string(d), p)
}

// Lstat implements Root.
func (d DirRoot) Lstat(p string) (Node, bool) {
	parent, err := d.host(path.Dir(p))
	if err != nil {
		return Node{}, false
	}
	fi, err := os.Lstat(parent + "/" + path.Base(p))
	if err != nil {
		return Node{}, false
	}
	n := Node{Mode: uint32(fi.Mode().Perm())}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		n.UID, n.GID = int(st.Uid), int(st.Gid)
		n.Mode = uint32(st.Mode & 0o7777)
	}
	switch {
	case fi.Mode().IsDir():
		n.Type = manifest.Directory
	case fi.Mode()&fs.ModeSymlink != 0:
		n.Type = manifest.Symlink
		n.Target, _ = os.Readlink(parent + "/" + path.Base(p))
	default:
		n.Type = manifest.File
	}
	return n, true
}

// ReadFile implements Root.
func (d DirRoot) ReadFile(p string) ([]byte, error) {
	h, err := d.host(p)
	if err != nil {
		return nil, err
	}
	return os.ReadFile(h)
}

// ReadDir implements Root.
func (d DirRoot) ReadDir(p string) []string {
	h, err := d.host(p)
	if err != nil {
		return nil
	}
	ents, err := os.ReadDir(h)
	if err != nil {
		return nil
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}

// Resolve implements Root.
func (d DirRoot) Resolve(p string) (string, error) {
	parent, err := d.host(path.Dir(p))
	if err != nil {
		return "", err
	}
	rel := strings.TrimPrefix(parent, path.Clean(string(d)))
	return path.Join("/", rel, path.Base(p)), nil
}

// emptyRoot is the Root used when none is given: nothing exists.
type emptyRoot struct{}

func (emptyRoot) Lstat(string) (Node, bool) { return Node{}, false }
func (emptyRoot) ReadFile(p string) ([]byte, error) {
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}
func (emptyRoot) ReadDir(string) []string          { return nil }
func (emptyRoot) Resolve(p string) (string, error) { return p, nil }
