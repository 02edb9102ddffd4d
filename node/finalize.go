package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/render"
)

// FinalizedSchemaVersion is the version of FinalizedReport's JSON format.
const FinalizedSchemaVersion = 1

// FinalizedReport is what Finalized found in the finalized deployment and
// did about it.
type FinalizedReport struct {
	SchemaVersion int `json:"schemaVersion"`
	// Pending is the finalized deployment the next boot starts.
	Pending Deployment `json:"pending"`
	// Restaged is set when it is not the deployment PrepareRevert
	// prepared: something staged again after it.
	Restaged bool `json:"restaged,omitempty"`
	// Checked counts the owned /etc paths compared; Changes lists the
	// ones that were wrong, and what was done.
	Checked int      `json:"checked"`
	Changes []Change `json:"changes"`
	Error   string   `json:"error,omitempty"`
}

// FinalizedOptions say what Finalized does.
type FinalizedOptions struct {
	// Sysroot is the ostree sysroot, "/" on a booted node.
	Sysroot string
	// Repair writes every owned path still wrong; without it Finalized
	// only reports them.
	Repair bool
}

// Finalized is the safety net of a prepared revert, run at shutdown after
// ostree-finalize-staged.service: it finds the deployment the next boot
// starts, compares its /etc with the MachineConfigs PrepareRevert stored
// under the stateroot's /var, and, with o.Repair, writes every owned path
// still wrong (in one transaction, labelled, in a private mount namespace
// when the sysroot is read-only). After finalization nothing merges any
// more, so it writes what the MachineConfigs want wherever it differs,
// but for the paths PrepareRevert never writes (see PrepareRevert). It
// returns nil and no error when no revert was prepared from the booted
// deployment, or when nothing was finalized. It stops, having written
// nothing, when ctx is done before the repair starts.
func Finalized(ctx context.Context, o FinalizedOptions) (*FinalizedReport, error) {
	s, err := OpenSysroot(o.Sysroot)
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
	pending, err := s.Pending(booted)
	if err != nil || pending == nil {
		return nil, err
	}
	last, mcs, err := preparedRevert(booted)
	if err != nil || last == nil {
		return nil, err
	}
	rep := &FinalizedReport{SchemaVersion: FinalizedSchemaVersion, Pending: *pending, Restaged: last.Staged.Dir != pending.Dir}
	root, err := fstree.Open(pending.Dir)
	if err != nil {
		return nil, err
	}
	res, err := render.Render(ctx, machineconfig.Merge(mcs), root)
	err = errors.Join(err, root.Close())
	if err != nil {
		return nil, err
	}
	var writes []render.Entry
	for _, e := range res.Entries {
		c := Change{Path: e.Where(), Op: Unchanged, Source: e.Source}
		if skipReason(e) != "" {
			continue
		}
		rep.Checked++
		k, err := differencesIn(pending.Dir, e)
		if err != nil {
			return nil, err
		}
		if len(k) == 0 {
			continue
		}
		c.Kinds, c.Op = k, opFor(e.Type)
		if o.Repair {
			writes = append(writes, e)
		}
		rep.Changes = append(rep.Changes, c)
	}
	if !o.Repair {
		return rep, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	// The report is kept beside the record for the first-boot check: the
	// journal may lose what a unit prints this late in a shutdown.
	err = withWritable(s.Physical, func() error {
		var werr error
		if len(writes) > 0 {
			if werr = repairDeployment(pending, writes, rep); werr != nil {
				rep.Error = werr.Error()
			}
		}
		return errors.Join(werr, writeFinalized(booted, rep))
	})
	return rep, err
}

// FinalizedFile, in the stateroot's VarRecordDir, is the last report of
// the shutdown safety net (Finalized with repair); the first-boot check
// includes it in its own and retires it with the record.
const FinalizedFile = "finalized.json"

func writeFinalized(booted *Deployment, rep *FinalizedReport) error {
	b, err := jsonIndent(rep)
	if err != nil {
		return err
	}
	varRoot, err := Open(booted.Var())
	if err != nil {
		return err
	}
	defer varRoot.Close()
	if err := varRoot.WriteFile(path.Join(VarRecordDir, FinalizedFile), b, 0o644, 0, 0); err != nil {
		return fmt.Errorf("writing the safety net's report: %w", err)
	}
	return nil
}

// differencesIn observes e's path in the deployment at dir.
func differencesIn(dir string, e render.Entry) ([]string, error) {
	root, err := Open(dir)
	if err != nil {
		return nil, err
	}
	k, err := differences(root, e.Where(), e.Entry)
	return k, errors.Join(err, root.Close())
}

// repairDeployment writes the entries into the deployment in one
// transaction and records each path's state in rep.
func repairDeployment(d *Deployment, writes []render.Entry, rep *FinalizedReport) error {
	root, err := Open(d.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	labels, err := LoadLabeler(root)
	if err != nil {
		return err
	}
	t := &txn{root: root}
	for _, e := range writes {
		t.add(e.Where(), e, labels.Lookup(e.Where(), e.Type))
	}
	terr := t.run()
	state := map[string]State{}
	for _, w := range t.writes {
		state[w.path] = w.state
	}
	for i := range rep.Changes {
		rep.Changes[i].State = state[clean(rep.Changes[i].Path)]
	}
	return terr
}

// preparedRevert returns the last record of a revert prepared from the
// booted deployment and its MachineConfigs, or nil when there is none
// (or it was prepared from another deployment, an earlier boot).
func preparedRevert(booted *Deployment) (*Record, []*machineconfig.MachineConfig, error) {
	varRoot, err := Open(booted.Var())
	if err != nil {
		return nil, nil, err
	}
	defer varRoot.Close()
	records, err := readHistoryIn(varRoot)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, err
	}
	var last *Record
	for _, r := range records {
		if !r.DryRun && r.Booted.Dir == booted.Dir {
			last = r
		}
	}
	if last == nil {
		return nil, nil, nil
	}
	mcs, err := readMachineConfigsIn(varRoot)
	if err != nil {
		return nil, nil, err
	}
	return last, mcs, nil
}

// readHistoryIn reads the history under the stateroot's /var, opened as
// varRoot (symlinks resolve inside it, never out of it), without the
// records' changes: who and when is what the safety net and the
// first-boot check need.
func readHistoryIn(varRoot *Root) ([]*Record, error) {
	b, err := readFileIn(varRoot, path.Join(VarRecordDir, RecordFile), MaxRecordFile)
	if err != nil {
		return nil, err
	}
	var stored []*storedRecord
	if err := json.Unmarshal(b, &stored); err != nil {
		return nil, fmt.Errorf("/var%s: %w", path.Join(VarRecordDir, RecordFile), err)
	}
	out := make([]*Record, 0, len(stored))
	for _, r := range stored {
		if r != nil {
			out = append(out, r.Record.header())
		}
	}
	return out, nil
}

// readMachineConfigsIn reads the MachineConfigs stored beside the history
// under the stateroot's /var, opened as varRoot.
func readMachineConfigsIn(varRoot *Root) ([]*machineconfig.MachineConfig, error) {
	p := path.Join(VarRecordDir, MachineConfigsFile)
	b, err := readFileIn(varRoot, p, machineconfig.MaxInput)
	if err != nil {
		return nil, fmt.Errorf("reading the prepared MachineConfigs: %w", err)
	}
	mcs, err := machineconfig.Parse("/var"+p, b)
	if err != nil {
		return nil, fmt.Errorf("reading the prepared MachineConfigs: %w", err)
	}
	sort.SliceStable(mcs, func(i, j int) bool { return mcs[i].Name < mcs[j].Name })
	return mcs, nil
}

// BootCheckSchemaVersion is the version of BootCheck's JSON format.
const BootCheckSchemaVersion = 1

// BootCheck is what Check found on the first boot after a revert.
type BootCheck struct {
	SchemaVersion int        `json:"schemaVersion"`
	Booted        Deployment `json:"booted"`
	// Prepared is set when the booted deployment is the one PrepareRevert
	// prepared.
	Prepared bool    `json:"prepared"`
	Report   *Report `json:"report"`
	// Finalized is the report of the shutdown safety net before this
	// boot, when it ran (what it found and repaired).
	Finalized *FinalizedReport `json:"finalized,omitempty"`
	// Awaiting is set, and Report nil, when the booted deployment is not
	// the prepared one and the prepared one is still to boot: staged, or
	// finalized for the next boot. Nothing was checked and the record is
	// kept, for the safety net and the check of that boot.
	Awaiting *Deployment `json:"awaiting,omitempty"`
}

// CheckOptions say where Check runs.
type CheckOptions struct {
	// Sysroot is the ostree sysroot, "/" on a booted node.
	Sysroot string
	// Now stamps the retired record (time.Now when nil).
	Now func() time.Time
}

// Check is the first-boot check of a prepared revert: when the node booted
// the deployment a revert was prepared for (a record under the
// stateroot's /var names it as staged), it validates the running system
// against the stored MachineConfigs (Validate, on "/" of a booted node,
// or on the deployment's directory otherwise), writes the report beside
// the record and retires the record, so the check runs once. Before that
// boot (the prepared deployment is staged, or the next to boot) it
// checks nothing and keeps the record: see BootCheck.Awaiting. It only
// reads and reports: it writes nothing the MachineConfigs own. It returns
// nil and no error when there is nothing to check. It stops before
// validating when ctx is done.
func Check(ctx context.Context, o CheckOptions) (*BootCheck, error) {
	s, err := OpenSysroot(o.Sysroot)
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
	varRoot, err := Open(booted.Var())
	if err != nil {
		return nil, err
	}
	defer varRoot.Close()
	records, err := readHistoryIn(varRoot)
	if errors.Is(err, fs.ErrNotExist) || err == nil && len(records) == 0 {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	bc := &BootCheck{SchemaVersion: BootCheckSchemaVersion, Booted: *booted}
	for _, r := range records {
		if !r.DryRun && r.Staged.Checksum == booted.Checksum {
			bc.Prepared = true
		}
	}
	if !bc.Prepared {
		if bc.Awaiting, err = awaiting(s, booted, records); err != nil || bc.Awaiting != nil {
			return bc, err
		}
	}
	mcs, err := readMachineConfigsIn(varRoot)
	if err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if b, err := readFileIn(varRoot, path.Join(VarRecordDir, FinalizedFile), MaxRecordFile); err == nil {
		var fr FinalizedReport
		if err := json.Unmarshal(b, &fr); err != nil {
			return nil, fmt.Errorf("reading the safety net's report: %s: %w", FinalizedFile, err)
		}
		bc.Finalized = &fr
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reading the safety net's report: %w", err)
	}
	rootDir := booted.Dir
	if s.Running {
		rootDir = "/"
	}
	root, err := Open(rootDir)
	if err != nil {
		return nil, err
	}
	bc.Report, err = Validate(ctx, root, mcs)
	if err = errors.Join(err, root.Close()); err != nil {
		return nil, err
	}
	return bc, retire(varRoot, bc, o.Now)
}

// awaiting returns the deployment a record prepared when it is still to
// boot: the staged deployment, or the one the next boot starts; nil when
// there is none (a finalization that failed leaves the deployment on
// disk, staged no more: it never boots).
func awaiting(s *Sysroot, booted *Deployment, records []*Record) (*Deployment, error) {
	var next []*Deployment
	staged, err := s.Staged(booted)
	switch {
	case err == nil:
		next = append(next, staged)
	case !errors.Is(err, ErrNothingStaged) && !errors.Is(err, ErrSeveralStaged) && !errors.Is(err, ErrStagedIsBooted):
		return nil, err
	}
	pending, err := s.Pending(booted)
	if err != nil {
		return nil, err
	}
	if pending != nil {
		next = append(next, pending)
	}
	for i := len(records) - 1; i >= 0; i-- {
		r := records[i]
		for _, d := range next {
			if !r.DryRun && d.Stateroot == r.Staged.Stateroot && d.Name() == r.Staged.Name() {
				return d, nil
			}
		}
	}
	return nil, nil
}

// retire writes the first-boot report and moves the record aside, in
// VarRecordDir of the stateroot's /var, opened as varRoot.
func retire(varRoot *Root, bc *BootCheck, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	stamp := strings.ReplaceAll(now().UTC().Format(time.RFC3339), ":", "")
	b, err := jsonIndent(bc)
	if err != nil {
		return err
	}
	in := func(name string) string { return path.Join(VarRecordDir, name) }
	if err := varRoot.WriteFile(in("check-"+stamp+".json"), b, 0o644, 0, 0); err != nil {
		return err
	}
	if bc.Finalized != nil {
		if err := varRoot.rename(in(FinalizedFile), in("finalized-"+stamp+".json")); err != nil {
			return err
		}
	}
	return varRoot.rename(in(RecordFile), in("record-"+stamp+".json"))
}
