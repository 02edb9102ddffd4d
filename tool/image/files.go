package image

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"

	digest "github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"
)

// placeFile makes dst a hard link to src, or, across file systems, a copy of
// it (checked against want unless want is ""). An existing dst is left alone
// and reported as not created: blobs are named by their content.
func placeFile(src, dst string, want digest.Digest) (created bool, err error) {
	err = os.Link(src, dst)
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, fs.ErrExist):
		return false, nil
	case errors.Is(err, unix.EXDEV):
		return copyFileAtomic(src, dst, want)
	}
	return false, err
}

// copyFileAtomic copies src to a temporary file next to dst and links it to
// dst, so dst appears complete or not at all.
func copyFileAtomic(src, dst string, want digest.Digest) (created bool, err error) {
	tmp, err := os.CreateTemp(filepath.Dir(dst), ".copy-")
	if err != nil {
		return false, err
	}
	defer func() { err = errors.Join(err, os.Remove(tmp.Name())) }()
	if err := fillFile(tmp, src, want); err != nil {
		return false, errors.Join(err, tmp.Close())
	}
	if err := tmp.Close(); err != nil {
		return false, err
	}
	if err := os.Link(tmp.Name(), dst); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// fillFile copies src into f, checks the digest, syncs f and makes it 0644.
func fillFile(f *os.File, src string, want digest.Digest) (err error) {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, in.Close()) }()
	var r io.Reader = in
	if want != "" {
		r = newVerifier(in, want, -1)
	}
	if _, err := io.Copy(f, r); err != nil {
		return fmt.Errorf("copying %s: %w", src, err)
	}
	if err := f.Sync(); err != nil {
		return err
	}
	return f.Chmod(0o644)
}

// writeFileAtomic replaces path with data: a synced temporary file in the
// same directory, renamed over path.
func writeFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, os.Remove(tmp.Name()))
		}
	}()
	if _, err := tmp.Write(data); err != nil {
		return errors.Join(err, tmp.Close())
	}
	if err := tmp.Sync(); err != nil {
		return errors.Join(err, tmp.Close())
	}
	if err := tmp.Chmod(perm); err != nil {
		return errors.Join(err, tmp.Close())
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// syncTree flushes every file and directory under root to disk.
func syncTree(root string) error {
	return filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		return syncPath(p)
	})
}

// syncPath fsyncs one file or directory.
func syncPath(p string) (err error) {
	f, err := os.Open(p)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	return f.Sync()
}

func syncDir(dir string) error { return syncPath(dir) }
