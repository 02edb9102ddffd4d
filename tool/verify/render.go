package verify

import (
	"context"
	"errors"
	"path"
	"strings"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// maxRenders bounds the render-prune-render loop; each round leaves out at
// least one more item.
const maxRenders = 8

// render renders the MachineConfigs against the root as mcbake build does,
// leaving out the items that have error findings. A failure is reported
// (MCB001 for content that does not decode, MCB014 otherwise), its item
// left out, and the render retried, so that one bad item does not hide
// the rest.
func (c *checker) render(ctx context.Context) {
	for i := 0; i < maxRenders; i++ {
		m := c.renderInput()
		res, err := render.Render(ctx, m, c.root)
		if ctx.Err() != nil {
			return // Run returns ctx's error
		}
		if err == nil {
			c.rendered = res
			c.skippedEnablement()
			c.degradingUnits()
			return
		}
		if !c.renderFailed(err) {
			return
		}
	}
}

// renderInput is the merged MachineConfigs without the pruned items.
// Without --base no owner name resolves, so names are dropped (owners are
// checked only against a base) and so are core's SSH keys.
func (c *checker) renderInput() *machineconfig.Merged { return c.inputFor(c.base != nil) }

// inputFor is the merged MachineConfigs without the pruned items, to be
// rendered against a root that resolves owner names (owners set) or not.
func (c *checker) inputFor(owners bool) *machineconfig.Merged {
	m := *c.merged
	noBase := !owners
	m.Files = keep(c, m.Files, func(f machineconfig.File) machineconfig.Source { return f.Source }, func(f *machineconfig.File) {
		if noBase {
			f.User.Name, f.Group.Name = nil, nil
		}
	})
	m.Directories = keep(c, m.Directories, func(d machineconfig.Directory) machineconfig.Source { return d.Source }, func(d *machineconfig.Directory) {
		if noBase {
			d.User.Name, d.Group.Name = nil, nil
		}
	})
	m.Links = keep(c, m.Links, func(l machineconfig.Link) machineconfig.Source { return l.Source }, func(l *machineconfig.Link) {
		if noBase {
			l.User.Name, l.Group.Name = nil, nil
		}
	})
	m.Units = keep(c, m.Units, func(u machineconfig.Unit) machineconfig.Source { return u.Source }, func(*machineconfig.Unit) {})
	if noBase || c.dropSSH {
		m.SSHKeys = nil
	}
	return &m
}

// keep copies the items that no pruned field names, adjusting each copy.
func keep[T any](c *checker, items []T, src func(T) machineconfig.Source, adjust func(*T)) []T {
	out := make([]T, 0, len(items))
	for _, it := range items {
		if c.prunedItem(src(it)) {
			c.pruned = true
			continue
		}
		adjust(&it)
		out = append(out, it)
	}
	return out
}

// prunedItem reports whether an item (by its source) is left out: a
// finding that prunes names it or one of its fields.
func (c *checker) prunedItem(s machineconfig.Source) bool {
	for _, p := range c.pruneAt {
		if p.MachineConfig == s.MachineConfig && within(p.Field, s.Field) {
			return true
		}
	}
	return false
}

// within reports whether field is item or one of its sub-fields
// (item.x, item[x]).
func within(field, item string) bool {
	if !strings.HasPrefix(field, item) {
		return false
	}
	rest := field[len(item):]
	return rest == "" || rest[0] == '.' || rest[0] == '['
}

// renderFailed reports a failed render and reports whether a retry can do
// better (some item was newly left out).
func (c *checker) renderFailed(err error) bool {
	before := len(c.pruneAt)
	for _, e := range machineconfig.Errors(err) {
		var fe *machineconfig.FieldError
		if !errors.As(e, &fe) {
			c.add(RuleRenderFailure, machineconfig.Source{}, "", "%v", e)
			continue
		}
		src := machineconfig.Source{File: fe.File, MachineConfig: fe.MachineConfig, Field: fe.Field}
		if src.File == "" || src.File == "<merged>" {
			src.File = c.fileOf(fe.MachineConfig)
		}
		id := RuleRenderFailure
		if fe.Reason == machineconfig.ReasonContent {
			id = RuleUnsupportedIgnition
		}
		c.add(id, src, c.pathOf(fe.MachineConfig, fe.Field), "%s", fe.Msg)
	}
	return len(c.pruneAt) > before
}

// ownedManifest is the manifest revert analysis uses: the image's
// embedded one when there is one, else the fresh render's.
func (c *checker) ownedManifest() *manifest.Manifest {
	if c.image != nil && c.image.manifest != nil {
		return c.image.manifest
	}
	if c.rendered == nil {
		return nil
	}
	return c.rendered.Manifest(c.merged.MachineConfigs)
}

// degradingUnits reports the units whose enablement the daemon's on-disk
// validation finds wrong (MCB024).
func (c *checker) degradingUnits() {
	for _, u := range c.rendered.Degrading {
		c.add(RuleEnablementCheck, u.Source, path.Join(render.UnitDir, u.Name),
			"unit %s has enabled: true, but once the machine-config-daemon applied every unit, systemctl is-enabled says %s: its on-disk validation fails and the node goes Degraded", u.Name, u.State)
	}
}

// skippedEnablement reports (MCB010) the units whose enablement the
// machine-config-daemon skips although a unit file exists (the instances
// of templates); with no unit file units has reported them already.
func (c *checker) skippedEnablement() {
	if c.base == nil {
		return // without a base nothing is listed: every unit looks skipped
	}
	for _, u := range c.rendered.Skipped {
		if _, found := c.unitFile(u.Name, u.Source); !found {
			continue
		}
		c.add(RuleUnitNotFound, u.SourceOf("enabled"), path.Join(render.UnitDir, u.Name),
			"unit %s has enabled: %t but no contents, and systemctl list-unit-files does not list it: the machine-config-daemon skips its enablement", u.Name, *u.Enabled)
	}
}
