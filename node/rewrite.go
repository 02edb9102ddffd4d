package node

import (
	"context"
	"errors"
	"fmt"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
)

// Action is what Rewrite did (or, in a dry run, would do) to one path.
type Action struct {
	Path string `json:"path"`
	// Op is write, mkdir, symlink, link, remove, or unchanged.
	Op string `json:"op"`
	// Kinds says what differed before the rewrite.
	Kinds []string `json:"kinds,omitempty"`
	// State says whether the path holds its old or new entry after the
	// rewrite (old everywhere when it failed, see txn).
	State State `json:"state,omitempty"`
}

// Unchanged is the Op of a path that already matched.
const Unchanged = "unchanged"

// PlanMismatchError means a revert plan does not fit: the MachineConfigs
// given to Rewrite do not define what it says, or (PrepareRevert) it names
// other images, or other paths than the node computes. Nothing was
// written.
type PlanMismatchError struct{ Lines []string }

func (e *PlanMismatchError) Error() string { return strings.Join(e.Lines, "\n") }

// Rewrite makes every planned path under root exactly what the
// MachineConfigs, rendered against root, want. Content always comes from
// the MachineConfigs; each plan entry must match the rendering's type,
// mode, owners and digest or target, or nothing is written; nor is
// anything written for an invalid plan (see revert.ReadPlan), or one that
// names the config the machine-config-daemon stores. Missing parents are
// created as the MCD creates them (0755 root:root); a directory the plan
// names only as a parent is made when missing, never changed. The writes
// are one transaction: every new entry is prepared first, then renamed
// in; on a failure the renamed ones are put back, so every path ends old
// or new and each Action's State says which. Writes never follow a path
// outside root. A path already in the wanted state is left alone, so
// Rewrite is idempotent: a second run writes nothing. With o.DryRun it
// only reports what it would do. It stops, having written nothing, when
// ctx is done before the transaction starts; a transaction that has
// started runs to its end. When root is an ostree deployment (or "/" of a
// booted one) whose commit records its container image, a plan for
// another base image is refused.
func Rewrite(ctx context.Context, root *Root, p *revert.Plan, mcs []*machineconfig.MachineConfig, o RewriteOptions) ([]Action, error) {
	if err := checkPlanImage(root, p); err != nil {
		return nil, err
	}
	res, err := renderOn(ctx, root, mcs)
	if err != nil {
		return nil, err
	}
	return rewrite(ctx, root, p, res, o)
}

// RewriteOptions say how Rewrite runs.
type RewriteOptions struct {
	// DryRun only reports what Rewrite would do: it writes nothing.
	DryRun bool
}

// rewrite is Rewrite with the rendering done; failAt injects a failure
// into the transaction (tests).
func rewrite(ctx context.Context, root *Root, p *revert.Plan, res *render.Result, o RewriteOptions, failAt ...func(int) error) ([]Action, error) {
	if err := p.Check(); err != nil {
		return nil, err
	}
	want, err := planned(p, res)
	if err != nil {
		return nil, err
	}
	acts := make([]Action, len(p.Rewrite))
	t := &txn{root: root}
	if len(failAt) > 0 {
		t.failAt = failAt[0]
	}
	parents := map[string]bool{}
	for i, pe := range p.Rewrite {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		kinds, err := differences(root, pe.Path, want[i].Entry.Entry)
		if err != nil {
			return nil, err
		}
		// A parent the plan implies is only made when missing: an
		// existing directory keeps its mode and owners.
		if want[i].implied && want[i].Type == manifest.Directory && !slices.Equal(kinds, []string{Missing}) {
			kinds = nil
		}
		acts[i] = Action{Path: pe.Path, Op: Unchanged, Kinds: kinds}
		if len(kinds) == 0 {
			continue
		}
		acts[i].Op = opFor(want[i].Type)
		if want[i].Type != manifest.Absent {
			if err := t.addParents(pe.Path, parents); err != nil {
				return nil, err
			}
		}
		t.add(pe.Path, want[i].Entry, "")
	}
	if o.DryRun || len(t.writes) == 0 {
		return acts, nil
	}
	err = t.run()
	state := map[string]State{}
	for _, w := range t.writes {
		state[w.path] = w.state
	}
	for i := range acts {
		if acts[i].Op != Unchanged {
			acts[i].State = state[clean(acts[i].Path)]
		}
	}
	return acts, err
}

// addParents queues the directories missing above p that no write is
// queued for yet, made as the MCD makes parents (0755 root:root); seen
// holds those already looked at.
func (t *txn) addParents(p string, seen map[string]bool) error {
	var missing []string
	for d := path.Dir(clean(p)); d != "/" && !seen[d] && !t.queued(d); d = path.Dir(d) {
		_, ok, err := t.root.Lstat(d)
		if err != nil {
			return err
		}
		if ok {
			break
		}
		missing = append(missing, d)
	}
	for _, d := range missing {
		seen[d] = true
		if !t.queued(d) {
			t.add(d, render.Entry{Entry: manifest.Entry{Path: d, Type: manifest.Directory, Mode: 0o755}}, "")
		}
	}
	return nil
}

// plannedEntry is the rendered entry a plan entry names, and whether the
// plan implies it (see implied) rather than the rendering listing it.
type plannedEntry struct {
	render.Entry
	implied bool
}

// planned matches every plan entry with the rendered entry for its path.
func planned(p *revert.Plan, res *render.Result) ([]plannedEntry, error) {
	byPath := map[string]render.Entry{}
	for _, e := range res.Entries {
		byPath[e.Path] = e
	}
	var lines []string
	out := make([]plannedEntry, len(p.Rewrite))
	for i, pe := range p.Rewrite {
		if pe.MachineConfigPath() == render.CurrentConfig {
			lines = append(lines, fmt.Sprintf("plan: %s: the machine-config-daemon stores the config the node runs there; refusing to rewrite it", pe.MachineConfigPath()))
			continue
		}
		e, ok := byPath[pe.MachineConfigPath()]
		isImplied := false
		if !ok {
			e, ok = implied(pe, res)
			isImplied = ok
		}
		if !ok {
			lines = append(lines, fmt.Sprintf("plan: %s: not defined by the given MachineConfigs (%s %s)", pe.MachineConfigPath(), pe.Source.MachineConfig, pe.Source.Field))
			continue
		}
		// The plan may only name where the MachineConfigs put the path:
		// as asked, or as resolved on this root (writes resolve in root).
		if pe.Path != e.Path && pe.Path != e.Where() {
			lines = append(lines, fmt.Sprintf("plan: %s: the MachineConfigs put this path at %s on this root, not at %s", pe.MachineConfigPath(), e.Where(), pe.Path))
			continue
		}
		if d := planDiff(pe, e.Entry); d != "" {
			lines = append(lines, fmt.Sprintf("plan: %s: the plan's %s does not match the MachineConfigs (%s %s)", pe.MachineConfigPath(), d, e.Source.MachineConfig, e.Source.Field))
			continue
		}
		out[i] = plannedEntry{Entry: e, implied: isImplied}
	}
	if len(lines) > 0 {
		return nil, &PlanMismatchError{Lines: lines}
	}
	return out, nil
}

// implied accepts plan entries that a rendering against the node's root
// does not list because the node already is (or was partly made) as
// wanted: see impliedParent and impliedAbsent.
func implied(pe revert.PlanEntry, res *render.Result) (render.Entry, bool) {
	if e, ok := impliedParent(pe, res); ok {
		return e, true
	}
	if src, ok := res.Removes[pe.MachineConfigPath()]; ok && pe.Type == manifest.Absent && pe.RequestedPath == "" {
		// A removal the MCD makes whatever is there (an unmask, an
		// empty drop-in): the rendering lists it only while the node
		// still has something there.
		return render.Entry{Entry: manifest.Entry{Path: pe.MachineConfigPath(), Type: manifest.Absent, Source: src}}, true
	}
	return impliedAbsent(pe, res)
}

// impliedAbsent accepts a planned removal of an enablement link when the
// MachineConfigs disable or mask that unit (the rendering lists the
// removal only while the node still has the link).
func impliedAbsent(pe revert.PlanEntry, res *render.Result) (render.Entry, bool) {
	dir := path.Dir(pe.Path)
	if pe.Type != manifest.Absent || pe.RequestedPath != "" || path.Dir(dir) != render.UnitDir ||
		!(strings.HasSuffix(dir, ".wants") || strings.HasSuffix(dir, ".requires")) {
		return render.Entry{}, false
	}
	name := path.Base(pe.Path)
	for _, u := range res.Units {
		if u.Name == name && (u.Enablement == render.Disabled || u.Enablement == render.Masked) {
			return render.Entry{Entry: manifest.Entry{Path: pe.MachineConfigPath(), Type: manifest.Absent, Source: u.Source}}, true
		}
	}
	return render.Entry{}, false
}

// impliedParent accepts a planned directory that the rendering does not
// list because the node already has it, when it is a parent of a rendered
// entry and has the MCD's default parent metadata.
func impliedParent(pe revert.PlanEntry, res *render.Result) (render.Entry, bool) {
	if pe.Type != manifest.Directory || pe.Mode != 0o755 || pe.UID != 0 || pe.GID != 0 {
		return render.Entry{}, false
	}
	for _, e := range res.Entries {
		if strings.HasPrefix(e.Path, pe.MachineConfigPath()+"/") && strings.HasPrefix(e.Where(), pe.Path+"/") {
			return render.Entry{Entry: manifest.Entry{Path: pe.MachineConfigPath(), ResolvedPath: pe.Path, Type: manifest.Directory, Mode: 0o755, Source: pe.Source}}, true
		}
	}
	return render.Entry{}, false
}

// planDiff names the first attribute in which a plan entry differs from
// the rendering's entry e, "" when it matches.
func planDiff(pe revert.PlanEntry, e manifest.Entry) string {
	d := manifest.Compare(e, manifest.Entry{Type: pe.Type, Mode: pe.Mode, UID: pe.UID, GID: pe.GID, Digest: pe.Digest, Target: pe.Target})
	if len(d) == 0 {
		return ""
	}
	switch d[0] {
	case manifest.AttrContent:
		return "digest"
	case manifest.AttrUID, manifest.AttrGID:
		return "owner"
	}
	return string(d[0])
}

func opFor(t manifest.Type) string {
	switch t {
	case manifest.Directory:
		return "mkdir"
	case manifest.Symlink:
		return "symlink"
	case manifest.Hardlink:
		return "link"
	case manifest.Absent:
		return "remove"
	}
	return "write"
}

// checkPlanImage refuses a plan made for another base than the image the
// deployment root was made from, when root is a deployment whose commit
// says which image it is.
func checkPlanImage(root *Root, p *revert.Plan) error {
	s, d, ok := deploymentOf(root.Path())
	if !ok {
		return nil
	}
	img, err := s.Image(d)
	if errors.Is(err, ErrNoImage) {
		return nil
	}
	if err != nil {
		return err
	}
	if !p.Base.Same(img) {
		return &PlanMismatchError{Lines: []string{fmt.Sprintf("plan: made for base %s %s, but %s is image %s (config %s)",
			orDash(p.Base.Reference), p.Base.Digest, root.Path(), img.Digest, img.Config)}}
	}
	return nil
}

// deploymentOf finds the sysroot and deployment whose root dir is: "/" of
// a booted ostree system, or SYSROOT/ostree/deploy/OS/deploy/CSUM.N.
func deploymentOf(dir string) (*Sysroot, *Deployment, bool) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, nil, false
	}
	if abs == "/" {
		s, err := OpenSysroot("/")
		if err != nil || !s.Running {
			return nil, nil, false
		}
		d, err := s.Booted()
		return s, d, err == nil
	}
	deployDir, name := filepath.Split(abs)
	deployDir = filepath.Clean(deployDir)
	stateDir := filepath.Dir(deployDir)
	if filepath.Base(deployDir) != "deploy" || filepath.Base(filepath.Dir(stateDir)) != "deploy" {
		return nil, nil, false
	}
	d, ok := parseDeployment(filepath.Base(stateDir), deployDir, name)
	if !ok {
		return nil, nil, false
	}
	s, err := OpenSysroot(filepath.Dir(filepath.Dir(filepath.Dir(stateDir))))
	if err != nil {
		return nil, nil, false
	}
	return s, &d, true
}
