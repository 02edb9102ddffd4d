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

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/readall"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// queueRecord queues in t the record and the MachineConfigs: in RecordDir
// of the staged deployment's root, labelled as its policy says, and in
// VarRecordDir of the stateroot's /var (varRoot), which a re-stage
// keeps, with the directories missing above them. They commit with the
// paths of t, or not at all: a record that cannot be written undoes the
// paths too. The staged deployment's record file holds this run's record
// only (it replaces an earlier run's); the one under /var, the history,
// keeps the last MaxHistory records (see queueVarRecord).
func queueRecord(t *txn, root, varRoot *Root, labels *Labeler, rec *Record, mcs []byte) error {
	history, err := readHistory(varRoot, rec)
	if err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	full, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	if err := queueFiles(t, root, RecordDir, labels, jsonArray([][]byte{full}), mcs); err != nil {
		return err
	}
	return queueFiles(t, varRoot, VarRecordDir, nil, historyWith(history, full), mcs)
}

// queueVarRecord queues in t the history under /var with rec added, and
// the MachineConfigs.
func queueVarRecord(t *txn, varRoot *Root, rec *Record, mcs []byte) error {
	history, err := readHistory(varRoot, rec)
	if err != nil {
		return fmt.Errorf("writing the record: %w", err)
	}
	full, err := encodeRecord(rec)
	if err != nil {
		return err
	}
	return queueFiles(t, varRoot, VarRecordDir, nil, historyWith(history, full), mcs)
}

// MaxHistory is how many records the history under the stateroot's /var
// keeps, oldest first: the newest with its changes, the others without
// (Omitted counts them; who and when is what the safety net and the
// first-boot check read of them).
const MaxHistory = 8

// maxFullRecord bounds a stored record with its changes: a larger one is
// stored without them, so that a record file, with the history's other
// records, stays under MaxRecordFile.
const maxFullRecord = MaxRecordFile - 1<<20

// encodeRecord encodes rec as an element of a record file: indented, with
// its changes unless that makes it larger than maxFullRecord.
func encodeRecord(rec *Record) ([]byte, error) {
	b, err := json.MarshalIndent(rec, "  ", "  ")
	if err != nil || len(b) <= maxFullRecord {
		return b, err
	}
	return json.MarshalIndent(rec.header(), "  ", "  ")
}

// header is the record without its changes, which Omitted counts.
func (r *Record) header() *Record {
	h := *r
	h.Omitted += len(h.Changes)
	h.Changes = nil
	return &h
}

// storedRecord reads a record of a history without keeping its changes:
// it counts them.
type storedRecord struct {
	Record
	Changes []struct{} `json:"changes"`
}

// readHistory returns the records of the history under /var that the next
// one keeps beside rec (the newest MaxHistory-1, without their changes),
// encoded. A history that cannot be read as one (not a regular file,
// larger than MaxRecordFile, not a JSON list of records) is kept aside,
// renamed RecordFile.corrupt-TIME, and rec.Notes says so: a new history
// begins.
func readHistory(varRoot *Root, rec *Record) ([][]byte, error) {
	p := path.Join(VarRecordDir, RecordFile)
	var stored []*storedRecord
	b, err := readFileIn(varRoot, p, MaxRecordFile)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, nil
	case errors.Is(err, fstree.ErrNotRegular) || errors.Is(err, errTooLarge):
	case err != nil:
		return nil, err
	default:
		err = json.Unmarshal(b, &stored)
	}
	if err != nil {
		aside := p + ".corrupt-" + rec.Time.UTC().Format("20060102T150405Z")
		if rerr := varRoot.rename(p, aside); rerr != nil {
			return nil, errors.Join(err, rerr)
		}
		rec.Notes = append(rec.Notes, fmt.Sprintf("the record history under the stateroot's /var could not be read (%v): kept aside as /var%s, a new one begins", err, aside))
		return nil, nil
	}
	stored = slices.DeleteFunc(stored, func(r *storedRecord) bool { return r == nil })
	stored = stored[max(0, len(stored)-(MaxHistory-1)):]
	out := make([][]byte, 0, len(stored)+1)
	for _, r := range stored {
		r.Record.Omitted += len(r.Changes)
		b, err := json.MarshalIndent(&r.Record, "  ", "  ")
		if err != nil {
			return nil, err
		}
		out = append(out, b)
	}
	return out, nil
}

// historyWith is the history file of the encoded records with full, the
// newest, added; the oldest are left out while it would be larger than
// MaxRecordFile.
func historyWith(history [][]byte, full []byte) []byte {
	size := len(full)
	for _, b := range history {
		size += len(b) + 4
	}
	for len(history) > 0 && size > MaxRecordFile-8 {
		size -= len(history[0]) + 4
		history = history[1:]
	}
	return jsonArray(append(history[:len(history):len(history)], full))
}

// jsonArray is the JSON list of the elements, each indented by
// encodeRecord, as json.MarshalIndent would indent the list.
func jsonArray(elems [][]byte) []byte {
	size := 4
	for _, e := range elems {
		size += len(e) + 4
	}
	out := make([]byte, 0, size)
	out = append(out, "[\n"...)
	for i, e := range elems {
		out = append(out, "  "...)
		out = append(out, e...)
		if i < len(elems)-1 {
			out = append(out, ',')
		}
		out = append(out, '\n')
	}
	return append(out, "]\n"...)
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

// MaxRecordFile bounds a record file, which ReadRecords reads: one record
// of a few hundred bytes a path, or (the history under /var) MaxHistory
// records of which only the newest has its changes.
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

// errTooLarge: a file is larger than what its reader allows.
var errTooLarge = errors.New("larger than it may be")

// readRegular reads f, named name in errors, when it is a regular file of
// at most max bytes; it reads nothing of anything else.
func readRegular(f *os.File, name string, max int64) ([]byte, error) {
	fi, err := f.Stat()
	switch {
	case err != nil:
		return nil, err
	case !fi.Mode().IsRegular():
		return nil, fmt.Errorf("%s: %w (%s)", name, fstree.ErrNotRegular, fi.Mode().Type())
	case fi.Size() > max:
		return nil, fmt.Errorf("%s: %d bytes: %w (%d)", name, fi.Size(), errTooLarge, max)
	}
	b, err := readall.Sized(io.LimitReader(f, max+1), int(fi.Size())+1)
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > max {
		return nil, fmt.Errorf("%s: %w (%d)", name, errTooLarge, max)
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
