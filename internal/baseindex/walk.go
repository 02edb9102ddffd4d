package baseindex

import (
	"archive/tar"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/manifest"
)

// Opaque is the type Walk gives an opaque-directory marker.
const Opaque manifest.Type = "opaque"

// Walk reads one uncompressed layer tar stream and calls fn with each
// entry as a manifest.Entry, read with the same rules as the index: paths
// cleaned and absolute, aufs metadata skipped, a whiteout reported as an
// Absent entry at the path it removes, an opaque-directory marker as an
// Opaque entry at its directory, a hard link as a Hardlink whose Target is
// the absolute path it links to, devices and fifos as Other. A regular
// file's Size and Digest are set, and fn gets its content when keep says
// so for its path (a file larger than maxKeep is an error then). It is the
// one way mcbake observes a path in a tar layer.
func Walk(r io.Reader, keep func(path string) bool, maxKeep int64, fn func(e manifest.Entry, content []byte) error) error {
	w := walker{keep: keep, maxKeep: maxKeep, fn: fn}
	return eachEntry(tar.NewReader(r), w.entry)
}

type walker struct {
	keep    func(string) bool
	maxKeep int64
	fn      func(manifest.Entry, []byte) error
}

func (w walker) entry(hdr *tar.Header, r io.Reader) error {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return nil
	}
	p, err := entryPath(hdr.Name)
	if err != nil || aufsMeta(p) {
		return err
	}
	if name := baseName(p); strings.HasPrefix(name, whiteoutPrefix) {
		return w.whiteout(parentDir(p), name)
	}
	if !validID(hdr.Uid) || !validID(hdr.Gid) {
		return fmt.Errorf("owner %d:%d is not a valid uid:gid", hdr.Uid, hdr.Gid)
	}
	t, err := entryType(hdr.Typeflag)
	if err != nil {
		return err
	}
	e := manifest.Entry{Path: "/" + p, Mode: manifest.Mode(uint32(hdr.Mode) & 0o7777), UID: hdr.Uid, GID: hdr.Gid}
	switch t {
	case File:
		return w.file(e, hdr.Size, r)
	case Dir:
		e.Type = manifest.Directory
	case Symlink:
		if err := checkTarget(hdr.Linkname); err != nil {
			return err
		}
		e.Type, e.Target = manifest.Symlink, hdr.Linkname
	case Hardlink:
		target, err := entryPath(hdr.Linkname)
		if err != nil {
			return fmt.Errorf("hardlink target: %w", err)
		}
		e.Type, e.Target = manifest.Hardlink, "/"+target
	default:
		e.Type = manifest.Other
	}
	return w.fn(e, nil)
}

// file hashes a regular file, keeping its content when asked to.
func (w walker) file(e manifest.Entry, size int64, r io.Reader) error {
	e.Type, e.Size = manifest.File, size
	keep := w.keep != nil && w.keep(e.Path)
	if keep && size > w.maxKeep {
		return fmt.Errorf("%s is larger than %d bytes", e.Path, w.maxKeep)
	}
	dg := digest.Canonical.Digester()
	var content []byte
	var err error
	var n int64
	if keep {
		content, err = io.ReadAll(io.TeeReader(io.LimitReader(r, size), dg.Hash()))
		n = int64(len(content))
	} else {
		n, err = io.Copy(dg.Hash(), r)
	}
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return fmt.Errorf("reading content: %w", err)
	}
	e.Digest = dg.Digest()
	return w.fn(e, content)
}

// whiteout reports a whiteout or an opaque marker found in dir.
func (w walker) whiteout(dir, name string) error {
	switch {
	case name == opaqueMarker:
		return w.fn(manifest.Entry{Path: "/" + dir, Type: Opaque}, nil)
	case strings.HasPrefix(name, whiteoutMeta):
		return nil
	}
	deleted := strings.TrimPrefix(name, whiteoutPrefix)
	if deleted == "" || deleted == "." || deleted == ".." {
		return errors.New("invalid whiteout " + name)
	}
	return w.fn(manifest.Entry{Path: "/" + joinPath(dir, deleted), Type: manifest.Absent}, nil)
}
