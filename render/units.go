package render

import (
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_5/types"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/systemctl"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// UnitDir is where the MCD writes units, drop-ins and enablement links.
const UnitDir = systemctl.ConfigPath

// Enablement values recorded in the manifest.
const (
	Enabled  = "enabled"
	Disabled = "disabled"
	Masked   = "masked"
	Preset   = "preset"
)

// HasContent reports whether a unit or drop-in has contents the MCD
// writes: it skips nil and empty ones alike.
func HasContent(c *string) bool { return c != nil && *c != "" }

// FindUnitFile finds the file systemctl would use for the unit name: the
// contents a MachineConfig unit gives (written to UnitDir) first, then the
// root's unit search path (root may be nil); an instance falls back to its
// template. It returns the contents and the path the file is at; a file
// that exists but cannot be read is an error.
func FindUnitFile(root fstree.Tree, units []machineconfig.Unit, name string) (contents []byte, at string, ok bool, err error) {
	candidates := []string{name}
	if tmpl, inst, isT := templateOf(name); isT && inst != "" {
		candidates = append(candidates, tmpl)
	}
	for _, n := range candidates {
		for _, u := range units {
			if u.Name == n && HasContent(u.Contents) {
				return []byte(*u.Contents), path.Join(UnitDir, n), true, nil
			}
		}
		if root == nil {
			continue
		}
		for _, dir := range systemctl.SearchPath {
			p := path.Join(dir, n)
			if e, ok, err := root.Lstat(p); err != nil {
				return nil, p, false, err
			} else if ok && e.Type == manifest.Symlink && e.Target == "/dev/null" {
				continue // a mask: no unit file here
			}
			b, err := root.ReadFile(p)
			switch {
			case err == nil:
				return b, p, true, nil
			case !errors.Is(err, fs.ErrNotExist):
				return nil, p, false, err
			}
		}
	}
	return nil, "", false, nil
}

// templateOf returns "foo@.service" for "foo@bar.service" (and for
// "foo@.service" itself); ok is false for non-template units.
func templateOf(name string) (tmpl, instance string, ok bool) {
	at := strings.Index(name, "@")
	dot := strings.LastIndex(name, ".")
	if at < 0 || dot < at {
		return "", "", false
	}
	return name[:at+1] + name[dot:], name[at+1 : dot], true
}

// Installs reports whether a unit file's [Install] section makes
// `systemctl enable` do something (WantedBy=, RequiredBy=, Alias= or
// Also=). A file that does not parse counts as installing (rendering
// reports its parse error).
func Installs(contents []byte) bool {
	ok, err := systemctl.HasInstall("unit.service", contents)
	return ok || err != nil
}

// units writes units, drop-ins and masks and runs systemctl as the MCD's
// writeUnits does (docs/design.md, "What the machine-config-daemon
// writes"): per unit, drop-ins, then the mask, or the disabling of an
// enabled unit before its file is rewritten, or the unmask; then
// `systemctl preset` for a unit without enabled; at the end one
// `systemctl enable` of every unit with enabled: true and one `systemctl
// disable` of every unit with enabled: false, each limited to units with
// contents or a unit file the root lists. systemctl is the port of
// systemd 252 in internal/systemctl, on a view of the root with the
// storage entries written; what it changes becomes entries.
func (r *renderer) units() {
	tree := systemctl.NewFS(rootBase{r.root})
	r.seed(tree)
	sc := systemctl.New(tree)
	listed := sc.ListUnitFiles()
	var enable, disable []machineconfig.Unit
	for _, u := range r.m.Units {
		r.writeUnit(tree, sc, u)
		r.recordEnablement(sc, u)
		valid := systemctl.ValidName(u.Name)
		switch {
		case u.Enabled == nil:
			if r.hasRoot && valid {
				sc.Tag(u.Name, u.SourceOf("enabled"))
				sc.Preset(u.Name) // the MCD ignores a failed preset
			}
		case !HasContent(u.Contents) && !listed[u.Name]:
			// The MCD skips a unit it cannot find (OCPBUGS-70259).
			r.skipped = append(r.skipped, u)
		case !valid:
			r.fail(u.SourceOf("enabled"), "unit name %q is not one systemctl accepts", u.Name)
		case *u.Enabled:
			enable = append(enable, u)
		default:
			disable = append(disable, u)
		}
	}
	r.batch(sc, "enable", enable)
	unlinked := r.batch(sc, "disable", disable)
	unlinked = append(unlinked, r.removeStaleLinks(tree)...)
	r.checkEnabled(sc, unlinked)
	for _, ns := range sc.NodeSpecifiers() {
		u := r.unitNamed(ns.Origin)
		r.fail(u.SourceOf("contents"), "unit %s: [Install] of %s uses %s, which only the node can resolve: an image cannot carry its enablement", u.Name, ns.Unit, ns.Specifier)
	}
	if err := tree.Err(); err != nil {
		r.errs = append(r.errs, fmt.Errorf("reading the root: %w", err))
	}
	r.unitEntries(tree)
}

// StaleLinks are the enablement links the machine-config-daemon deletes
// on every update, after writing the units (workaroundOcpBugs33694: older
// daemons leaked them).
var StaleLinks = []string{
	UnitDir + "/network-online.target.requires/node-valid-hostname.service",
	UnitDir + "/network-online.target.wants/ovs-configuration.service",
}

// removeStaleLinks removes StaleLinks as the daemon does, after the
// enablement and before its on-disk check. The removal's source is the
// unit's enabled field when a MachineConfig has the unit, else its
// systemd section.
//
// Like os.Remove, it removes an empty directory there and fails on one
// that is not empty, as the daemon's update does. Where the directory
// above the link is itself a symlink (a MachineConfig's), the link is
// left alone: that is not a layout the daemon's workaround is for, and
// os.Remove there would remove what the symlink leads to.
func (r *renderer) removeStaleLinks(tree *systemctl.FS) (removed []string) {
	for _, p := range StaleLinks {
		n, e := tree.Lstat(p)
		if up, ue := tree.Lstat(path.Dir(p)); e < 0 || ue < 0 || up.Kind != systemctl.Dir {
			continue
		}
		src := machineconfig.Source{MachineConfig: r.m.Name, Field: "spec.config.systemd"}
		if u, ok := r.mcUnit(path.Base(p)); ok {
			src = u.SourceOf("enabled")
		}
		tree.SetTag(src)
		if n.Kind == systemctl.Dir {
			if ents, _ := tree.ReadDir(p); len(ents) > 0 {
				r.fail(src, "%s: the machine-config-daemon deletes it after every update (OCPBUGS-33694) and fails on a directory that is not empty", p)
			} else {
				r.check(src, "removing", p, tree.Rmdir(p))
			}
			tree.SetTag(nil)
			continue
		}
		if tree.Unlink(p) == 0 {
			removed = append(removed, p)
		}
		tree.SetTag(nil)
		// systemctl made the directory for the link; the daemon removes
		// only the link, so the directory stays, empty.
		dir := path.Dir(p)
		if _, owned := r.index[dir]; owned {
			continue // a MachineConfig's directory, as it wants it
		}
		if _, inRoot, err := fstree.LstatType(r.root, dir); err == nil && !inRoot {
			r.add(Entry{Entry: manifest.Entry{Path: dir, Type: manifest.Directory, Mode: 0o755}}, src)
		}
	}
	return removed
}

// checkEnabled runs the machine-config-daemon's on-disk check of every
// unit's enablement (checkUnitEnabled) once all are applied: a unit with
// contents, not masked, and enabled: true must not be disabled, masked or
// not found (the daemon also checks that one with enabled: false is not
// enabled, which cannot fail here: see below).
//
// Asking systemctl about every unit reads every link for each, which
// thousands of units make minutes, so it asks only where the answer can
// be wrong. Only links removed after the enable (by the disable batch,
// or the stale links) can leave a unit with enabled: true disabled: the
// unit a removed link is named like, or every such unit when a removed
// link is named like no unit with enabled: false (an alias). A unit with
// enabled: false keeps none of its links in /etc after its own disable,
// and a link elsewhere is "static" or "linked" to systemctl, never
// "enabled": it is not asked about.
func (r *renderer) checkEnabled(sc *systemctl.Systemctl, unlinked []string) {
	ask, all := map[string]bool{}, false
	for _, p := range unlinked {
		n := path.Base(p)
		switch u, ok := r.mcUnit(n); {
		case ok && u.Enabled != nil && *u.Enabled:
			ask[n] = true
		case !ok || u.Enabled == nil:
			all = true
		}
	}
	for _, u := range r.m.Units {
		if u.Enabled == nil || !*u.Enabled || !HasContent(u.Contents) || u.Mask != nil && *u.Mask || !systemctl.ValidName(u.Name) {
			continue
		}
		if !all && !ask[u.Name] {
			continue
		}
		state, e := sc.State(u.Name)
		if e < 0 {
			continue
		}
		if state == "disabled" || state == "masked" || state == "masked-runtime" || state == "not-found" {
			r.degrading = append(r.degrading, UnitCheck{Name: u.Name, State: state, Source: u.SourceOf("enabled")})
		}
	}
}

// rootBase shows a fstree.Tree to systemctl.
type rootBase struct{ root fstree.Tree }

func (b rootBase) Lstat(p string) (systemctl.Node, bool, error) {
	e, ok, err := fstree.LstatType(b.root, p)
	if err != nil || !ok {
		return systemctl.Node{}, false, err
	}
	switch e.Type {
	case manifest.File:
		return systemctl.Node{Kind: systemctl.File, Size: e.Size}, true, nil
	case manifest.Directory:
		return systemctl.Node{Kind: systemctl.Dir}, true, nil
	case manifest.Symlink:
		return systemctl.Node{Kind: systemctl.Symlink, Target: e.Target}, true, nil
	}
	if systemctl.Reads(p) {
		// systemctl would open it and block on a fifo, or take a device
		// for a mask: a unit or preset path that is none of the above
		// is refused.
		return systemctl.Node{}, false, &fs.PathError{Op: "open", Path: p, Err: fstree.ErrNotRegular}
	}
	return systemctl.Node{Kind: systemctl.Other}, true, nil
}

func (b rootBase) ReadFile(p string) ([]byte, error)  { return b.root.ReadFile(p) }
func (b rootBase) ReadDir(p string) ([]string, error) { return b.root.ReadDir(p) }

// seed writes the storage entries, which the MCD writes before units,
// into tree without recording them, and makes sure UnitDir exists (it
// does on every node).
func (r *renderer) seed(tree *systemctl.FS) {
	for _, e := range r.entries {
		switch e.Type {
		case manifest.File:
			tree.WriteFile(e.Path, e.Content)
		case manifest.Directory:
			tree.MkdirAll(e.Path)
		case manifest.Symlink:
			tree.MkdirAll(path.Dir(e.Path))
			tree.RemoveAll(e.Path)
			tree.Symlink(e.Target, e.Path)
		}
	}
	tree.MkdirAll(UnitDir)
}

// writeUnit is the MCD's writeUnit (docs/design.md, "What the
// machine-config-daemon writes").
func (r *renderer) writeUnit(tree *systemctl.FS, sc *systemctl.Systemctl, u machineconfig.Unit) {
	for _, d := range u.Dropins {
		r.writeDropin(tree, u, d)
	}
	p := path.Join(UnitDir, u.Name)
	switch {
	case u.Mask != nil && *u.Mask:
		src := u.SourceOf("mask")
		tree.SetTag(src)
		tree.RemoveAll(p)
		r.check(src, "masking", p, tree.Symlink("/dev/null", p))
	case HasContent(u.Contents):
		src := u.SourceOf("contents")
		if state, e := sc.State(u.Name); e == 0 && state == Enabled {
			// Disabled first, as its [Install] may change (OCPBUGS-33694).
			sc.Tag(u.Name, src)
			r.failures(sc.Disable([]string{u.Name}), "disable", "contents", u, "disabling "+u.Name+" before rewriting it: ")
		}
		tree.SetTag(src)
		r.check(src, "writing", p, tree.WriteFile(p, []byte(*u.Contents)))
	case u.Mask != nil:
		tree.SetTag(u.SourceOf("mask"))
		r.check(u.SourceOf("mask"), "unmasking", p, tree.RemoveAll(p))
		r.removed(p, u.SourceOf("mask"))
	}
	tree.SetTag(nil)
}

// removed records p as a path the MCD removes whatever is there
// (Result.Removes).
func (r *renderer) removed(p string, src machineconfig.Source) {
	if r.removes == nil {
		r.removes = map[string]manifest.Source{}
	}
	r.removes[p] = manifest.Source{MachineConfig: src.MachineConfig, Field: src.Field}
}

// writeDropin is the MCD's writeDropins for one drop-in: an empty one is
// not written, and removed when it exists.
func (r *renderer) writeDropin(tree *systemctl.FS, u machineconfig.Unit, d types.Dropin) {
	p := path.Join(UnitDir, u.Name+".d", d.Name)
	src := u.SourceOf("dropins[" + d.Name + "]")
	tree.SetTag(src)
	defer tree.SetTag(nil)
	if HasContent(d.Contents) {
		r.check(src, "writing", p, tree.WriteFile(p, []byte(*d.Contents)))
		return
	}
	r.removed(p, src)
	if _, e := tree.Stat(p); e == 0 {
		if e := tree.Unlink(p); e != 0 {
			r.check(src, "removing", p, tree.Rmdir(p))
		}
	}
}

// check records a failed write of the MCD at p.
func (r *renderer) check(src machineconfig.Source, what, p string, errno int) {
	if errno != 0 {
		r.fail(src, "%s %s: %s", what, p, systemctl.ErrnoString(errno))
	}
}

// recordEnablement records the unit's enablement decision: what the
// MachineConfig says, or what the root's preset files say (preset
// without a root).
func (r *renderer) recordEnablement(sc *systemctl.Systemctl, u machineconfig.Unit) {
	state := Preset
	switch {
	case u.Mask != nil && *u.Mask:
		r.recordUnit(u.Name, Masked, u.SourceOf("mask"))
		return
	case u.Enabled != nil && *u.Enabled, u.Enabled == nil && r.hasRoot && sc.QueryPreset(u.Name):
		state = Enabled
	case u.Enabled != nil, r.hasRoot:
		state = Disabled
	}
	r.recordUnit(u.Name, state, u.SourceOf("enabled"))
}

func (r *renderer) recordUnit(name, state string, src machineconfig.Source) {
	r.unitStates = append(r.unitStates, manifest.Unit{Name: name, Enablement: state, Source: manifest.Source{MachineConfig: src.MachineConfig, Field: src.Field}})
}

// batch runs one systemctl verb over units, as the MCD's enableUnits and
// disableUnits do; a failure refuses every unit it concerns. It returns
// the links the call removed.
func (r *renderer) batch(sc *systemctl.Systemctl, verb string, units []machineconfig.Unit) (unlinked []string) {
	if len(units) == 0 {
		return nil
	}
	names := make([]string, len(units))
	for i, u := range units {
		names[i] = u.Name
		sc.Tag(u.Name, u.SourceOf("enabled"))
	}
	run := sc.Enable
	if verb == "disable" {
		run = sc.Disable
	}
	res := run(names)
	r.failures(res, verb, "enabled", units[0], "systemctl "+verb+" "+strings.Join(names, " ")+": ")
	for _, c := range res.Changes {
		if c.Type == systemctl.ChangeUnlink {
			unlinked = append(unlinked, c.Path)
		}
	}
	return unlinked
}

// failures refuses what a failed systemctl call concerns, at field of the
// unit each failure is about (fallback when systemctl does not say).
func (r *renderer) failures(res systemctl.Result, verb, field string, fallback machineconfig.Unit, prefix string) {
	if !res.Failed() {
		return
	}
	for _, f := range res.Errors(verb) {
		u, ok := r.mcUnit(f.Origin)
		if !ok {
			u = fallback
		}
		r.fail(u.SourceOf(field), "%s%s", prefix, f.Msg)
	}
}

func (r *renderer) mcUnit(name string) (machineconfig.Unit, bool) {
	for _, u := range r.m.Units {
		if u.Name == name {
			return u, true
		}
	}
	return machineconfig.Unit{}, false
}

func (r *renderer) unitNamed(name string) machineconfig.Unit {
	u, _ := r.mcUnit(name)
	return u
}

// unitEntries turns what the MCD and systemctl changed into entries: files
// and links as they end, removals of what the root (or a storage entry)
// had as absent entries, and directories the root had that were removed
// and made again. Other new directories are left to place, which adds the
// parents of every entry. A directory of the root that systemctl removed
// once its last link went is kept, empty (docs/design.md, "What the
// machine-config-daemon writes"): a layer, a Containerfile and a node's
// rewrite remove files and links, not directories.
func (r *renderer) unitEntries(tree *systemctl.FS) {
	for _, c := range tree.Changes() {
		src, _ := c.Tag.(machineconfig.Source)
		switch c.Node.Kind {
		case systemctl.File:
			r.addFile(c.Path, c.Content, 0o644, 0, 0, src)
		case systemctl.Symlink:
			r.addLink(c.Path, c.Node.Target, src)
		case systemctl.Dir:
			if c.InBase {
				r.add(Entry{Entry: manifest.Entry{Path: c.Path, Type: manifest.Directory, Mode: 0o755}}, src)
			}
		case systemctl.Missing:
			if _, owned := r.index[c.Path]; owned || c.InBase && !c.BaseDir {
				r.addAbsent(c.Path, src)
			}
		}
	}
}
