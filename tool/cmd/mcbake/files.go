package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"strings"

	"github.com/google/renameio/v2"
)

// writeFileAtomic writes b to path, given with flag, through a temporary
// file and a rename, or to stdout when path is "-"; an error names the
// flag and the path.
func writeFileAtomic(flag, path string, b []byte, stdout io.Writer) error {
	o, err := openOutput(flag, path, stdout)
	if err != nil {
		return err
	}
	defer o.discard()
	return o.commit(b)
}

// pathError names flag and path, and drops the temporary file's name
// that an error of the file system carries.
func pathError(flag, path string, err error) error {
	if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
		err = pe.Err
	}
	if le := (*os.LinkError)(nil); errors.As(err, &le) {
		err = le.Err
	}
	return fmt.Errorf("%s: %w", flagged(flag, path), err)
}

// flagged is how errors name a path given with flag: "-o plan.json", or
// "--format json=r.json" for a flag ending in "=".
func flagged(flag, path string) string {
	if strings.HasSuffix(flag, "=") {
		return flag + path
	}
	return flag + " " + path
}

// outputFile is a file a command writes at its end, opened before the
// command does anything else: a temporary file beside path, renamed over
// it by commit. A path that cannot be written fails before a build writes
// (or pushes) an image, naming the flag.
type outputFile struct {
	flag, path string
	pending    *renameio.PendingFile
	stdout     io.Writer // for path "-"
}

// openOutput opens the output file path given with flag ("" is none: a
// nil outputFile, whose methods do nothing; "-" is stdout).
func openOutput(flag, path string, stdout io.Writer) (*outputFile, error) {
	if path == "" {
		return nil, nil
	}
	if path == "-" {
		return &outputFile{flag: flag, path: path, stdout: stdout}, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s: is a directory", flagged(flag, path))
	}
	f, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o644))
	if err != nil {
		return nil, pathError(flag, path, err)
	}
	return &outputFile{flag: flag, path: path, pending: f}, nil
}

// commit writes b and renames the file into place.
func (o *outputFile) commit(b []byte) error {
	if o == nil {
		return nil
	}
	if o.stdout != nil {
		if _, err := o.stdout.Write(b); err != nil {
			return fmt.Errorf("%s: writing to stdout: %w", flagged(o.flag, o.path), err)
		}
		return nil
	}
	if _, err := o.pending.Write(b); err != nil {
		return pathError(o.flag, o.path, err)
	}
	if err := o.pending.CloseAtomicallyReplace(); err != nil {
		return pathError(o.flag, o.path, err)
	}
	return nil
}

// discard removes the temporary file when it was not committed.
func (o *outputFile) discard() {
	if o != nil && o.pending != nil {
		_ = o.pending.Cleanup()
	}
}
