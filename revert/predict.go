// Package revert predicts what ostree does to a layered image's owned
// paths when a node reverts from that image to a base image: Predict and
// Diff apply ostree's three-way /etc merge rules (docs/design.md, "ostree's
// /etc merge") to an ownership manifest and a view of the base's tree;
// NewPlan turns the prediction into the revert plan, the list of paths a
// node must rewrite after the rebase, and ReadPlan reads one back.
//
// The package is pure: it reads nothing but the manifest and the
// render.Root it is given (a base image's index, a directory on disk),
// and builds without cgo or any containers/* module.
package revert

import (
	"errors"
	"fmt"
	"path"
	"sort"
	"strings"

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
	// merge (see mcdStored).
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
func Predict(m *manifest.Manifest, base render.Root) ([]Entry, error) {
	out := make([]Entry, 0, len(m.Entries))
	for _, me := range m.Entries {
		e, err := classify(me, base)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", me.Path, err)
		}
		out = append(out, e)
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out, nil
}

func classify(me manifest.Entry, base render.Root) (Entry, error) {
	rp, err := render.Locate(base, me.Path, me.Type == manifest.Directory)
	if errors.Is(err, render.ErrTooManyLinks) {
		rp = path.Clean(me.Path)
	} else if err != nil {
		return Entry{}, err
	}
	at := me
	at.ResolvedPath = rp
	st, err := render.BaseState(base, at)
	if err != nil {
		return Entry{}, err
	}
	e := Entry{Path: rp, Type: me.Type, Zone: ZoneOf(rp), Base: st.State, Differs: st.Differs, Source: me.Source, Want: me}
	if rp != me.Path {
		e.RequestedPath = me.Path
	}
	e.Outcome, e.Reason = outcome(e.Zone, me.Type, st)
	if e.Zone == ZoneEtc {
		if reason, ok := mcdStored(me, rp, base); ok {
			e.Outcome, e.Reason = Kept, reason
		}
	}
	e.Clobbered = e.Outcome.Clobbers()
	e.Managed = me.Managed != "" || render.CertificateWriterManages(me.Path) || render.CertificateWriterManages(rp)
	return e, nil
}

// mcdStored reports whether the merge keeps the node's own copy of an
// owned path because the machine-config-daemon writes
// render.CurrentConfig after staging every update, with the new
// MachineConfig (on a revert its osImageURL names the base, so it never
// equals what the layered image baked). ostree therefore sees the file
// modified (or added) and copies it over the base's /etc, and recreates
// its parent directory from the node's copy, replacing the base's mode
// and owners or its absence (TestRevertEndToEnd checks this against real
// ostree). Rewriting either would put back a config the node no longer
// runs.
func mcdStored(me manifest.Entry, rp string, root render.Root) (string, bool) {
	if me.Path == render.CurrentConfig {
		return "the machine-config-daemon stores the new config here after staging the revert: the node's copy is modified, so the merge keeps it", true
	}
	cc, err := render.Resolve(root, render.CurrentConfig)
	if err != nil || me.Type != manifest.Directory || rp != path.Dir(cc) {
		return "", false
	}
	return "parent of the config the machine-config-daemon stores after staging the revert: the merge recreates it from the node's copy", true
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
