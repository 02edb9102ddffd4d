package fstree

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"sort"
	"strings"
	"sync"

	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/manifest"
)

// Size limits of what a Dir reads (see docs/limits.md).
const (
	// MaxContent is the largest content a MachineConfig's file may have
	// once decompressed (docs/design.md, "What is refused"): a tree may
	// leave out the digest of a larger regular file, which no rendered
	// file can equal.
	MaxContent = 64 << 20
	// MaxReadFile bounds ReadFile: the files a rendering parses (passwd,
	// group, presets, unit files) are a few KiB on real systems.
	MaxReadFile = 4 << 20
	// MaxTarget bounds a symlink target, as PATH_MAX does.
	MaxTarget = 4096
)

// ErrNotRegular is returned when a path that must be read is not a
// regular file (a fifo, a device, a socket, a directory): a Dir never
// opens anything else, so a hostile tree cannot make it block or read
// forever.
var ErrNotRegular = errors.New("not a regular file")

// ErrTooLarge is returned by ReadFile for a file larger than MaxReadFile.
var ErrTooLarge = fmt.Errorf("larger than %d MiB", MaxReadFile>>20)

// Dir is a Tree backed by a directory on disk, such as a node's root or
// an ostree deployment. Every lookup goes through openat2(2) with
// RESOLVE_IN_ROOT, so symlinks (absolute or with "..") resolve as if the
// directory were "/" and nothing outside it is ever reached; the last
// component of Lstat is never followed. Regular files are opened with
// O_NONBLOCK and checked with fstat before a byte is read. Close it when
// done; it is safe for concurrent use until then.
type Dir struct {
	fd   int
	path string
}

// Open opens the directory dir as a Tree.
func Open(dir string) (*Dir, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	return &Dir{fd: fd, path: dir}, nil
}

// Close releases the directory.
func (d *Dir) Close() error { return unix.Close(d.fd) }

// Path is the host path the Dir was opened at.
func (d *Dir) Path() string { return d.path }

// FD is the directory's file descriptor, valid until Close.
func (d *Dir) FD() int { return d.fd }

// OpenIn opens p, a path inside the root, with flags (O_CLOEXEC is
// added) and every symlink resolved inside the root, as openat2 with
// RESOLVE_IN_ROOT does; magic links (/proc/self/fd/...) are refused.
func (d *Dir) OpenIn(p string, flags int) (int, error) {
	how := unix.OpenHow{Flags: uint64(flags | unix.O_CLOEXEC), Resolve: unix.RESOLVE_IN_ROOT | unix.RESOLVE_NO_MAGICLINKS}
	rel := strings.TrimPrefix(path.Clean("/"+p), "/")
	if rel == "" {
		rel = "."
	}
	for try := 0; ; try++ {
		fd, err := unix.Openat2(d.fd, rel, &how)
		// EAGAIN: a rename raced with the lookup; the kernel asks to retry.
		if errors.Is(err, unix.EAGAIN) && try < 8 {
			continue
		}
		if err != nil {
			return -1, &os.PathError{Op: "openat2", Path: p, Err: err}
		}
		return fd, nil
	}
}

// openParent opens the directory holding p and returns it with p's last
// component. The root itself has no parent: p must not be "/".
func (d *Dir) openParent(p string) (int, string, error) {
	c := path.Clean("/" + p)
	if c == "/" {
		return -1, "", &os.PathError{Op: "open", Path: p, Err: errors.New("the root directory has no parent")}
	}
	fd, err := d.OpenIn(path.Dir(c), unix.O_RDONLY|unix.O_DIRECTORY)
	return fd, path.Base(c), err
}

// absent reports whether err means a path does not exist: a missing
// component, or a parent that is not a directory.
func absent(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR)
}

// Lstat implements Tree.
func (d *Dir) Lstat(p string) (manifest.Entry, bool, error) { return d.lstat(p, true) }

// LstatType implements TypeStater: Lstat without reading the file.
func (d *Dir) LstatType(p string) (manifest.Entry, bool, error) { return d.lstat(p, false) }

func (d *Dir) lstat(p string, digest bool) (manifest.Entry, bool, error) {
	if path.Clean("/"+p) == "/" {
		return statAt(d.fd, ".", "/", digest)
	}
	dfd, name, err := d.openParent(p)
	if absent(err) {
		return manifest.Entry{}, false, nil
	}
	if err != nil {
		return manifest.Entry{}, false, err
	}
	defer unix.Close(dfd)
	return statAt(dfd, name, path.Clean("/"+p), digest)
}

// statAt describes name in the directory dfd (p names it in errors), a
// regular file with its digest when digest is set.
func statAt(dfd int, name, p string, digest bool) (manifest.Entry, bool, error) {
	var st unix.Stat_t
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if absent(err) {
			return manifest.Entry{}, false, nil
		}
		return manifest.Entry{}, false, &os.PathError{Op: "fstatat", Path: p, Err: err}
	}
	e := manifest.Entry{Path: p, Mode: manifest.Mode(st.Mode & 0o7777), UID: int(st.Uid), GID: int(st.Gid)}
	switch st.Mode & unix.S_IFMT {
	case unix.S_IFREG:
		e.Type, e.Size = manifest.File, st.Size
		if !digest || st.Size > MaxContent {
			// No MachineConfig file is that large: no digest is needed to
			// tell it differs, and hashing gigabytes would take seconds.
			break
		}
		dg, err := digestAt(dfd, name)
		if err != nil {
			return manifest.Entry{}, false, &os.PathError{Op: "read", Path: p, Err: err}
		}
		e.Digest = dg
	case unix.S_IFDIR:
		e.Type = manifest.Directory
	case unix.S_IFLNK:
		e.Type = manifest.Symlink
		t, err := readlinkAt(dfd, name)
		if err != nil {
			return manifest.Entry{}, false, &os.PathError{Op: "readlinkat", Path: p, Err: err}
		}
		e.Target = t
	default:
		e.Type = manifest.Other
	}
	return e, true, nil
}

// openRegular opens name in dfd for reading, only if it is a regular file.
func openRegular(dfd int, name string) (*os.File, error) {
	fd, err := unix.Openat(dfd, name, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	return checkRegular(fd, name)
}

// checkRegular wraps fd as a file after checking, with fstat, that it is
// a regular file; it closes fd otherwise.
func checkRegular(fd int, name string) (*os.File, error) {
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		unix.Close(fd)
		return nil, err
	}
	if st.Mode&unix.S_IFMT != unix.S_IFREG {
		unix.Close(fd)
		return nil, ErrNotRegular
	}
	return os.NewFile(uintptr(fd), name), nil
}

func digestAt(dfd int, name string) (_ digest.Digest, err error) {
	f, err := openRegular(dfd, name)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	dg := digest.Canonical.Digester()
	// A pooled buffer: io.Copy from an *os.File allocates 32 KiB a call,
	// gigabytes for the hundreds of thousands of files a node compares.
	buf := copyBuffers.Get().(*[]byte)
	defer copyBuffers.Put(buf)
	if _, err := io.CopyBuffer(dg.Hash(), struct{ io.Reader }{f}, *buf); err != nil {
		return "", err
	}
	return dg.Digest(), nil
}

// copyBuffers are digestAt's read buffers.
var copyBuffers = sync.Pool{New: func() any { b := make([]byte, 32<<10); return &b }}

func readlinkAt(dfd int, name string) (string, error) {
	buf := make([]byte, MaxTarget+1)
	n, err := unix.Readlinkat(dfd, name, buf)
	if err != nil {
		return "", err
	}
	if n > MaxTarget {
		return "", fmt.Errorf("symlink target longer than %d bytes", MaxTarget)
	}
	return string(buf[:n]), nil
}

// ReadFile implements Tree: it follows symlinks inside the root and reads
// at most MaxReadFile bytes of a regular file (ErrTooLarge beyond that,
// ErrNotRegular for anything else).
func (d *Dir) ReadFile(p string) (_ []byte, err error) {
	fd, err := d.OpenIn(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	f, err := checkRegular(fd, p)
	if err != nil {
		return nil, &os.PathError{Op: "read", Path: p, Err: err}
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	b, err := io.ReadAll(io.LimitReader(f, MaxReadFile+1))
	if err != nil {
		return nil, err
	}
	if len(b) > MaxReadFile {
		return nil, &os.PathError{Op: "read", Path: p, Err: ErrTooLarge}
	}
	return b, nil
}

// ReadDir implements Tree. The directory is opened without following a
// final symlink: a symlink is not a directory.
func (d *Dir) ReadDir(p string) (_ []string, err error) {
	fd, err := d.OpenIn(p, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if absent(err) || errors.Is(err, unix.ELOOP) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer func() { err = errors.Join(err, f.Close()) }()
	names, err := f.Readdirnames(-1)
	if err != nil {
		return nil, &os.PathError{Op: "readdir", Path: p, Err: err}
	}
	sort.Strings(names)
	return names, nil
}

// SameFile implements SameFiler: a and b are one inode.
func (d *Dir) SameFile(a, b string) (bool, error) {
	sa, okA, err := d.stat(a)
	if err != nil || !okA {
		return false, err
	}
	sb, okB, err := d.stat(b)
	if err != nil || !okB {
		return false, err
	}
	return sa.Dev == sb.Dev && sa.Ino == sb.Ino, nil
}

// stat is lstat(2) of p inside the root.
func (d *Dir) stat(p string) (unix.Stat_t, bool, error) {
	var st unix.Stat_t
	if path.Clean("/"+p) == "/" {
		return st, true, unix.Fstat(d.fd, &st)
	}
	dfd, name, err := d.openParent(p)
	if absent(err) {
		return st, false, nil
	}
	if err != nil {
		return st, false, err
	}
	defer unix.Close(dfd)
	if err := unix.Fstatat(dfd, name, &st, unix.AT_SYMLINK_NOFOLLOW); err != nil {
		if absent(err) {
			return st, false, nil
		}
		return st, false, &os.PathError{Op: "fstatat", Path: p, Err: err}
	}
	return st, true, nil
}
