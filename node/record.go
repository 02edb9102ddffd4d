package node

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"slices"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/readall"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// queueRecord queues in t the record and the MachineConfigs: in RecordDir
// of the staged deployment's root, labelled as its policy says, and in
// VarRecordDir of the stateroot's /var (varRoot), which a re-stage
// keeps, with the directories missing above them. They commit with the
// paths of t, or not at all: a record that cannot be written undoes the
// paths too.
func queueRecord(t *txn, root, varRoot *Root, labels *Labeler, rec *Record, mcs []byte) error {
	staged, err := appendRecord(func() ([]byte, error) { return root.ReadFile(path.Join(RecordDir, RecordFile)) }, rec)
	if err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	if err := queueFiles(t, root, RecordDir, labels, staged, mcs); err != nil {
		return err
	}
	return queueVarRecord(t, varRoot, rec, mcs)
}

// queueVarRecord queues in t the /var copy of the record and the
// MachineConfigs.
func queueVarRecord(t *txn, varRoot *Root, rec *Record, mcs []byte) error {
	records, err := appendRecord(func() ([]byte, error) { return readFileIn(varRoot, path.Join(VarRecordDir, RecordFile), MaxRecordFile) }, rec)
	if err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	return queueFiles(t, varRoot, VarRecordDir, nil, records, mcs)
}

// queueFiles queues the record file and the MachineConfigs file in dir
// of root, and the directories missing at and above dir (0755
// root:root), each labelled as labels says.
func queueFiles(t *txn, root *Root, dir string, labels *Labeler, record, mcs []byte) error {
	var missing []string
	for d := clean(dir); d != "/" && !t.queuedIn(root, d); d = path.Dir(d) {
		_, ok, err := root.LstatType(d)
		if err != nil {
			return fmt.Errorf("writing the record: %w", err)
		}
		if ok {
			break
		}
		missing = append(missing, d)
	}
	for _, d := range missing {
		t.addIn(root, d, render.Entry{Entry: manifest.Entry{Path: d, Type: manifest.Directory, Mode: 0o755}}, labels.Lookup(d, manifest.Directory))
	}
	for _, f := range []struct {
		name    string
		content []byte
	}{{RecordFile, record}, {MachineConfigsFile, mcs}} {
		p := path.Join(dir, f.name)
		e := manifest.Entry{Path: p, Type: manifest.File, Mode: 0o644, Size: int64(len(f.content))}
		t.addIn(root, p, render.Entry{Entry: e, Content: f.content}, labels.Lookup(p, manifest.File))
	}
	return nil
}

// saveFailed stores the record of a run whose transaction failed (which
// wrote nothing, the record included) under the stateroot's /var, in a
// transaction of its own: the staged deployment keeps the record of the
// last run that wrote.
func saveFailed(varRoot *Root, rec *Record, mcs []byte) error {
	t := &txn{root: varRoot}
	if err := queueVarRecord(t, varRoot, rec, mcs); err != nil {
		return err
	}
	if err := t.run(); err != nil {
		return fmt.Errorf("writing the record: %w", err)
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
	return readRegular(f, file, MaxRecordFile)
}

// readFileIn reads p inside root (symlinks resolved inside it, as every
// read of a Root): a regular file of at most max bytes.
func readFileIn(root *Root, p string, max int64) ([]byte, error) {
	// O_NONBLOCK: a fifo there must not block the open.
	fd, err := root.OpenIn(p, unix.O_RDONLY|unix.O_NONBLOCK)
	if err != nil {
		return nil, err
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	return readRegular(f, p, max)
}

// readRegular reads f, named name in errors, when it is a regular file of
// at most max bytes; it reads nothing of anything else.
func readRegular(f *os.File, name string, max int64) ([]byte, error) {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: not a regular file (%s)", name, fi.Mode().Type())
	case fi.Size() > max:
		return nil, fmt.Errorf("%s: %d bytes, more than the %d it may have", name, fi.Size(), max)
	}
	b, err := readall.Sized(io.LimitReader(f, max+1), int(fi.Size())+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: more than the %d bytes it may have", name, max)
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
