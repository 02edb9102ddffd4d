package main

import (
	"fmt"
	"os"

	"github.com/google/renameio/v2"
)

// writeFileAtomic writes b to path through a temporary file and a rename.
func writeFileAtomic(path string, b []byte) error {
	return renameio.WriteFile(path, b, 0o644)
}

// outputFile is a file a command writes at its end, opened before the
// command does anything else: a temporary file beside path, renamed over
// it by commit. A path that cannot be written fails before a build writes
// (or pushes) an image, naming the flag.
type outputFile struct {
	flag    string
	pending *renameio.PendingFile
}

// openOutput opens the output file path given with flag ("" is none: a
// nil outputFile, whose methods do nothing).
func openOutput(flag, path string) (*outputFile, error) {
	if path == "" {
		return nil, nil
	}
	if fi, err := os.Stat(path); err == nil && fi.IsDir() {
		return nil, fmt.Errorf("%s %s: is a directory", flag, path)
	}
	f, err := renameio.NewPendingFile(path, renameio.WithPermissions(0o644))
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, path, err)
	}
	return &outputFile{flag: flag, pending: f}, nil
}

// commit writes b and renames the file into place.
func (o *outputFile) commit(b []byte) error {
	if o == nil {
		return nil
	}
	if _, err := o.pending.Write(b); err != nil {
		return fmt.Errorf("%s %s: %w", o.flag, o.pending.Name(), err)
	}
	if err := o.pending.CloseAtomicallyReplace(); err != nil {
		return fmt.Errorf("%s: %w", o.flag, err)
	}
	return nil
}

// discard removes the temporary file when it was not committed.
func (o *outputFile) discard() {
	if o != nil {
		_ = o.pending.Cleanup()
	}
}
