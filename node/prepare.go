package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
)

// RecordDir is where, inside a deployment, PrepareRevert keeps its record
// and the MachineConfigs it prepared the deployment for.
const RecordDir = "/etc/mcbake/revert"

// Files in RecordDir.
const (
	RecordFile         = "record.json"
	MachineConfigsFile = "machineconfigs.json"
)

// VarRecordDir is where, under the stateroot's /var (which a re-stage
// does not replace), PrepareRevert keeps copies of them for the shutdown
// safety net.
const VarRecordDir = "/lib/mcbake/revert"

// PrepareOptions say what PrepareRevert prepares.
type PrepareOptions struct {
	// Sysroot is the ostree sysroot, "/" on a booted node.
	Sysroot string
	// MachineConfigs are what the node must have after the revert.
	MachineConfigs []*machineconfig.MachineConfig
	// Plan, when set, is the revert plan CI computed for these images:
	// PrepareRevert refuses, writing nothing, unless it names the booted
	// and staged images and lists exactly the paths the node computes.
	Plan *revert.Plan
	// DryRun computes and reports, writing nothing.
	DryRun bool
	// Now stamps the record (time.Now when nil).
	Now func() time.Time

	// failAt injects a failure before the commit of write i (tests).
	failAt func(i int) error
}

// Change is what PrepareRevert did, or in a dry run would do, to one path
// the MachineConfigs own.
type Change struct {
	// Path is where the path is in the deployment; RequestedPath the
	// MachineConfig's path when different.
	Path          string `json:"path"`
	RequestedPath string `json:"requestedPath,omitempty"`
	// Op is write, mkdir, symlink, link, remove or unchanged; skipped
	// when the path cannot or must not be written (Reason says why).
	Op string `json:"op"`
	// Kinds say what finalization would get wrong without the write.
	Kinds []string `json:"kinds,omitempty"`
	// Node is what the node did to the path (what finalization applies).
	Node   NodeChange `json:"node,omitempty"`
	Reason string     `json:"reason,omitempty"`
	// Label is the SELinux context written with the path.
	Label string `json:"label,omitempty"`
	// ConfigDir is set on the directory of the config the
	// machine-config-daemon stores: finalization makes it from the node's
	// copy once the daemon stored the config there, so CI's prediction
	// keeps it; it is written only because the staged /etc lacks it as
	// the parent of other writes.
	ConfigDir bool `json:"configDir,omitempty"`
	// AsWanted is set when the staged deployment already holds what the
	// MachineConfigs want at the path (the base has it, or an earlier
	// run wrote it): a plan that lists it agrees.
	AsWanted bool `json:"asWanted,omitempty"`
	// State says whether the path holds its old or new entry.
	State  State           `json:"state,omitempty"`
	Source manifest.Source `json:"source"`
}

// Ops of a Change besides the write ops.
const (
	OpSkipped = "skipped"
)

// Record is what PrepareRevert did: the deployments, and one Change per
// owned path.
type Record struct {
	SchemaVersion int        `json:"schemaVersion"`
	Time          time.Time  `json:"time"`
	DryRun        bool       `json:"dryRun,omitempty"`
	Booted        Deployment `json:"booted"`
	Staged        Deployment `json:"staged"`
	// MachineConfigs name the inputs, as the manifest does.
	MachineConfigs []manifest.MachineConfig `json:"machineConfigs"`
	Changes        []Change                 `json:"changes"`
	// Error is set when the writes failed; every change's State says
	// where its path ended.
	Error string `json:"error,omitempty"`
	// Notes say what the run found besides the paths: a record history
	// that could not be read, say, and was kept aside.
	Notes []string `json:"notes,omitempty"`
	// Omitted counts the changes a stored record leaves out: the older
	// records of the history under /var keep only who and when.
	Omitted int `json:"omitted,omitempty"`
}

// RecordSchemaVersion is the version of the record format.
const RecordSchemaVersion = 1

// Written returns the changes that wrote (or in a dry run would write) a
// path.
func (r *Record) Written() []Change {
	var out []Change
	for _, c := range r.Changes {
		if c.Op != Unchanged && c.Op != OpSkipped {
			out = append(out, c)
		}
	}
	return out
}

// PrepareRevert writes into the staged deployment's /etc exactly the
// owned paths its finalization would leave wrong, so that the node boots
// the staged deployment (the base image, after a revert) with every
// MachineConfig file in place after one reboot. Run it after the last
// staging step and before the reboot.
//
// It finds the booted and the staged deployment of the sysroot; renders
// the MachineConfigs against the staged deployment (what the
// machine-config-daemon would write there); computes, for every owned path
// under /etc, the outcome of the finalize merge from the booted
// deployment's defaults (usr/etc), the node's live /etc and the staged
// /etc; and writes the paths that would end wrong, where the node left
// them unmodified (a path the node modified is its own: the merge keeps
// the node's copy). It never writes anything but those paths: not a path
// the node modified, not a parent the MachineConfigs do not own, not a
// file the certificate writer manages, not the config the
// machine-config-daemon stores. Every path is labelled with the SELinux
// context of the staged deployment's policy, when it has one. When the
// sysroot is mounted read-only, the writes happen in a private mount
// namespace where it is remounted read-write.
//
// The writes are one transaction: on a failure every path is put back, and
// the returned record (also on error) says, per path, whether it is old
// or new. PrepareRevert is idempotent: a second run finds nothing wrong
// and writes nothing. The record and the MachineConfigs are stored in
// RecordDir of the staged deployment and in VarRecordDir of the
// stateroot's /var, in the same transaction: when they cannot be
// written, no path is (the record of a failed transaction is kept under
// /var only). Inputs that cannot be prepared (no single staged
// deployment, an owned path the staged /etc has as a fifo or a symlink,
// a plan for other images or paths) are errors and nothing is written.
// So is a ctx done before the writes begin; once they have, they are
// finished (or undone) whatever ctx says, so that no transaction is left
// half made.
func PrepareRevert(ctx context.Context, opts PrepareOptions) (*Record, error) {
	s, err := OpenSysroot(opts.Sysroot)
	if err != nil {
		return nil, err
	}
	booted, err := s.Booted()
	if err != nil {
		return nil, err
	}
	staged, err := s.Staged(booted)
	if err != nil {
		return nil, err
	}
	return Prepare(ctx, s, booted, staged, opts)
}

// Prepare is PrepareRevert for deployments already found: staged is the
// deployment the next boot starts, whose /etc finalization merges the
// node's changes into, and booted the deployment the node runs (whose
// usr/etc and etc are the defaults and the node's /etc).
// Runs on one sysroot (Prepare, Finalized, Check, SweepTemporaries) are
// one at a time: Prepare waits up to 10 s for another to end, from the
// reading of the trees to the record, then fails with a *BusyError that
// names the lock.
func Prepare(ctx context.Context, s *Sysroot, booted, staged *Deployment, opts PrepareOptions) (*Record, error) {
	if len(opts.MachineConfigs) == 0 {
		return nil, errors.New("no MachineConfig given")
	}
	unlock, err := s.lockRuns()
	if err != nil {
		return nil, err
	}
	defer unlock()
	now := time.Now
	if opts.Now != nil {
		now = opts.Now
	}
	rec := &Record{SchemaVersion: RecordSchemaVersion, Time: now().UTC(), DryRun: opts.DryRun, Booted: *booted, Staged: *staged}
	for _, mc := range opts.MachineConfigs {
		rec.MachineConfigs = append(rec.MachineConfigs, manifest.MachineConfig{Name: mc.Name, Digest: mc.Digest})
	}
	w, err := planPrepare(ctx, s, booted, staged, opts.MachineConfigs, rec)
	if err != nil {
		return nil, err
	}
	if opts.Plan != nil {
		if err := checkPlan(s, booted, staged, opts.Plan, rec, w.res); err != nil {
			return nil, err
		}
	}
	if opts.DryRun {
		return rec, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("before writing: %w", context.Cause(ctx))
	}
	err = withWritable(s.Physical, func() error { return applyPrepare(ctx, staged, w, rec, opts) })
	return rec, err
}

// prepared is a computed preparation: the writes, by path, with the index
// of their Change.
type prepared struct {
	res    *render.Result // the rendering against the staged deployment
	writes []pendingWrite
	mcs    []byte // the MachineConfigs, as stored with the record
}

type pendingWrite struct {
	change int
	entry  render.Entry
}

// planPrepare computes every owned path's Change (into rec) and the
// writes. It reads, never writes.
func planPrepare(ctx context.Context, s *Sysroot, booted, staged *Deployment, mcs []*machineconfig.MachineConfig, rec *Record) (*prepared, error) {
	bootedRoot, err := fstree.Open(booted.Dir)
	if err != nil {
		return nil, err
	}
	defer bootedRoot.Close()
	stagedRoot, err := fstree.Open(staged.Dir)
	if err != nil {
		return nil, err
	}
	defer stagedRoot.Close()
	res, err := render.Render(ctx, machineconfig.Merge(mcs), stagedRoot)
	if err != nil {
		return nil, err
	}
	entries := append([]render.Entry(nil), res.Entries...)
	sort.SliceStable(entries, func(i, j int) bool { return entries[i].Where() < entries[j].Where() })
	// A removal the MCD makes whatever is there, where the staged
	// deployment has nothing (an earlier run removed it, or the base never
	// had it): owned all the same, and judged like any entry, after them.
	for _, pth := range sortedKeys(removalPaths(res)) {
		entries = append(entries, render.Entry{Entry: manifest.Entry{Path: pth, Type: manifest.Absent, Source: res.Removes[pth]}})
	}
	p := &prepared{res: res}
	parents := parentCache{}
	var errs []error
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("computing the writes: %w", context.Cause(ctx))
		}
		c, write, err := changeFor(e, bootedRoot, stagedRoot, parents)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if write {
			p.writes = append(p.writes, pendingWrite{change: len(rec.Changes), entry: e})
		}
		rec.Changes = append(rec.Changes, c)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	p.writes = dropUnneededConfigDir(p.writes, rec)
	if p.mcs, err = mcList(mcs); err != nil {
		return nil, err
	}
	return p, nil
}

// dropUnneededConfigDir keeps the write of the config directory only when
// another write lies below it: finalization makes the directory from the
// node's copy once the daemon stored its config there.
func dropUnneededConfigDir(writes []pendingWrite, rec *Record) []pendingWrite {
	dir := path.Dir(render.CurrentConfig)
	needed := false
	for _, w := range writes {
		if strings.HasPrefix(w.entry.Where(), dir+"/") {
			needed = true
		}
	}
	if needed {
		return writes
	}
	out := writes[:0]
	for _, w := range writes {
		if c := &rec.Changes[w.change]; c.ConfigDir {
			c.Op, c.Reason = OpSkipped, "finalization makes it from the node's copy, where the machine-config-daemon stores its config"
			continue
		}
		out = append(out, w)
	}
	return out
}

// changeFor computes the Change of one rendered entry, and whether it is
// to be written.
func changeFor(e render.Entry, booted, staged *fstree.Dir, parents parentCache) (Change, bool, error) {
	c := Change{Path: e.Where(), Op: Unchanged, Source: e.Source}
	if e.Where() != e.Path {
		c.RequestedPath = e.Path
	}
	switch skip := skipReason(e); {
	case skip != "":
		c.Op, c.Reason = OpSkipped, skip
		if movedIntoVar(e, booted) {
			c.Reason = "the base moves it into /var through a symlink, where the node has nothing (its copy is outside /var on the booted deployment); mcbake-node writes no /var path, and the diff reports it removed"
		}
		return c, false, nil
	}
	rel := strings.TrimPrefix(e.Where(), "/etc")
	// ostree's diff sees files, not links: a hard link the MCD made in
	// the live /etc is the file it links to, as the default is.
	asFile := e.Entry
	if asFile.Type == manifest.Hardlink {
		asFile.Type, asFile.Target = manifest.File, ""
	}
	def, err := observe(booted, "/usr/etc"+rel, asFile)
	if err != nil {
		return c, false, err
	}
	liveFile, err := observe(booted, "/etc"+rel, asFile)
	if err != nil {
		return c, false, err
	}
	live := liveFile // what finalization copies when the node changed it
	if e.Type == manifest.Hardlink {
		if live, err = observe(booted, "/etc"+rel, e.Entry); err != nil {
			return c, false, err
		}
	}
	st, err := observe(staged, e.Where(), e.Entry)
	if err != nil {
		return c, false, err
	}
	if err := writable(e, st); err != nil {
		return c, false, err
	}
	c.ConfigDir = e.Path == path.Dir(render.CurrentConfig)
	c.Node = nodeChange(def, liveFile)
	reason := fmt.Sprintf("the node %s it: finalization keeps the node's change", c.Node)
	if c.Node == Unmodified {
		// A directory above it that the node removed, or replaced with
		// something else, takes it along: finalization removes the
		// directory, or copies the node's in its place.
		parent, change, err := parents.change(booted, rel)
		if err != nil {
			return c, false, err
		}
		if change != Unmodified {
			c.Node, live = change, observed{}
			reason = fmt.Sprintf("the node removed the directory %s above it: finalization removes it with the directory", "/etc"+parent)
			if change == Modified {
				reason = fmt.Sprintf("the node replaced the directory %s above it: finalization puts the node's copy in the directory's place", "/etc"+parent)
			}
		}
	}
	after := finalized(c.Node, live, st)
	c.Kinds = kinds(e.Entry, after.e, after.ok)
	c.AsWanted = len(kinds(e.Entry, st.e, st.ok)) == 0
	switch {
	case len(c.Kinds) == 0:
	case c.Node != Unmodified:
		c.Op, c.Reason = OpSkipped, reason
	default:
		c.Op = opFor(e.Type)
		return c, true, nil
	}
	return c, false, nil
}

// parentCache remembers parentChange by directory: the paths of one
// directory share it (a thousand files in one are common).
type parentCache map[string]parentResult

type parentResult struct {
	dir    string
	change NodeChange
}

// change is parentChange(booted, rel), looked up once per directory.
func (c parentCache) change(booted *fstree.Dir, rel string) (string, NodeChange, error) {
	key := path.Dir(path.Clean("/" + rel))
	if r, ok := c[key]; ok {
		return r.dir, r.change, nil
	}
	dir, change, err := parentChange(booted, rel)
	if err == nil {
		c[key] = parentResult{dir, change}
	}
	return dir, change, err
}

// parentChange returns the directory above rel (a path under /etc,
// without it) that the node removed, or replaced with something that is
// not a directory, relative to the booted deployment's defaults, and what
// the node did to it; Unmodified when there is none. It walks down from
// /etc as ostree's diff does, and stops where the defaults have no real
// directory (a symlink, say): the diff does not look below it, and every
// lookup before has real directories above it on both sides.
func parentChange(booted *fstree.Dir, rel string) (string, NodeChange, error) {
	parts := strings.Split(strings.Trim(rel, "/"), "/")
	dir := ""
	for _, name := range parts[:len(parts)-1] {
		dir += "/" + name
		def, ok, err := booted.Lstat("/usr/etc" + dir)
		if err != nil {
			return "", "", err
		}
		if !ok || def.Type != manifest.Directory {
			return "", Unmodified, nil // not the node's doing: the defaults have no directory there
		}
		live, ok, err := booted.Lstat("/etc" + dir)
		switch {
		case err != nil:
			return "", "", err
		case !ok:
			return dir, Removed, nil
		case live.Type != manifest.Directory:
			return dir, Modified, nil
		}
	}
	return "", Unmodified, nil
}

// movedIntoVar reports whether the staged deployment resolves e into
// /var where the booted one resolves it outside /var: a deploy puts no
// image's /var content on the node, so nothing is there after the reboot.
func movedIntoVar(e render.Entry, booted *fstree.Dir) bool {
	if revert.ZoneOf(e.Where()) != revert.ZoneVar || e.Type == manifest.Absent {
		return false
	}
	was, err := fstree.Locate(booted, e.Path, e.Type)
	return err == nil && revert.ZoneOf(was) != revert.ZoneVar
}

// skipReason says why an owned path is never written into the staged
// deployment, "" when it may be.
func skipReason(e render.Entry) string {
	switch {
	case e.Path == render.CurrentConfig:
		return "the machine-config-daemon stores the config it runs there"
	case render.CertificateWriterManages(e.Path) || render.CertificateWriterManages(e.Where()):
		return "the machine-config-daemon's certificate writer manages it on the node"
	}
	switch revert.ZoneOf(e.Where()) {
	case revert.ZoneUsr:
		return "outside /etc and /var: the base's version replaces it and a node cannot write it"
	case revert.ZoneVar:
		return "under /var: deploys never touch it"
	case revert.ZoneDropped:
		return "never deployed"
	}
	if e.Where() == "/etc" {
		return "the /etc directory itself"
	}
	return ""
}

// observe is fstree.Observe as an observed value.
func observe(root *fstree.Dir, p string, want manifest.Entry) (observed, error) {
	e, ok, err := fstree.Observe(root, p, want)
	return observed{e: e, ok: ok}, err
}

// writable refuses a staged path that a write of e must not replace: a
// fifo, device or socket, a symlink where a file or directory is owned,
// a directory where anything else is.
func writable(e render.Entry, st observed) error {
	if !st.ok || e.Type == manifest.Absent {
		return nil
	}
	bad := ""
	switch {
	case st.e.Type == manifest.Other:
		bad = "something that is not a file, directory or symlink"
	case st.e.Type == manifest.Symlink && (e.Type == manifest.File || e.Type == manifest.Directory):
		bad = "a symlink"
	case st.e.Type == manifest.Directory && e.Type != manifest.Directory:
		bad = "a directory"
	}
	if bad == "" {
		return nil
	}
	return fmt.Errorf("%s (%s %s): the staged deployment has %s there, where the MachineConfig owns a %s", e.Where(), e.Source.MachineConfig, e.Source.Field, bad, e.Type)
}

// mcList is the MachineConfigs as a List, the form stored with the
// record, which machineconfig.Load reads back.
func mcList(mcs []*machineconfig.MachineConfig) ([]byte, error) {
	var items []json.RawMessage
	for _, mc := range mcs {
		b, err := mc.JSON()
		if err != nil {
			return nil, err
		}
		items = append(items, b)
	}
	b, err := json.MarshalIndent(map[string]any{"apiVersion": "v1", "kind": "List", "items": items}, "", "  ")
	return append(b, '\n'), err
}

// applyPrepare sweeps the temporary entries killed runs left (see
// SweepTemporaries), then writes the staged deployment's paths, the
// record and the MachineConfigs in one transaction (the record says every path is new:
// it is only written when they all are). When the transaction fails, the
// record says where each path ended and goes under the stateroot's /var
// only. It runs with the sysroot writable.
func applyPrepare(ctx context.Context, staged *Deployment, p *prepared, rec *Record, opts PrepareOptions) error {
	root, err := Open(staged.Dir)
	if err != nil {
		return err
	}
	defer root.Close()
	varRoot, err := Open(staged.Var())
	if err != nil {
		return err
	}
	defer varRoot.Close()
	labels, err := LoadLabeler(root)
	if err != nil {
		return fmt.Errorf("reading the staged deployment's SELinux policy: %w", err)
	}
	swept, err := sweepDeployment(ctx, root, varRoot)
	if err != nil {
		return err
	}
	if len(swept) > 0 {
		rec.Notes = append(rec.Notes, sweptNote(swept))
	}
	t := &txn{root: root, failAt: opts.failAt}
	for _, w := range p.writes {
		label := labels.Lookup(w.entry.Where(), w.entry.Type)
		c := &rec.Changes[w.change]
		c.Label, c.State = label, StateNew
		t.add(w.entry.Where(), w.entry, label)
	}
	if err := queueRecord(t, root, varRoot, labels, rec, p.mcs); err != nil {
		for _, w := range p.writes {
			rec.Changes[w.change].State = StateOld
		}
		rec.Error = err.Error()
		return err
	}
	terr := t.run()
	byPath := map[string]State{}
	for _, w := range t.writes {
		if w.root == root {
			byPath[w.path] = w.state
		}
	}
	for _, w := range p.writes {
		rec.Changes[w.change].State = byPath[clean(w.entry.Where())]
	}
	if terr == nil {
		return nil
	}
	rec.Error = terr.Error()
	return errors.Join(terr, saveFailed(varRoot, rec, p.mcs))
}

// sweptNote says which temporary entries of killed runs a run removed.
func sweptNote(swept []string) string {
	shown := swept[:min(len(swept), 10)]
	more := ""
	if len(swept) > len(shown) {
		more = fmt.Sprintf(" and %d more", len(swept)-len(shown))
	}
	return fmt.Sprintf("removed %d temporary entries a killed run left: %s%s", len(swept), strings.Join(shown, ", "), more)
}

// removalPaths returns the paths of res.Removes that no entry of res has,
// as a set.
func removalPaths(res *render.Result) map[string]bool {
	out := map[string]bool{}
	for p := range res.Removes {
		out[p] = true
	}
	for _, e := range res.Entries {
		delete(out, e.Path)
	}
	return out
}
