package render

import (
	"bytes"
	"errors"
	"io/fs"
	"path"
	"strings"

	"github.com/coreos/go-systemd/v22/unit"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// UnitDir is where the MCD writes units, drop-ins and enablement links.
const UnitDir = "/etc/systemd/system"

// unitSearchPath is where systemctl looks for unit files, in order.
var unitSearchPath = []string{UnitDir, "/run/systemd/system", "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", "/lib/systemd/system"}

// Enablement values recorded in the manifest.
const (
	Enabled  = "enabled"
	Disabled = "disabled"
	Masked   = "masked"
	Preset   = "preset"
)

// install is a unit's [Install] section.
type install struct {
	wantedBy, requiredBy, alias, also []string
	defaultInstance                   string
	present                           bool
}

func parseInstall(contents []byte) (install, error) {
	opts, err := unit.DeserializeOptions(bytes.NewReader(contents))
	if err != nil {
		return install{}, err
	}
	var in install
	for _, o := range opts {
		if o.Section != "Install" {
			continue
		}
		in.present = true
		switch o.Name {
		case "WantedBy":
			in.wantedBy = append(in.wantedBy, strings.Fields(o.Value)...)
		case "RequiredBy":
			in.requiredBy = append(in.requiredBy, strings.Fields(o.Value)...)
		case "Alias":
			in.alias = append(in.alias, strings.Fields(o.Value)...)
		case "Also":
			in.also = append(in.also, strings.Fields(o.Value)...)
		case "DefaultInstance":
			in.defaultInstance = strings.TrimSpace(o.Value)
		}
	}
	return in, nil
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

// unitFile finds the file systemctl would use for name (see FindUnitFile);
// a read error is recorded against src.
func (r *renderer) unitFile(name string, units []machineconfig.Unit, src machineconfig.Source) (contents []byte, at string, ok bool) {
	contents, at, ok, err := FindUnitFile(r.root, units, name)
	if err != nil {
		r.fail(src, "reading unit %s: %v", name, err)
	}
	return contents, at, ok
}

// FindUnitFile finds the file systemctl would use for the unit name: the
// contents a MachineConfig unit gives (written to UnitDir) first, then the
// root's unit search path (root may be nil); an instance falls back to its
// template. It returns the contents and the path the file is at; a file
// that exists but cannot be read is an error.
func FindUnitFile(root Root, units []machineconfig.Unit, name string) (contents []byte, at string, ok bool, err error) {
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
		for _, dir := range unitSearchPath {
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

// Installs reports whether a unit file's [Install] section makes
// `systemctl enable` do something. A file that does not parse counts as
// installing (rendering reports its parse error).
func Installs(contents []byte) bool {
	in, err := parseInstall(contents)
	if err != nil {
		return true
	}
	return len(in.wantedBy)+len(in.requiredBy)+len(in.alias)+len(in.also) > 0
}

// links returns the symlinks `systemctl enable name` creates, keyed by
// link path, with the unit file they point to.
func (r *renderer) installLinks(name string, src machineconfig.Source) (map[string]string, bool) {
	contents, at, ok := r.unitFile(name, r.m.Units, src)
	if !ok {
		return nil, false
	}
	in, err := parseInstall(contents)
	if err != nil {
		r.fail(src, "parsing unit %s: %v", name, err)
		return nil, false
	}
	r.also[name] = in.also
	return installPaths(name, in, at), in.present
}

// linksOf returns the links the unit file contents (at path at) installs;
// a file that does not parse installs none.
func (r *renderer) linksOf(name string, contents []byte, at string) map[string]string {
	in, err := parseInstall(contents)
	if err != nil {
		return nil
	}
	return installPaths(name, in, at)
}

// installPaths maps the link paths an [Install] section makes for name to
// the unit file at.
func installPaths(name string, in install, at string) map[string]string {
	linkName := name
	if tmpl, inst, isT := templateOf(name); isT && inst == "" {
		if in.defaultInstance == "" {
			return map[string]string{}
		}
		linkName = strings.TrimSuffix(tmpl, path.Ext(tmpl)) + in.defaultInstance + path.Ext(tmpl)
	}
	out := map[string]string{}
	for _, t := range in.wantedBy {
		out[path.Join(UnitDir, t+".wants", linkName)] = at
	}
	for _, t := range in.requiredBy {
		out[path.Join(UnitDir, t+".requires", linkName)] = at
	}
	for _, a := range in.alias {
		out[path.Join(UnitDir, a)] = at
	}
	return out
}

func (r *renderer) units() {
	for _, u := range r.m.Units {
		r.unitFiles(u)
	}
	for _, u := range r.m.Units {
		r.enablement(u)
	}
}

// HasContent reports whether a unit or drop-in has contents the MCD
// writes: it skips nil and empty ones alike.
func HasContent(c *string) bool { return c != nil && *c != "" }

// unitFiles writes drop-ins, the unit file and the mask, as the MCD does
// (pkg/daemon/file_writers.go): a drop-in without contents is not written
// and removed when the root has it; a unit without contents keeps the
// root's unit file.
func (r *renderer) unitFiles(u machineconfig.Unit) {
	for _, d := range u.Dropins {
		p := path.Join(UnitDir, u.Name+".d", d.Name)
		src := u.SourceOf("dropins[" + d.Name + "]")
		if !HasContent(d.Contents) {
			if _, ok := r.lstat(p); ok {
				r.addAbsent(p, src)
			}
			continue
		}
		r.addFile(p, []byte(*d.Contents), 0o644, 0, 0, src)
	}
	if u.Mask != nil && *u.Mask {
		r.addLink(path.Join(UnitDir, u.Name), "/dev/null", u.SourceOf("mask"))
		return
	}
	if HasContent(u.Contents) {
		// The MCD disables an enabled unit before rewriting it
		// (OCPBUGS-33694): links its old [Install] made go; enablement
		// below puts back those the new contents name.
		r.removeRootLinks(u.Name, nil, u.SourceOf("contents"))
		r.addFile(path.Join(UnitDir, u.Name), []byte(*u.Contents), 0o644, 0, 0, u.SourceOf("contents"))
	}
}

func (r *renderer) enablement(u machineconfig.Unit) {
	src := u.SourceOf("enabled")
	switch {
	case u.Mask != nil && *u.Mask:
		if u.Enabled != nil && !*u.Enabled {
			r.disable(u.Name, src) // the MCD still runs systemctl disable
		}
		r.recordUnit(u.Name, Masked, u.SourceOf("mask"))
	case u.Enabled != nil && *u.Enabled:
		r.enable(u.Name, src, map[string]bool{})
		r.recordUnit(u.Name, Enabled, src)
	case u.Enabled != nil:
		r.disable(u.Name, src)
		r.recordUnit(u.Name, Disabled, src)
	case r.hasRoot:
		// systemctl preset: the first matching rule decides; with no
		// preset files at all, or no matching rule, it enables.
		if r.presets.enabled(u.Name) {
			r.enable(u.Name, src, map[string]bool{})
			r.recordUnit(u.Name, Enabled, src)
		} else {
			r.disable(u.Name, src)
			r.recordUnit(u.Name, Disabled, src)
		}
	default:
		r.recordUnit(u.Name, Preset, src)
	}
}

func (r *renderer) recordUnit(name, state string, src machineconfig.Source) {
	r.unitStates = append(r.unitStates, manifest.Unit{Name: name, Enablement: state, Source: manifest.Source{MachineConfig: src.MachineConfig, Field: src.Field}})
}

func (r *renderer) enable(name string, src machineconfig.Source, seen map[string]bool) {
	if seen[name] {
		return
	}
	seen[name] = true
	links, _ := r.installLinks(name, src)
	for _, l := range sortedKeys(links) {
		if r.unitWritten(l) {
			r.fail(src, "enabling %s would replace %s, which a MachineConfig unit writes (a mask or unit file): systemctl enable refuses that", name, l)
			continue
		}
		r.addLink(l, links[l], src)
	}
	for _, also := range r.also[name] {
		r.enable(also, src, seen)
	}
}

// unitWritten reports whether p is a unit file or mask that a
// MachineConfig unit writes (enablement runs after all of those).
func (r *renderer) unitWritten(p string) bool {
	i, ok := r.index[p]
	if !ok {
		return false
	}
	e := r.entries[i]
	f := e.Source.Field
	return e.Type != manifest.Absent && (strings.HasSuffix(f, ".mask") || strings.HasSuffix(f, ".contents"))
}

// disable removes, as `systemctl disable` does, every enablement link of
// the unit that the root has: those its [Install] section names and any
// NAME in a *.wants or *.requires directory of UnitDir.
func (r *renderer) disable(name string, src machineconfig.Source) {
	candidates, _ := r.installLinks(name, src)
	r.removeRootLinks(name, candidates, src)
}

// removeRootLinks removes (as owned-absent entries) every link of the unit
// name the root has: the candidates, those the root's own unit file
// installs (its [Install] may differ from a MachineConfig's new contents),
// and NAME in any *.wants or *.requires directory of UnitDir.
func (r *renderer) removeRootLinks(name string, candidates map[string]string, src machineconfig.Source) {
	all := map[string]bool{}
	for l := range candidates {
		all[l] = true
	}
	if contents, at, ok := r.unitFile(name, nil, src); ok {
		for l := range r.linksOf(name, contents, at) {
			all[l] = true
		}
	}
	for _, dir := range r.readDir(UnitDir) {
		if strings.HasSuffix(dir, ".wants") || strings.HasSuffix(dir, ".requires") {
			all[path.Join(UnitDir, dir, name)] = true
		}
	}
	for _, l := range sortedKeys(all) {
		if n, ok := r.lstat(l); ok && n.Type == manifest.Symlink {
			r.addAbsent(l, src)
		}
	}
}
