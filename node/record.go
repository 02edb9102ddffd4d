package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"slices"

	"github.com/google/renameio/v2"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/readall"
)

// writeRecord appends rec to RecordDir/record.json of the staged
// deployment's root and stores the MachineConfigs beside it, labelled as
// the deployment's policy says.
func writeRecord(root *Root, labels *Labeler, rec *Record, mcs []byte) error {
	unlock, err := root.lock()
	if err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	defer unlock()
	if err := root.MkdirAll(RecordDir, func(string) (uint32, int, int) { return 0o755, 0, 0 }); err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	records, err := appendRecord(func() ([]byte, error) { return root.ReadFile(path.Join(RecordDir, RecordFile)) }, rec)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{RecordFile: records, MachineConfigsFile: mcs} {
		p := path.Join(RecordDir, name)
		if err := root.WriteFile(p, b, 0o644, 0, 0); err != nil {
			return fmt.Errorf("writing the record: %w", err)
		}
		if l := labels.Lookup(p, "file"); l != "" {
			if err := root.withDir(p, func(dfd int, n string) error { return setLabel(dfd, n, l) }); err != nil {
				return fmt.Errorf("labelling the record: %w", err)
			}
		}
	}
	return nil
}

// writeVarRecord stores the same files under the stateroot's /var, which
// a re-stage keeps.
func writeVarRecord(d *Deployment, rec *Record, mcs []byte) error {
	dir := filepath.Join(d.Var(), VarRecordDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	records, err := appendRecord(func() ([]byte, error) { return readRecordFile(filepath.Join(dir, RecordFile)) }, rec)
	if err != nil {
		return err
	}
	for name, b := range map[string][]byte{RecordFile: records, MachineConfigsFile: mcs} {
		if err := renameio.WriteFile(filepath.Join(dir, name), b, 0o644); err != nil {
			return fmt.Errorf("writing the record: %w", err)
		}
	}
	return nil
}

// appendRecord reads the records written so far (read returns
// fs.ErrNotExist when there are none) and returns them with rec added.
func appendRecord(read func() ([]byte, error), rec *Record) ([]byte, error) {
	var records []*Record
	b, err := read()
	switch {
	case errors.Is(err, fs.ErrNotExist):
	case err != nil:
		return nil, err
	default:
		if err := json.Unmarshal(b, &records); err != nil {
			records = nil // an unreadable earlier record is replaced, not fatal
		}
		records = slices.DeleteFunc(records, func(r *Record) bool { return r == nil })
	}
	out, err := json.MarshalIndent(append(records, rec), "", "  ")
	if err != nil {
		return nil, err
	}
	return append(out, '\n'), nil
}

// MaxRecordFile bounds the record file ReadRecords reads: each
// prepare-revert appends one record of a few hundred bytes a path.
const MaxRecordFile = 64 << 20

// ReadRecords reads the records of a record.json file, oldest first. The
// file must be a regular file of at most MaxRecordFile bytes; null
// records are left out.
func ReadRecords(file string) ([]*Record, error) {
	b, err := readRecordFile(file)
	if err != nil {
		return nil, err
	}
	var records []*Record
	if err := json.Unmarshal(b, &records); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return slices.DeleteFunc(records, func(r *Record) bool { return r == nil }), nil
}

// readRecordFile reads a record file: a regular file of at most
// MaxRecordFile bytes.
func readRecordFile(file string) ([]byte, error) {
	// O_NONBLOCK: a fifo there must not block the open.
	f, err := os.OpenFile(file, os.O_RDONLY|unix.O_NONBLOCK, 0)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file (%s)", file, fi.Mode().Type())
	case fi.Size() > MaxRecordFile:
		return nil, fmt.Errorf("%s: %d bytes, more than a record file holds (%d)", file, fi.Size(), MaxRecordFile)
	}
	b, err := readall.Sized(io.LimitReader(f, MaxRecordFile+1), int(fi.Size())+1)
	if err != nil {
		return nil, err
	}
	if len(b) > MaxRecordFile {
		return nil, fmt.Errorf("%s: more than a record file holds (%d bytes)", file, MaxRecordFile)
	}
	return b, nil
}

// jsonIndent encodes v as indented JSON with a trailing newline.
func jsonIndent(v any) ([]byte, error) {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
