// Package revert predicts what a revert to the base image does to owned paths.
//
// A node that reverts from a layered image to its base goes through
// ostree's three-way /etc merge: Predict and Diff apply its rules
// (docs/design.md, "ostree's /etc merge") to an ownership manifest and a
// view of the base's tree; PredictDerived and DiffDerived do the same for
// an image that carries no manifest (docs/design.md, "Images built by
// others"), comparing what the machine-config-daemon writes with the
// image's own defaults; NewPlan turns the prediction into the revert
// plan, the list of paths a node must rewrite after the rebase, and
// ReadPlan reads one back.
//
// The package is pure: it reads nothing but the manifest and the
// fstree.Tree trees it is given (a base image's index, a directory on
// disk), and builds without cgo or any containers/* module.
package revert

import (
	"context"
	"errors"
	"fmt"
	"path"
	"slices"
	"sort"
	"strings"
	"syscall"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// Zone is how an ostree deployment treats a path.
type Zone string

// Zones.
const (
	// ZoneEtc is three-way merged on every deploy.
	ZoneEtc Zone = "etc"
	// ZoneUsr is replaced by the new image; a node cannot rewrite it. Every
	// path outside /etc and /var is in this zone.
	ZoneUsr Zone = "usr"
	// ZoneVar is never touched by a deploy.
	ZoneVar Zone = "var"
	// ZoneDropped is never deployed (/run, /tmp, /proc, /sys, /dev).
	ZoneDropped Zone = "dropped"
)

// Outcome is what a revert does to an owned path.
type Outcome string

// Outcomes. Removed, Reverted, Restored and Lost are clobbers.
const (
	// Kept: after the revert the node has what the MachineConfig wants:
	// the base has exactly that, or the node's own copy survives the
	// merge (see nodeCopies).
	Kept Outcome = "kept"
	// Removed: the node's copy is an unmodified default of the image and
	// the base lacks the path, so the merge deletes it.
	Removed Outcome = "removed"
	// Reverted: the base's different default replaces the node's copy.
	Reverted Outcome = "reverted"
	// Restored: the MachineConfig removes the path (a disabled unit's
	// enablement link) and the base's default brings it back.
	Restored Outcome = "restored"
	// Lost: under /usr (or another replaced path): the base's version
	// wins and the node cannot rewrite it.
	Lost Outcome = "lost"
	// Untouched: under /var; deploys never touch it.
	Untouched Outcome = "untouched"
	// Dropped: never deployed at all.
	Dropped Outcome = "dropped"
)

// Clobbers reports whether the outcome leaves the path different from
// what the MachineConfig wants.
func (o Outcome) Clobbers() bool {
	return o == Removed || o == Reverted || o == Restored || o == Lost
}

// droppedRoots are never deployed by ostree-container import.
var droppedRoots = []string{"/run", "/tmp", "/proc", "/sys", "/dev"}

// ZoneOf classifies an absolute path already resolved through the base's
// symlinks.
func ZoneOf(p string) Zone {
	for _, d := range droppedRoots {
		if under(p, d) {
			return ZoneDropped
		}
	}
	switch {
	case under(p, "/etc"):
		return ZoneEtc
	case under(p, "/var"):
		return ZoneVar
	}
	return ZoneUsr
}

func under(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, dir+"/")
}

// Entry is the predicted fate of one owned path.
type Entry struct {
	// Path is where the owned path lands in the base (resolved through
	// the base's symlinks); RequestedPath is the MachineConfig's path when
	// different.
	Path          string          `json:"path"`
	RequestedPath string          `json:"requestedPath,omitempty"`
	Type          manifest.Type   `json:"type"`
	Zone          Zone            `json:"zone"`
	Base          manifest.State  `json:"base"`
	Differs       []manifest.Attr `json:"differs,omitempty"`
	Clobbered     bool            `json:"clobbered"`
	Outcome       Outcome         `json:"outcome"`
	Reason        string          `json:"reason"`
	Source        manifest.Source `json:"source"`
	// Image is, for an image without an mcbake manifest (PredictDerived),
	// the image's own default at the path compared with what the
	// MachineConfigs want there. Where the machine-config-daemon writes
	// the path, "same" means the node's copy is an unmodified default, and
	// "differs" or "absent" that the merge sees it modified or added; for
	// an absent entry, "absent" is the unmodified case. Ownership.BaseOnly
	// paths are the image's default on the node whatever this says. Nil
	// for mcbake's own images, whose defaults are what the MCD writes by
	// construction.
	Image *manifest.BaseState `json:"image,omitempty"`
	// Managed is set for the files the machine-config-daemon's
	// certificate writer keeps up to date on the node (rotated CAs, the
	// pull secret): whatever a revert does to them, the daemon writes
	// them again, and nothing rolls them back to the MachineConfig's
	// content, so a plan never rewrites them.
	Managed bool `json:"managed,omitempty"`
	// Want is the owned entry as the MachineConfig defines it.
	Want manifest.Entry `json:"-"`
}

// Predict predicts, for every entry of a layered image's manifest, what a
// revert to the base whose tree is base does, assuming the node's copy is
// exactly what the image baked (the MCD writes the same content). Each
// path is resolved through the base's symlinks, not those of the base the
// image was built on. Entries come back sorted by resolved path. An error
// means the base's tree could not be read.
func Predict(ctx context.Context, m *manifest.Manifest, base fstree.Tree) ([]Entry, error) {
	return predict(ctx, m, nil, base)
}

// Ownership is what the MachineConfigs own on a node that runs a layered
// image without an ownership manifest (docs/design.md, "Images built by
// others").
type Ownership struct {
	// Manifest lists the owned entries with the MachineConfig fields that
	// own them: what the machine-config-daemon writes on the node (the
	// MachineConfigs rendered against the image), and what they own only
	// on the base (BaseOnly). It records no base.
	Manifest *manifest.Manifest
	// BaseOnly are the paths (as requested) of Manifest's entries that the
	// machine-config-daemon does not write on the node, because the image
	// already has them as the MachineConfigs need (a parent directory the
	// base lacks) or already lacks them (a removal of a base path): the
	// node has the image's default there.
	BaseOnly map[string]bool
}

// PredictDerived is Predict for a layered image that carries no ownership
// manifest (docs/design.md, "Images built by others"): o says what the
// MachineConfigs own on a node that runs the image, and layered is the
// image's own tree. The node's copy of each path is what the MCD wrote
// (the image's default for BaseOnly paths); ostree's merge sees it
// unmodified only where layered's default equals it, so only there does
// the base's default replace it. A path the image bakes otherwise
// (Ignition's preset-based enablement, another mode or owner) is modified
// on the node and survives the revert. Entry.Image records the comparison.
func PredictDerived(ctx context.Context, o Ownership, layered, base fstree.Tree) ([]Entry, error) {
	return predict(ctx, o.Manifest, &defaults{tree: layered, baseOnly: o.BaseOnly}, base)
}

// defaults is what the node's copies are compared with when the image's
// defaults are not the manifest's entries: the image's tree, and the
// paths where the node has the image's default.
type defaults struct {
	tree     fstree.Tree
	baseOnly map[string]bool
}

// predict classifies every entry against the base, records the image's
// state of it when its defaults are given (d), then applies the merge
// rules that depend on what the node changed.
func predict(ctx context.Context, m *manifest.Manifest, d *defaults, base fstree.Tree) ([]Entry, error) {
	out := make([]Entry, 0, len(m.Entries))
	baseDirs, baseLinks := map[string]bool{}, map[string]string{}
	for _, me := range m.Entries {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		e, err := classify(me, base)
		if err == nil && d != nil {
			e.Image, err = imageState(me, d.tree)
		}
		if err == nil && slices.Contains(e.Differs, manifest.AttrType) {
			var have manifest.Entry
			have, _, err = base.Lstat(e.Path)
			baseDirs[e.Path] = have.Type == manifest.Directory
		}
		if err == nil && d != nil && me.Type == manifest.Directory {
			err = linkAt(base, me.Path, baseLinks)
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %w", me.Path, err)
		}
		out = append(out, e)
	}
	cc, err := fstree.Resolve(base, render.CurrentConfig)
	if err != nil && !errors.Is(err, fstree.ErrTooManyLinks) {
		return nil, err
	}
	rules := merge{cc: cc, baseDirs: baseDirs, baseLinks: baseLinks, base: base}
	if d != nil {
		rules.baseOnly, rules.layered = d.baseOnly, d.tree
	}
	rules.apply(out)
	for i := range out {
		out[i].Clobbered = out[i].Outcome.Clobbers()
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

// classify resolves an entry in the base and gives it the outcome of the
// merge table for a node whose copy is the image's unmodified default.
func classify(me manifest.Entry, base fstree.Tree) (Entry, error) {
	rp, err := locate(base, me)
	if err != nil {
		return Entry{}, err
	}
	at := me
	at.ResolvedPath = rp
	st, err := baseState(base, at)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Path: rp, Type: me.Type, Zone: ZoneOf(rp), Base: st.State, Differs: st.Differs, Source: me.Source, Want: me}
	if rp != me.Path {
		e.RequestedPath = me.Path
	}
	e.Outcome, e.Reason = outcome(e.Zone, me.Type, st)
	switch {
	case e.Zone == ZoneVar && ZoneOf(me.Where()) != ZoneVar && me.Type != manifest.Absent:
		// The node wrote it where the image has it; the base's symlink
		// leads to a /var path that the deploy does not populate.
		e.Outcome, e.Reason = Removed, fmt.Sprintf("the base resolves it into /var through a symlink, but the node's copy is at %s, and a deploy never puts an image's /var content on an existing node: the node has nothing there", me.Where())
	case e.Zone == ZoneEtc && me.Type == manifest.Hardlink && e.Outcome == Kept:
		e.Outcome, e.Reason = Reverted, "ostree's /etc merge copies the base's defaults file by file: the hard link is not kept, each path gets its own copy"
	}
	e.Managed = me.Managed != "" || render.CertificateWriterManages(me.Path) || render.CertificateWriterManages(rp)
	return e, nil
}

// locate is where the entry lands in root; a symlink loop leaves the path
// as it is.
func locate(root fstree.Tree, me manifest.Entry) (string, error) {
	rp, err := fstree.Locate(root, me.Path, me.Type)
	if errors.Is(err, fstree.ErrTooManyLinks) {
		return path.Clean(me.Path), nil
	}
	return rp, err
}

// linkAt records in links the requested path p when the base has a
// symlink at p itself (its parents resolved), and where.
func linkAt(base fstree.Tree, p string, links map[string]string) error {
	at, err := fstree.Resolve(base, p)
	if errors.Is(err, fstree.ErrTooManyLinks) {
		return nil
	}
	if err != nil {
		return err
	}
	have, ok, err := base.Lstat(at)
	if ok && have.Type == manifest.Symlink && ZoneOf(at) == ZoneEtc {
		links[p] = at
	}
	if isLoop(err) {
		return nil
	}
	return err
}

// imageState compares the image's default at the entry's path (resolved
// through the image's own symlinks) with the entry.
func imageState(me manifest.Entry, layered fstree.Tree) (*manifest.BaseState, error) {
	rp, err := locate(layered, me)
	if err != nil {
		return nil, err
	}
	at := me
	at.ResolvedPath = rp
	return baseState(layered, at)
}

// baseState is fstree.BaseState, for which a path that a symlink loop
// keeps from resolving is absent: nothing can be at it.
func baseState(root fstree.Tree, e manifest.Entry) (*manifest.BaseState, error) {
	st, err := fstree.BaseState(root, e)
	if isLoop(err) {
		return &manifest.BaseState{State: manifest.StateAbsent}, nil
	}
	return st, err
}

// isLoop reports whether err is a symlink loop, as a tree's resolution or
// the kernel's reports it.
func isLoop(err error) bool {
	return errors.Is(err, fstree.ErrTooManyLinks) || errors.Is(err, syscall.ELOOP)
}

// unmodified reports whether a tree's state of an owned entry (a
// BaseState) is what the entry wants: the same, or absent for an absent
// entry.
func unmodified(t manifest.Type, st *manifest.BaseState) bool {
	return st.State == manifest.StateSame || (t == manifest.Absent && st.State == manifest.StateAbsent)
}

// merge applies, to the /etc entries, the rules of docs/design.md,
// "ostree's /etc merge", that depend on what the node changed: the copies
// the merge keeps (the config the MCD stores after staging, and for
// images without a manifest every path the MCD writes otherwise than the
// image has it), the parent directories it recreates from the node's
// copies (ostree's ensure_directory_from_template, whatever the base
// has), and the directories it copies whole because the base lacks them.
type merge struct {
	// cc is where the MCD stores its config, resolved in the base: it
	// writes it on every revert, whatever the manifest says.
	cc string
	// baseOnly are the requested paths whose node copy is the image's
	// default (see Ownership).
	baseOnly map[string]bool
	// baseDirs says which paths the base has as a directory where the
	// entry wants another type.
	baseDirs map[string]bool
	// baseLinks maps the requested path of a directory entry for which
	// the base has a symlink at the path itself to that path (its
	// parents resolved in the base): a merge that copies the node's
	// directory there replaces the symlink.
	baseLinks map[string]string
	// base is the base's tree; layered the image's, for an image
	// without a manifest (nil otherwise).
	base, layered fstree.Tree
	// changedDirs are the node's paths (manifest.Entry.Where) of the
	// owned directories the node's copy changes.
	changedDirs map[string]bool
}

// changed reports whether ostree's merge sees the node's copy of the
// entry as modified, added or removed: the MCD wrote it otherwise than
// the image has it.
func (m merge) changed(e *Entry) bool {
	return e.Image != nil && !m.baseOnly[e.Want.Path] && !unmodified(e.Type, e.Image)
}

func (m merge) apply(entries []Entry) {
	m.changedDirs = map[string]bool{}
	for i := range entries {
		if e := &entries[i]; e.Type == manifest.Directory && m.changed(e) {
			m.changedDirs[e.Want.Where()] = true
		}
	}
	m.replaceLinks(entries)
	changed := []string{m.cc}
	var whole []string
	for i := range entries {
		e := &entries[i]
		if e.Zone != ZoneEtc || !m.changed(e) {
			continue
		}
		if e.Type != manifest.Absent {
			changed = append(changed, e.Path)
		}
		if e.Type == manifest.Directory && m.copiedWhole(e) {
			whole = append(whole, e.Path)
		}
	}
	for i := range entries {
		e := &entries[i]
		if e.Zone != ZoneEtc {
			continue
		}
		child := firstBelow(changed, e.Path)
		switch {
		case e.Want.Path == render.CurrentConfig:
			e.Outcome, e.Reason = Kept, "the machine-config-daemon stores the new config here after staging the revert: the node's copy is modified, so the merge keeps it"
		case e.Type == manifest.Directory && child != "":
			e.Outcome, e.Reason = m.recreated(e, child == m.cc)
		case isUnder(whole, e.Path):
			e.Outcome, e.Reason = Kept, "inside a directory the node's copy changes and the base lacks or has as something else: the merge copies that directory whole"
		case m.changed(e) && e.Type != manifest.Absent && m.refused(e):
		case m.changed(e):
			e.Outcome, e.Reason = modified(e, m.baseDirs[e.Path], m.copiedWhole(e))
		}
	}
}

// replaceLinks moves to the node's path every directory the node's copy
// changes where the base has a symlink, and the entries below it: ostree
// unlinks the symlink and copies the node's directory whole in its place
// (copy_modified_config_file), so they land where the node has them, not
// where the base's symlink leads. Inside a moved directory, the
// outermost one decides: what is below it is the node's copy.
func (m merge) replaceLinks(entries []Entry) {
	moved := map[string]string{} // requested directory path: where it lands
	var dirs []string
	for i := range entries {
		e := &entries[i]
		if at := m.baseLinks[e.Want.Path]; at != "" && m.changed(e) {
			moved[e.Want.Path] = at
			dirs = append(dirs, e.Want.Path)
		}
	}
	if len(dirs) == 0 {
		return
	}
	sort.Slice(dirs, func(i, j int) bool {
		return len(dirs[i]) < len(dirs[j]) || len(dirs[i]) == len(dirs[j]) && dirs[i] < dirs[j]
	})
	for i := range entries {
		e := &entries[i]
		for _, dir := range dirs {
			if e.Want.Path == dir {
				e.Path = moved[dir]
			} else if rest, ok := strings.CutPrefix(e.Want.Path, dir+"/"); ok {
				e.Path = path.Join(moved[dir], rest)
			} else {
				continue
			}
			e.Zone = ZoneEtc
			if _, ok := moved[e.Want.Path]; ok {
				// The node's directory replaces whatever the base has.
				e.Base, e.Differs = manifest.StateDiffers, []manifest.Attr{manifest.AttrType}
			}
			break
		}
		if e.Path != e.Want.Path {
			e.RequestedPath = e.Want.Path
		} else {
			e.RequestedPath = ""
		}
	}
}

// refused gives the outcome of an entry whose node copy the merge copies
// into the base's /etc, when a directory above it makes ostree refuse the
// deployment, and reports whether it did: the merge makes every directory
// above the path, opening through its symlinks each one the base has
// (ensure_directory_from_template), and fails where the base has a file,
// a dangling symlink, a symlink to a file or a loop. On a node,
// finalization fails and it boots the layered image again. A directory
// the node's copy changes is copied first, in place of what the base has
// there (copy_modified_config_file), so nothing below it is refused.
func (m merge) refused(e *Entry) bool {
	at := e.Want.Where()
	if !under(at, "/etc") {
		return false
	}
	var dir, what string
	err := fstree.ResolveAncestors(m.base, at, func(d, rp string) bool {
		if d == "/etc" {
			return true
		}
		var more bool
		var err error
		what, more, err = m.mkdirs(rp)
		switch {
		case err != nil:
			return false
		case what != "" && m.nodeChanged(d):
			what = "" // replaced by the node's copy, with all below it
			return false
		case what != "":
			dir = d
		}
		return more
	})
	switch {
	case isLoop(err):
		what = "a symlink loop"
	case err != nil || what == "":
		return false
	}
	if dir != "" {
		what += " at " + dir
	}
	e.Outcome, e.Reason = Reverted, fmt.Sprintf("the node's copy counts as changed, and the base has %s above it: ostree refuses to finalize the deployment", what)
	return true
}

// nodeChanged reports whether ostree's diff sees the node's copy of the
// directory d (a path of the node's /etc) as modified or added, so that
// the merge copies it: an owned directory the node's copy changes, or
// one the image lacks or has as another type (the daemon made it).
func (m merge) nodeChanged(d string) bool {
	if m.changedDirs[d] {
		return true
	}
	if m.layered == nil {
		return false
	}
	have, ok, err := m.layered.Lstat(d)
	return err == nil && (!ok || have.Type != manifest.Directory)
}

// mkdirs is what the merge finds at p in the base when it makes the
// directories above a path it copies: what makes it fail ("" for a
// directory, or nothing), and whether it looks further down (it makes
// every directory below one the base lacks).
func (m merge) mkdirs(p string) (what string, more bool, err error) {
	have, ok, err := m.base.Lstat(p)
	if isLoop(err) {
		return "a symlink loop", false, nil
	}
	if err != nil || !ok {
		return "", false, err
	}
	if have.Type == manifest.Symlink {
		inside, err := fstree.Resolve(m.base, path.Join(p, "x"))
		if isLoop(err) {
			return "a symlink loop", false, nil
		}
		if err != nil {
			return "", false, err
		}
		to, ok, err := m.base.Lstat(path.Dir(inside))
		switch {
		case isLoop(err):
			return "a symlink loop", false, nil
		case err != nil:
			return "", false, err
		case !ok:
			return "a dangling symlink", false, nil
		case to.Type != manifest.Directory:
			return "a symlink to a " + string(to.Type), false, nil
		}
		return "", true, nil
	}
	if have.Type != manifest.Directory {
		return "a " + string(have.Type), false, nil
	}
	return "", true, nil
}

// copiedWhole reports whether the merge copies the node's changed
// directory e whole: the base lacks it, or has something else than a
// directory there (copy_modified_config_file unlinks it first).
func (m merge) copiedWhole(e *Entry) bool {
	return e.Base == manifest.StateAbsent || slices.Contains(e.Differs, manifest.AttrType) && !m.baseDirs[e.Path]
}

// recreated is the outcome of a directory below which the node's copy
// changes a path: the merge recreates it from the node's copy, which is
// what the MachineConfigs want unless the node has the image's default
// there and that differs.
func (m merge) recreated(e *Entry, config bool) (Outcome, string) {
	why := "parent of a path the node's copy changes: the merge recreates it from the node's copy"
	if config {
		why = "parent of the config the machine-config-daemon stores after staging the revert: the merge recreates it from the node's copy"
	}
	if m.baseOnly[e.Want.Path] && e.Image != nil && e.Image.State == manifest.StateDiffers {
		return Reverted, why + ", which is the image's default and differs (" + joinAttrs(e.Image.Differs) + ")"
	}
	return Kept, why
}

// firstBelow returns the first of paths strictly below dir, or "".
func firstBelow(paths []string, dir string) string {
	for _, p := range paths {
		if strings.HasPrefix(p, dir+"/") {
			return p
		}
	}
	return ""
}

// isUnder reports whether p is strictly below one of dirs.
func isUnder(dirs []string, p string) bool {
	return slices.ContainsFunc(dirs, func(d string) bool { return strings.HasPrefix(p, d+"/") })
}

// modified is the outcome of an /etc entry whose node copy (what the MCD
// wrote) differs from the image's default, so that the merge sees it
// modified, added or removed; baseDir says the base has a directory where
// the entry is not one.
func modified(e *Entry, baseDir, whole bool) (Outcome, string) {
	why := "the image lacks it, so the node's copy (what the machine-config-daemon wrote) counts as added"
	if e.Image.State == manifest.StateDiffers {
		why = fmt.Sprintf("the image's default differs from what the machine-config-daemon writes (%s), so the node's copy counts as modified", joinAttrs(e.Image.Differs))
	}
	baseHasDir := e.Base != manifest.StateAbsent && !slices.Contains(e.Differs, manifest.AttrType)
	switch {
	case e.Type == manifest.Absent:
		return Kept, "the image has it and the machine-config-daemon removes it on the node: the merge keeps the removal"
	case e.Type == manifest.Directory && e.Base == manifest.StateAbsent:
		return Kept, why + "; the base lacks the directory, so the merge copies the node's whole"
	case e.Type == manifest.Directory && whole:
		return Kept, why + "; the base has something else than a directory there, so the merge replaces it with the node's directory, copied whole"
	case e.Type == manifest.Directory && baseHasDir && e.Outcome != Kept:
		return e.Outcome, why + ", but the merge keeps the base's directory: a directory's own mode and owners are not carried over (differs from the base: " + joinAttrs(e.Differs) + ")"
	case e.Type != manifest.Directory && baseDir:
		return Reverted, why + ", and the base has a directory here: ostree refuses to finalize the deployment"
	}
	return Kept, why + ", and the merge keeps it"
}

// outcome applies the table of docs/design.md, "ostree's /etc merge", for a node whose copy equals the
// layered image's default.
func outcome(z Zone, t manifest.Type, st *manifest.BaseState) (Outcome, string) {
	switch z {
	case ZoneDropped:
		return Dropped, "never deployed: ostree-container import drops this directory"
	case ZoneVar:
		return Untouched, "under /var: deploys never touch it (baked content reaches only newly provisioned nodes)"
	}
	same := st.State == manifest.StateSame || (t == manifest.Absent && st.State == manifest.StateAbsent)
	if same {
		return Kept, "the base has what the MachineConfig wants"
	}
	if z == ZoneUsr {
		return Lost, "replaced by the base on rebase; a node cannot rewrite it"
	}
	switch {
	case t == manifest.Absent:
		return Restored, "the MachineConfig removes it; unmodified on the node, so the merge takes the base's default and it comes back"
	case st.State == manifest.StateAbsent:
		return Removed, "unmodified default of the layered image that the base lacks: the merge deletes it"
	}
	return Reverted, fmt.Sprintf("unmodified default of the layered image: the merge takes the base's version (differs: %s)", joinAttrs(st.Differs))
}

// Summary counts a diff's entries.
type Summary struct {
	Total     int             `json:"total"`
	Clobbered int             `json:"clobbered"`
	ByOutcome map[Outcome]int `json:"byOutcome"`
	ByZone    map[Zone]int    `json:"byZone"`
}

// Summarize counts entries by outcome and zone.
func Summarize(entries []Entry) Summary {
	s := Summary{Total: len(entries), ByOutcome: map[Outcome]int{}, ByZone: map[Zone]int{}}
	for _, e := range entries {
		s.ByOutcome[e.Outcome]++
		s.ByZone[e.Zone]++
		if e.Clobbered {
			s.Clobbered++
		}
	}
	return s
}

func joinAttrs(a []manifest.Attr) string {
	s := make([]string, len(a))
	for i, x := range a {
		s[i] = string(x)
	}
	return strings.Join(s, ", ")
}
