package atomicdir

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// Temp is a temporary directory that its process holds a lock on while it
// lives: the lock (flock(2) on the directory) ends with the process, even
// a killed one, so Sweep can tell a dead run's leftover from a live run's
// directory.
type Temp struct {
	Path string
	fd   int
}

// MkdirTemp makes a directory in parent named prefix plus random
// characters, locked, after sweeping (see Sweep) the leftovers of dead
// runs with the same prefix. Release it (and remove it) when done.
func MkdirTemp(parent, prefix string) (*Temp, error) {
	if parent == "" {
		parent = os.TempDir()
	}
	Sweep(parent, prefix)
	// Made under a name Sweep ignores, then locked, then renamed to its
	// name: a sweep never sees it unlocked.
	init, err := os.MkdirTemp(parent, initName())
	if err != nil {
		return nil, err
	}
	return lockAndName(init, prefix)
}

// initPrefix names entries between their creation and their lock; the
// creator's PID follows it (initName), so that a sweep can tell an entry
// a killed run left from one a live run is about to lock.
const initPrefix = ".mcbake-init-"

func initName() string { return initPrefix + strconv.Itoa(os.Getpid()) + "-" }

// lockAndName locks the new entry init and renames it to a fresh name
// with prefix in its directory.
func lockAndName(init, prefix string) (*Temp, error) {
	fd, err := lockedFD(init, unix.LOCK_EX)
	if err != nil {
		return nil, errors.Join(err, os.RemoveAll(init))
	}
	parent := filepath.Dir(init)
	for i := 0; ; i++ {
		name := filepath.Join(parent, prefix+randomSuffix())
		err := unix.Renameat2(unix.AT_FDCWD, init, unix.AT_FDCWD, name, unix.RENAME_NOREPLACE)
		if err == nil {
			return &Temp{Path: name, fd: fd}, nil
		}
		if !errors.Is(err, unix.EEXIST) || i > 8 {
			unix.Close(fd)
			return nil, errors.Join(&os.LinkError{Op: "rename", Old: init, New: name, Err: err}, os.RemoveAll(init))
		}
	}
}

func randomSuffix() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Release drops the lock; the directory or file stays (remove it first,
// or rename it into place).
func (t *Temp) Release() {
	if t != nil && t.fd >= 0 {
		unix.Close(t.fd)
		t.fd = -1
	}
}

// RemoveAll removes the directory (or file), if it is still there, and
// releases it.
func (t *Temp) RemoveAll() error {
	if t == nil {
		return nil
	}
	err := RemoveTree(t.Path)
	if errors.Is(err, fs.ErrNotExist) {
		err = nil
	}
	t.Release()
	return err
}

// CreateTemp is MkdirTemp for a file: an empty file, locked while the
// process lives.
func CreateTemp(parent, prefix string) (*Temp, error) {
	Sweep(parent, prefix)
	f, err := os.CreateTemp(parent, initName())
	if err != nil {
		return nil, err
	}
	if err := f.Close(); err != nil {
		return nil, errors.Join(err, os.Remove(f.Name()))
	}
	return lockAndName(f.Name(), prefix)
}

func lockedFD(p string, how int) (int, error) {
	fd, err := unix.Open(p, unix.O_RDONLY|unix.O_NOFOLLOW|unix.O_NONBLOCK|unix.O_CLOEXEC, 0)
	if err != nil {
		return -1, &os.PathError{Op: "open", Path: p, Err: err}
	}
	if err := unix.Flock(fd, how); err != nil {
		unix.Close(fd)
		return -1, &os.PathError{Op: "flock", Path: p, Err: err}
	}
	return fd, nil
}

// Sweep removes the directories and files in parent whose names start
// with prefix and that no live process holds locked: what runs killed
// before they cleaned up left behind. Failures are ignored; a later sweep
// retries.
func Sweep(parent, prefix string) {
	ents, err := os.ReadDir(parent)
	if err != nil {
		return
	}
	for _, e := range ents {
		if !(e.IsDir() || e.Type().IsRegular()) || !(strings.HasPrefix(e.Name(), prefix) || staleInit(e)) {
			continue
		}
		p := filepath.Join(parent, e.Name())
		fd, err := lockedFD(p, unix.LOCK_EX|unix.LOCK_NB)
		if err != nil {
			continue // held by a live run, or gone
		}
		if e.IsDir() {
			_ = RemoveTree(p)
		} else {
			_ = os.Remove(p)
		}
		unix.Close(fd)
	}
}

// staleInit reports whether e is an entry a run killed between creating
// and locking it (a window of microseconds) left behind: its creator is
// dead, or it is older than a minute (a PID of another PID namespace).
func staleInit(e os.DirEntry) bool {
	rest, ok := strings.CutPrefix(e.Name(), initPrefix)
	if !ok {
		return false
	}
	if pid, _, ok := strings.Cut(rest, "-"); ok {
		if n, err := strconv.Atoi(pid); err == nil && n > 0 && n != os.Getpid() && errors.Is(unix.Kill(n, 0), unix.ESRCH) {
			return true
		}
	}
	fi, err := e.Info()
	return err == nil && time.Since(fi.ModTime()) > time.Minute
}

// WriteCacheFile writes file (mode 0644), making its directory, through a
// temporary sibling named prefix plus random characters (CreateTemp),
// locked while this run lives so that the next write there sweeps what a
// killed run left, and renamed into place: a reader sees the old file or
// the new one. write writes the content to the temporary file. It does
// not fsync: it is for caches whose readers check what they read.
func WriteCacheFile(file, prefix string, write func(f *os.File) error) (err error) {
	dir := filepath.Dir(file)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	t, err := CreateTemp(dir, prefix)
	if err != nil {
		return err
	}
	defer t.Release()
	defer func() {
		if err != nil {
			err = errors.Join(err, os.Remove(t.Path))
		}
	}()
	f, err := os.OpenFile(t.Path, os.O_WRONLY, 0)
	if err != nil {
		return err
	}
	err = f.Chmod(0o644)
	if err == nil {
		err = write(f)
	}
	if err = errors.Join(err, f.Close()); err != nil {
		return err
	}
	return os.Rename(t.Path, file)
}
