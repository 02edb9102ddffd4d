package verify

import (
	"path"
	"strings"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/revert"
)

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
		switch revert.ZoneOf(rp) {
		case revert.ZoneUsr:
			c.add(RuleUsrContent, it.src, it.path, "%s %s is outside /etc and /var: a revert to the base replaces or removes it, and a node cannot rewrite it", it.kind, where)
		case revert.ZoneVar:
			c.add(RuleVarContent, it.src, it.path, "%s %s is under /var: the image's copy never reaches an existing node, and a revert never removes it", it.kind, where)
		case revert.ZoneDropped:
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
		if n, ok := c.lstat(d, src); ok && n.Type != manifest.Directory {
			c.add(RuleFileDirClash, src, p, "%s %s: its parent %s is a %s in the base, not a directory", kind, p, d, n.Type)
			return
		}
	}
	n, ok := c.lstat(rp, src)
	switch {
	case !ok:
	case dir && n.Type != manifest.Directory:
		c.add(RuleFileDirClash, src, p, "directory %s: the base has a %s at %s", p, n.Type, rp)
	case !dir && n.Type == manifest.Directory:
		c.add(RuleFileDirClash, src, p, "%s %s: the base has a directory at %s", kind, p, rp)
	}
}

// lstat is c.root.Lstat; a base that cannot be read is a render failure
// (MCB014) at src.
func (c *checker) lstat(p string, src machineconfig.Source) (manifest.Entry, bool) {
	e, ok, err := c.root.Lstat(p)
	if err != nil {
		c.add(RuleRenderFailure, src, p, "reading the base: %v", err)
	}
	return e, ok
}

// owners reports owner names the base cannot resolve (MCB011).
func (c *checker) owners() {
	users, err := render.Names(c.root, "passwd")
	if err == nil {
		var groups map[string]bool
		if groups, err = render.Names(c.root, "group"); err == nil {
			c.ownerNames(users, groups)
			return
		}
	}
	c.add(RuleRenderFailure, machineconfig.Source{}, "", "reading the base's accounts: %v", err)
}

// ownerNames reports the owner names that are not among the base's users
// and groups.
func (c *checker) ownerNames(users, groups map[string]bool) {
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
		contents, found := c.unitFile(u.Name, u.Source)
		switch {
		case found && enabled && !render.Installs(contents) && !dropinInstalls(u):
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

// dropinInstalls reports whether one of the unit's drop-ins has an
// [Install] section that makes systemctl enable do something: systemd
// reads [Install] in drop-ins too.
func dropinInstalls(u machineconfig.Unit) bool {
	for _, d := range u.Dropins {
		if render.HasContent(d.Contents) && render.Installs([]byte(*d.Contents)) {
			return true
		}
	}
	return false
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
// with --base; a base that cannot be read is a render failure (MCB014).
func (c *checker) unitFile(name string, src machineconfig.Source) ([]byte, bool) {
	var root fstree.Tree
	if c.base != nil {
		root = c.root
	}
	contents, _, ok, err := render.FindUnitFile(root, c.merged.Units, name)
	if err != nil {
		c.add(RuleRenderFailure, src, path.Join(render.UnitDir, name), "reading unit %s: %v", name, err)
	}
	return contents, ok
}
