package node

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"golang.org/x/sys/unix"
)

// SweepTemporaries removes the temporary entries that a killed
// mcbake-node run left in the deployment the next boot starts (the
// staged one, or, once finalized, the pending one): in its /etc and in
// the record directory under its stateroot's /var. A temporary entry is
// a file, symlink or empty directory whose name is one mcbake-node makes
// (.NAME.mcbake-XXXXXXXXXXXX, twelve hex digits; see tempName), and
// nothing else is touched; symlinks are never followed. Left in the
// staged /etc, such an entry would become part of the new /etc at the
// reboot. It takes the lock of mcbake-node runs (see Prepare) and the
// deployment's writer lock, so it never removes a live run's entries, and writes in a private mount namespace when the
// sysroot is read-only. It returns the host paths it removed; nil when
// nothing is staged or pending. PrepareRevert sweeps the same way before
// it writes; a shutdown guard calls this after it.
func SweepTemporaries(ctx context.Context, sysroot string) ([]string, error) {
	s, err := OpenSysroot(sysroot)
	if err != nil {
		return nil, err
	}
	unlock, err := s.lockRuns()
	if err != nil {
		return nil, err
	}
	defer unlock()
	booted, err := s.Booted()
	if err != nil {
		return nil, err
	}
	d, err := s.Staged(booted)
	if errors.Is(err, ErrNothingStaged) {
		d, err = s.Pending(booted)
	}
	if err != nil || d == nil {
		return nil, err
	}
	var removed []string
	err = withWritable(s.Physical, func() error {
		root, err := Open(d.Dir)
		if err != nil {
			return err
		}
		defer root.Close()
		varRoot, err := Open(d.Var())
		if err != nil {
			return err
		}
		defer varRoot.Close()
		removed, err = sweepDeployment(ctx, root, varRoot)
		return err
	})
	return removed, err
}

// sweepDeployment sweeps the temporary entries of dead runs from the
// deployment root's /etc and varRoot's VarRecordDir, under both roots'
// locks, and returns their host paths.
func sweepDeployment(ctx context.Context, root, varRoot *Root) ([]string, error) {
	var removed []string
	for _, sw := range []struct {
		root *Root
		dir  string
	}{{root, "/etc"}, {varRoot, VarRecordDir}} {
		unlock, err := sw.root.lock()
		if err != nil {
			return removed, err
		}
		got, err := sw.root.sweepTree(ctx, sw.dir)
		unlock()
		for _, p := range got {
			removed = append(removed, filepath.Join(sw.root.Path(), p))
		}
		if err != nil {
			return removed, fmt.Errorf("sweeping temporary entries: %w", err)
		}
	}
	return removed, nil
}

// sweepTree removes the temporary entries of dead runs (see sweepTemp)
// from dir, a directory inside the root, and from every directory below
// it, never following a symlink, and returns their paths in the root. A
// missing dir has none. The caller holds the root's lock.
func (r *Root) sweepTree(ctx context.Context, dir string) ([]string, error) {
	fd, err := r.OpenIn(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW)
	if absentOrNotDir(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	return sweepDirFD(ctx, fd, clean(dir))
}

// sweepDirFD is sweepTree of the open directory fd, named dir; it closes
// fd.
func sweepDirFD(ctx context.Context, fd int, dir string) ([]string, error) {
	f := os.NewFile(uintptr(fd), dir)
	defer f.Close()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	ents, err := f.ReadDir(-1)
	if err != nil {
		return nil, err
	}
	var removed []string
	var errs []error
	synced := false
	for _, e := range ents {
		name, p := e.Name(), path.Join(dir, e.Name())
		if tempPattern.MatchString(name) {
			err := unix.Unlinkat(fd, name, 0)
			if errors.Is(err, unix.EISDIR) {
				err = unix.Unlinkat(fd, name, unix.AT_REMOVEDIR)
			}
			switch {
			case err == nil:
				removed, synced = append(removed, p), true
			case errors.Is(err, unix.ENOTEMPTY) || errors.Is(err, unix.EEXIST) || errors.Is(err, unix.ENOENT):
				// Not a dead run's: the directories a run makes under a
				// temporary name are empty until renamed.
			default:
				errs = append(errs, &os.PathError{Op: "remove", Path: p, Err: err})
			}
			continue
		}
		if e.Type() != fs.ModeDir {
			continue
		}
		sub, err := unix.Openat(fd, name, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
		if absentOrNotDir(err) {
			continue // replaced since the listing
		}
		if err != nil {
			errs = append(errs, &os.PathError{Op: "open", Path: p, Err: err})
			continue
		}
		got, err := sweepDirFD(ctx, sub, p)
		removed = append(removed, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if synced {
		errs = append(errs, unix.Fsync(fd))
	}
	return removed, errors.Join(errs...)
}

// absentOrNotDir reports whether err means a directory is not there (or
// is a symlink, which is not followed).
func absentOrNotDir(err error) bool {
	return errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) || errors.Is(err, unix.ELOOP)
}
