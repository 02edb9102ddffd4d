package verify

import (
	"context"
	"fmt"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/opencontainers/go-digest"
)

// baseInput is an opened, indexed base image.
type baseInput struct {
	ref    string
	digest digest.Digest
	tree   fstree.Tree
}

// checker runs the rules over one set of inputs.
type checker struct {
	in     *loaded
	merged *machineconfig.Merged
	base   *baseInput // nil without --base
	image  *imageInput
	root   fstree.Tree
	strict bool

	findings []Finding
	seen     map[string]bool
	notRun   map[string]string // rule -> reason
	// pruneAt are the MachineConfig fields whose items are left out of the
	// render; dropSSH leaves core's SSH keys out.
	pruneAt []machineconfig.Source
	dropSSH bool
	// rendered is the render of the MachineConfigs against root, nil when
	// it failed; pruned says whether items were left out of it.
	rendered *render.Result
	pruned   bool
	// stale says whether the image bakes other MachineConfigs.
	stale bool
}

func newChecker(in *loaded, b *baseInput, img *imageInput, strict bool) *checker {
	c := &checker{in: in, base: b, image: img, strict: strict, seen: map[string]bool{}, notRun: map[string]string{}}
	c.merged = machineconfig.Merge(in.mcs)
	c.root = rhcosRoot{}
	if b != nil {
		c.root = b.tree
	}
	return c
}

// run checks everything, in an order where later rules can rely on what
// earlier ones found (items with errors are pruned before rendering).
func (c *checker) run(ctx context.Context) {
	c.refusals()
	c.specFields()
	c.kubeconfigMode()
	c.unusedFields()
	c.conflicts()
	c.zones()
	c.units()
	if c.base != nil {
		c.clashes()
		c.owners()
	}
	c.render(ctx)
	c.imageRules(ctx)
	c.revert(ctx)
	c.skipByInputs()
}

// add records a finding of rule id at src (File, MachineConfig, Field),
// about path p, once. It returns the new finding (valid until the next
// add), or nil when the same finding was already recorded.
func (c *checker) add(id string, src machineconfig.Source, p, format string, args ...any) *Finding {
	r := ruleByID(id)
	f := Finding{Rule: r.ID, Name: r.Name, Severity: r.Severity, Path: p,
		MachineConfig: src.MachineConfig, File: src.File, Field: src.Field, Message: fmt.Sprintf(format, args...)}
	key := strings.Join([]string{f.Rule, f.MachineConfig, f.Field, f.Path, f.Message}, "\x00")
	if c.seen[key] {
		return nil
	}
	c.seen[key] = true
	c.findings = append(c.findings, f)
	if prunes(id) && src.MachineConfig != "" && src.Field != "" {
		c.pruneAt = append(c.pruneAt, src)
	}
	return &c.findings[len(c.findings)-1]
}

// prunes reports whether the findings of a rule keep their item out of
// the render: those that make mcbake build fail on it.
func prunes(id string) bool {
	switch id {
	case RuleUnsupportedIgnition, RuleFileDirClash, RuleUnknownOwner, RuleRenderFailure:
		return true
	}
	return false
}

func (c *checker) skip(id, reason string) {
	if _, ok := c.notRun[id]; !ok {
		c.notRun[id] = reason
	}
}

// skipByInputs records the rules whose inputs were not given.
func (c *checker) skipByInputs() {
	for _, r := range rules {
		switch {
		case (r.Needs == NeedsBase || r.Needs == NeedsBaseAndImage) && c.base == nil:
			c.skip(r.ID, "needs --base")
		case (r.Needs == NeedsImage || r.Needs == NeedsBaseAndImage) && c.image == nil:
			c.skip(r.ID, "needs --image")
		}
	}
}

// fileOf returns the file a MachineConfig was read from.
func (c *checker) fileOf(mc string) string {
	for _, m := range c.in.mcs {
		if m.Name == mc {
			return m.File
		}
	}
	return ""
}

// sourceOf turns a manifest source into a located one.
func (c *checker) sourceOf(s manifest.Source) machineconfig.Source {
	return machineconfig.Source{File: c.fileOf(s.MachineConfig), MachineConfig: s.MachineConfig, Field: s.Field}
}

// refusals turns the load-time field errors into findings.
func (c *checker) refusals() {
	for _, fe := range c.in.refused {
		c.add(RuleUnsupportedIgnition, machineconfig.Source{File: fe.File, MachineConfig: fe.MachineConfig, Field: fe.Field}, c.pathOf(fe.MachineConfig, fe.Field), "%s", fe.Msg)
	}
}

// itemField matches the field of a storage item or unit:
// spec.config.storage.files[3]..., spec.config.systemd.units[NAME]...
var itemField = regexp.MustCompile(`^spec\.config\.(?:storage\.(files|directories|links)\[(\d+)\]|systemd\.units\[([^\]]+)\])`)

// pathOf returns the path of the storage item or unit a field of
// MachineConfig mc belongs to, or "".
func (c *checker) pathOf(mc, field string) string {
	m := itemField.FindStringSubmatch(field)
	var cfg *machineconfig.MachineConfig
	for _, x := range c.in.mcs {
		if x.Name == mc {
			cfg = x
		}
	}
	if m == nil || cfg == nil {
		return ""
	}
	if m[3] != "" {
		return path.Join(render.UnitDir, m[3])
	}
	// The field indexes the config as written; mc.Ignition's items are
	// found by their own fields (a converted spec 2 config folds files).
	item := fmt.Sprintf("spec.config.storage.%s[%s]", m[1], m[2])
	st := cfg.Ignition.Storage
	var paths []string
	switch m[1] {
	case "files":
		for _, f := range st.Files {
			paths = append(paths, f.Path)
		}
	case "directories":
		for _, d := range st.Directories {
			paths = append(paths, d.Path)
		}
	case "links":
		for _, l := range st.Links {
			paths = append(paths, l.Path)
		}
	}
	for i, p := range paths {
		if cfg.Field(fmt.Sprintf("spec.config.storage.%s[%d]", m[1], i)) == item {
			return p
		}
	}
	return ""
}

// conflicts reports MachineConfigs that define one path or unit
// differently.
func (c *checker) conflicts() {
	for _, k := range c.merged.Conflicts {
		if k.Identical {
			continue
		}
		p := k.Key
		if k.Kind == "unit" {
			p = path.Join(render.UnitDir, k.Key)
		}
		c.add(RuleConflict, k.Winner, p, "%s %s is also defined, differently, by %s (%s, %s); %s wins: it merges later (worker-role MachineConfigs first, then the pool's own, each by name) and overrides what it sets",
			k.Kind, k.Key, k.Loser.MachineConfig, k.Loser.File, k.Loser.Field, k.Winner.MachineConfig)
	}
}

// item is a storage file, directory or link of the merged MachineConfigs.
type item struct {
	path string
	dir  bool
	kind string
	src  machineconfig.Source
	user *string // owner names, nil when not set by name
	grp  *string
}

func (c *checker) items() []item {
	var out []item
	for _, f := range c.merged.Files {
		out = append(out, item{path: f.Path, kind: "file", src: f.Source, user: ownerName(f.User.ID, f.User.Name), grp: ownerName(f.Group.ID, f.Group.Name)})
	}
	for _, d := range c.merged.Directories {
		out = append(out, item{path: d.Path, dir: true, kind: "directory", src: d.Source, user: ownerName(d.User.ID, d.User.Name), grp: ownerName(d.Group.ID, d.Group.Name)})
	}
	for _, l := range c.merged.Links {
		kind := "link"
		if l.Hard != nil && *l.Hard {
			kind = "hard link"
		}
		out = append(out, item{path: l.Path, kind: kind, src: l.Source, user: ownerName(l.User.ID, l.User.Name), grp: ownerName(l.Group.ID, l.Group.Name)})
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].path < out[j].path })
	return out
}

// ownerName returns the name an owner is given by, or nil when it is
// given by id (the id wins) or not at all.
func ownerName(id *int, name *string) *string {
	if id != nil || name == nil || *name == "" {
		return nil
	}
	return name
}

// cleanAbs reports whether p is absolute and clean (others are refused
// by MCB001).
func cleanAbs(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && p != "/"
}

// resolve returns where p lands in the root: parents resolved through the
// root's symlinks and, for a directory whose path is a symlink to one,
// the symlink followed too (as mkdir -p does).
func (c *checker) resolve(p string, dir bool) (string, error) {
	t := manifest.File
	if dir {
		t = manifest.Directory
	}
	return fstree.Locate(c.root, p, t)
}

func at(s machineconfig.Source, suffix string) machineconfig.Source {
	s.Field += suffix
	return s
}
