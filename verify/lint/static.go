package lint

import (
	"path"
	"strings"

	"github.com/mcbake/mcbake/internal/base"
	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/machineconfig"
	"github.com/mcbake/mcbake/internal/manifest"
	"github.com/mcbake/mcbake/internal/render"
	"github.com/mcbake/mcbake/verify"
)

func baseRoot(ix *baseindex.Index) render.Root { return base.Root{Index: ix} }

// zones classifies every storage item by where it lands (MCB003-MCB005).
func (c *checker) zones() {
	for _, it := range c.items() {
		if !cleanAbs(it.path) {
			continue
		}
		rp, err := c.resolve(it.path, it.dir)
		if err != nil {
			continue // reported by the render (MCB014)
		}
		where := it.path
		if rp != it.path {
			where += " (at " + rp + ")"
		}
		switch verify.ZoneOf(rp) {
		case verify.ZoneUsr:
			c.add(RuleUsrContent, it.src, it.path, "%s %s is outside /etc and /var: a revert to the base replaces or removes it, and a node cannot rewrite it", it.kind, where)
		case verify.ZoneVar:
			c.add(RuleVarContent, it.src, it.path, "%s %s is under /var: the image's copy never reaches an existing node, and a revert never removes it", it.kind, where)
		case verify.ZoneDropped:
			c.add(RuleDroppedContent, it.src, it.path, "%s %s is under a directory ostree-container import drops: it never reaches a node from the image", it.kind, where)
		}
	}
}

// clashes reports types the base cannot merge (MCB006).
func (c *checker) clashes() {
	for _, it := range c.items() {
		if cleanAbs(it.path) {
			c.clash(it.path, it.dir, it.kind, it.src)
		}
	}
	for _, u := range c.merged.Units {
		if strings.ContainsAny(u.Name, "/\x00") {
			continue // refused (MCB001)
		}
		unitPath := path.Join(render.UnitDir, u.Name)
		switch {
		case u.Mask != nil && *u.Mask:
			c.clash(unitPath, false, "mask link", u.SourceOf("mask"))
		case render.HasContent(u.Contents):
			c.clash(unitPath, false, "unit file", u.SourceOf("contents"))
		}
		for _, d := range u.Dropins {
			if render.HasContent(d.Contents) && !strings.ContainsAny(d.Name, "/\x00") {
				c.clash(path.Join(unitPath+".d", d.Name), false, "drop-in", u.SourceOf("dropins["+d.Name+"]"))
			}
		}
	}
}

// clash checks one path against the base: the path itself and each of its
// parent directories.
func (c *checker) clash(p string, dir bool, kind string, src machineconfig.Source) {
	rp, err := c.resolve(p, dir)
	if err != nil {
		return
	}
	for d := path.Dir(rp); d != "/"; d = path.Dir(d) {
		if n, ok := c.root.Lstat(d); ok && n.Type != manifest.Directory {
			c.add(RuleFileDirClash, src, p, "%s %s: its parent %s is a %s in the base, not a directory", kind, p, d, n.Type)
			return
		}
	}
	n, ok := c.root.Lstat(rp)
	switch {
	case !ok:
	case dir && n.Type != manifest.Directory:
		c.add(RuleFileDirClash, src, p, "directory %s: the base has a %s at %s", p, n.Type, rp)
	case !dir && n.Type == manifest.Directory:
		c.add(RuleFileDirClash, src, p, "%s %s: the base has a directory at %s", kind, p, rp)
	}
}

// owners reports owner names the base cannot resolve (MCB011).
func (c *checker) owners() {
	users := render.Names(c.root, "passwd")
	groups := render.Names(c.root, "group")
	for _, it := range c.items() {
		if it.user != nil && !users[*it.user] {
			c.add(RuleUnknownOwner, at(it.src, ".user.name"), it.path, "%s %s: user %q is in neither /etc/passwd nor /usr/lib/passwd of the base", it.kind, it.path, *it.user)
		}
		if it.grp != nil && !groups[*it.grp] {
			c.add(RuleUnknownOwner, at(it.src, ".group.name"), it.path, "%s %s: group %q is in neither /etc/group nor /usr/lib/group of the base", it.kind, it.path, *it.grp)
		}
	}
	if len(c.merged.SSHKeys) > 0 && (!users["core"] || !groups["core"]) {
		c.add(RuleUnknownOwner, c.merged.SSHKeys[0].Source, render.SSHKeysFile, "core's SSH keys are written core:core, and the base has no core user or group")
		c.dropSSH = true
	}
}

// units checks unit enablement and drop-ins (MCB010, MCB013).
func (c *checker) units() {
	for _, u := range c.merged.Units {
		if u.Mask != nil && *u.Mask {
			continue
		}
		enabled := u.Enabled != nil && *u.Enabled
		contents, found := c.unitFile(u.Name)
		switch {
		case found && enabled && !render.Installs(contents):
			c.add(RuleEnabledNoInstall, u.SourceOf("enabled"), path.Join(render.UnitDir, u.Name),
				"unit %s has enabled: true but no [Install] section naming WantedBy=, RequiredBy=, Alias= or Also=: systemctl enable creates no symlink", u.Name)
		case !found && c.base != nil && (enabled || hasDropins(u)):
			what := "drop-ins"
			if enabled {
				what = "enabled: true"
			}
			c.add(RuleUnitNotFound, u.Source, path.Join(render.UnitDir, u.Name),
				"unit %s has %s but no unit file: no MachineConfig gives its contents and the base has none", u.Name, what)
		}
	}
}

func hasDropins(u machineconfig.Unit) bool {
	for _, d := range u.Dropins {
		if render.HasContent(d.Contents) {
			return true
		}
	}
	return false
}

// unitFile finds the unit file systemctl would use, in the base only
// with --base.
func (c *checker) unitFile(name string) ([]byte, bool) {
	var root render.Root
	if c.base != nil {
		root = c.root
	}
	contents, _, ok := render.FindUnitFile(root, c.merged.Units, name)
	return contents, ok
}
