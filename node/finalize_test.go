package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/testing/schematest"
	"github.com/mcbake/mcbake/node"
)

// validateJSON checks v, encoded as the node's --format json encodes it,
// against the schema called name, and returns the encoding.
func validateJSON(t *testing.T, name string, v any) []byte {
	t.Helper()
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, name, b)
	return b
}

// validateFile checks the JSON document in file against the schema
// called name, and returns it.
func validateFile(t *testing.T, name, file string) []byte {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	schematest.Validate(t, name, b)
	return b
}

// TestCheckBeforeBoot: a first-boot check run before the prepared
// deployment boots (staged, the node still on L) checks nothing and keeps
// the record, which the shutdown safety net and the real first-boot check
// need; once the prepared deployment is the one that boots, it checks and
// retires the record.
func TestCheckBeforeBoot(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	if _, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs}); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	record := filepath.Join(booted.Var(), node.VarRecordDir, node.RecordFile)
	// Staged and not finalized: B has no bootloader entry yet, L's is the
	// default.
	entry, saved := newestEntry(t, s.Boot)
	if err := os.Remove(entry); err != nil {
		t.Fatal(err)
	}
	now := func() time.Time { return time.Unix(1e9, 0) }
	bc, err := node.Check(context.Background(), node.CheckOptions{Sysroot: st.Sysroot, Now: now})
	if err != nil {
		t.Fatalf("Check before the reboot: %v", err)
	}
	if bc == nil || bc.Awaiting == nil || bc.Awaiting.Dir != staged.Dir || bc.Report != nil || bc.Prepared {
		t.Fatalf("Check before the reboot = %+v, want the staged deployment awaited and nothing checked", bc)
	}
	validateJSON(t, "check", bc)
	if _, err := os.Stat(record); err != nil {
		t.Fatalf("Check before the reboot retired the record: %v", err)
	}
	// Finalized: B's entry is the default, as on its first boot.
	if err := os.WriteFile(entry, saved, 0o644); err != nil {
		t.Fatal(err)
	}
	bc, err = node.Check(context.Background(), node.CheckOptions{Sysroot: st.Sysroot, Now: now})
	if err != nil {
		t.Fatalf("Check on B: %v", err)
	}
	if bc == nil || !bc.Prepared || bc.Awaiting != nil || bc.Report == nil {
		t.Fatalf("Check on B = %+v, want the prepared deployment checked", bc)
	}
	if bc.SchemaVersion != node.BootCheckSchemaVersion || bc.Report.SchemaVersion != node.ReportSchemaVersion {
		t.Errorf("Check on B: schemaVersion %d, report's %d; want %d and %d", bc.SchemaVersion, bc.Report.SchemaVersion, node.BootCheckSchemaVersion, node.ReportSchemaVersion)
	}
	checked := validateJSON(t, "check", bc)
	schematest.Invalid(t, "check", checked, "prepared as a string", func(v any) { schematest.Object(v)["prepared"] = "yes" })
	schematest.Invalid(t, "check", checked, "no schemaVersion", func(v any) { delete(schematest.Object(v), "schemaVersion") })
	schematest.Invalid(t, "check", checked, "no booted deployment", func(v any) { delete(schematest.Object(v), "booted") })
	schematest.Invalid(t, "check", checked, "a report without its root", func(v any) { delete(schematest.Object(v, "report"), "root") })
	kept, err := filepath.Glob(filepath.Join(booted.Var(), node.VarRecordDir, "check-*.json"))
	if err != nil || len(kept) != 1 {
		t.Fatalf("the first-boot check's reports under /var: %v (%v), want one", kept, err)
	}
	validateFile(t, "check", kept[0])
	if _, err := os.Stat(record); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Check on B kept the record (%v), want it retired", err)
	}
}

// TestVarRecordSymlinked: with the stateroot's /var/lib/mcbake a symlink
// out of the sysroot, the record, the MachineConfigs, the first-boot
// report and the retired record stay inside the stateroot's /var
// (symlinks resolve inside it, as in a deployment: the link's target
// taken as a path in it), and the first-boot check finds the record
// Prepare wrote.
func TestVarRecordSymlinked(t *testing.T) {
	st, mcs, _ := setup(t)
	s, booted, staged := deployments(t, st)
	outside := t.TempDir()
	varDir := staged.Var()
	if err := os.MkdirAll(filepath.Join(varDir, "lib"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(outside, filepath.Join(varDir, "lib", "mcbake")); err != nil {
		t.Fatal(err)
	}
	// Where the link leads inside the stateroot's /var.
	if err := os.MkdirAll(filepath.Join(varDir, outside), 0o755); err != nil {
		t.Fatal(err)
	}
	if _, err := node.Prepare(context.Background(), s, booted, staged, node.PrepareOptions{MachineConfigs: mcs}); err != nil {
		t.Fatalf("Prepare: %v", err)
	}
	// B's entry is the default, as on its first boot.
	bc, err := node.Check(context.Background(), node.CheckOptions{Sysroot: st.Sysroot, Now: func() time.Time { return time.Unix(1e9, 0) }})
	if err != nil {
		t.Fatalf("Check: %v", err)
	}
	if bc == nil || !bc.Prepared {
		t.Errorf("Check = %+v, want the prepared deployment checked", bc)
	}
	if names, err := os.ReadDir(outside); err != nil || len(names) != 0 {
		t.Errorf("the directory /var/lib/mcbake links to, outside the sysroot, has %v (%v), want nothing", names, err)
	}
}

// newestEntry is the path and content of the default bootloader entry of
// a sysroot's boot directory: the highest version.
func newestEntry(t *testing.T, boot string) (string, []byte) {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(boot, "loader", "entries", "*.conf"))
	if err != nil || len(files) < 2 {
		t.Fatalf("bootloader entries: %v (%v), want two", files, err)
	}
	best, bestV, content := "", -1, []byte(nil)
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(line, "version "); ok {
				if n, _ := strconv.Atoi(strings.TrimSpace(v)); n > bestV {
					best, bestV, content = f, n, b
				}
			}
		}
	}
	return best, content
}

// TestReadRecordsHostile: a record file that is not a regular file is
// refused without blocking or reading it, null records are left out.
func TestReadRecordsHostile(t *testing.T) {
	dir := t.TempDir()
	nulls := filepath.Join(dir, "nulls.json")
	if err := os.WriteFile(nulls, []byte("[null, null]"), 0o644); err != nil {
		t.Fatal(err)
	}
	if rs, err := node.ReadRecords(nulls); err != nil || len(rs) != 0 {
		t.Errorf("ReadRecords([null, null]) = %v, %v; want no record", rs, err)
	}
	zero := filepath.Join(dir, "zero.json")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo.json")
	if err := unix.Mkfifo(fifo, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{zero, fifo} {
		if _, err := node.ReadRecords(f); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("ReadRecords(%s) = %v, want it refused as not a regular file", filepath.Base(f), err)
		}
	}
}
