package machineconfig

import (
	"errors"
	"fmt"
	"net/url"
	"path"
	"strings"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// ForceFile is the path whose presence makes the MCD skip validation; a
// MachineConfig must never ship it.
const ForceFile = "/run/machine-config-daemon-force"

// MaxMode is the largest file mode the MCD accepts.
const MaxMode = 0o777

// Refusals returns every part of cfg that the machine-config-daemon does not
// apply (docs/design.md, "What is refused"), as FieldErrors without file or MachineConfig set.
// It returns nil when cfg is acceptable.
func Refusals(cfg types.Config) error {
	var r refusals
	r.ignition(cfg.Ignition)
	if len(cfg.KernelArguments.ShouldExist) > 0 || len(cfg.KernelArguments.ShouldNotExist) > 0 {
		r.add("spec.config.kernelArguments", "Ignition kernel arguments are not applied by the machine-config-daemon; use spec.kernelArguments")
	}
	r.passwd(cfg.Passwd)
	r.storage(cfg.Storage)
	r.units(cfg.Systemd.Units)
	return errors.Join(r...)
}

type refusals []error

func (r *refusals) add(field, format string, args ...any) {
	*r = append(*r, &FieldError{Field: field, Reason: ReasonUnsupported, Msg: fmt.Sprintf(format, args...)})
}

func (r *refusals) ignition(ig types.Ignition) {
	const f = "spec.config.ignition"
	if len(ig.Config.Merge) > 0 {
		r.add(f+".config.merge", "merging other Ignition configs is not supported by the machine-config-daemon")
	}
	if ig.Config.Replace.Source != nil {
		r.add(f+".config.replace", "replacing the config is not supported by the machine-config-daemon")
	}
	for i, ca := range ig.Security.TLS.CertificateAuthorities {
		r.resource(fmt.Sprintf("%s.security.tls.certificateAuthorities[%d]", f, i), ca)
	}
}

func (r *refusals) passwd(p types.Passwd) {
	for i, g := range p.Groups {
		r.add(fmt.Sprintf("spec.config.passwd.groups[%d]", i), "group %q: passwd groups are not supported by the machine-config-daemon", g.Name)
	}
	for i, u := range p.Users {
		f := fmt.Sprintf("spec.config.passwd.users[%d]", i)
		if u.Name != "core" {
			r.add(f+".name", "user %q: only the core user is supported by the machine-config-daemon", u.Name)
			continue
		}
		for _, field := range coreFieldsSet(u) {
			r.add(f+"."+field, "only sshAuthorizedKeys and passwordHash may be set for the core user")
		}
	}
}

// coreFieldsSet lists the fields of the core user other than name,
// sshAuthorizedKeys and passwordHash that are set.
func coreFieldsSet(u types.PasswdUser) []string {
	var set []string
	check := func(name string, isSet bool) {
		if isSet {
			set = append(set, name)
		}
	}
	check("gecos", u.Gecos != nil)
	check("groups", len(u.Groups) > 0)
	check("homeDir", u.HomeDir != nil)
	check("noCreateHome", u.NoCreateHome != nil)
	check("noLogInit", u.NoLogInit != nil)
	check("noUserGroup", u.NoUserGroup != nil)
	check("primaryGroup", u.PrimaryGroup != nil)
	check("shell", u.Shell != nil)
	check("shouldExist", u.ShouldExist != nil)
	check("system", u.System != nil)
	check("uid", u.UID != nil)
	return set
}

func (r *refusals) storage(s types.Storage) {
	const f = "spec.config.storage"
	// disks, raid, filesystems and luks are Ignition's at a node's install:
	// they stay in a pool's config forever, and the MCD never applies them
	// (the MCO refuses a change to the first three and ignores one to
	// luks). Nothing is baked for them (verify's MCB021 says so).
	for i, file := range s.Files {
		r.file(fmt.Sprintf("%s.files[%d]", f, i), file)
	}
	for i, d := range s.Directories {
		ff := fmt.Sprintf("%s.directories[%d]", f, i)
		r.path(ff+".path", d.Path)
		r.mode(ff+".mode", d.Mode)
		r.owners(ff, d.Node)
	}
	for i, l := range s.Links {
		ff := fmt.Sprintf("%s.links[%d]", f, i)
		r.link(ff, l)
		r.owners(ff, l.Node)
	}
}

// MaxID is the largest user or group id a file can have: chown(2) reads
// (uid_t)-1 as "leave it".
const MaxID = 1<<32 - 2

// owners refuses an id no file can have: the MCD would pass it to chown,
// which takes it modulo 2^32 (or as "leave it"), and a tar header cannot
// carry a negative one.
func (r *refusals) owners(f string, n types.Node) {
	for _, o := range []struct {
		field string
		id    *int
	}{{".user.id", n.User.ID}, {".group.id", n.Group.ID}} {
		if o.id != nil && (*o.id < 0 || *o.id > MaxID) {
			r.add(f+o.field, "id %d is out of range (0 to %d)", *o.id, MaxID)
		}
	}
}

func (r *refusals) file(f string, file types.File) {
	r.path(f+".path", file.Path)
	if path.Clean(file.Path) == ForceFile {
		r.add(f+".path", "%s would make the machine-config-daemon skip validation", ForceFile)
	}
	if len(file.Append) > 0 {
		r.add(f+".append", "appending is not supported by the machine-config-daemon")
	}
	r.mode(f+".mode", file.Mode)
	r.owners(f, file.Node)
	r.resource(f+".contents", file.Contents)
}

func (r *refusals) resource(f string, res types.Resource) {
	if res.Compression != nil && *res.Compression != "" && *res.Compression != "gzip" {
		r.add(f+".compression", "compression %q is not supported (only none or gzip)", *res.Compression)
	}
	if res.Source == nil || *res.Source == "" {
		return
	}
	u, err := url.Parse(*res.Source)
	if err != nil {
		r.add(f+".source", "invalid URL: %v", err)
		return
	}
	if u.Scheme != "data" {
		r.add(f+".source", "remote content (%s) is not supported: the build is offline; inline it as a data: URL", u.Scheme)
	}
}

func (r *refusals) mode(f string, mode *int) {
	if mode != nil && (*mode < 0 || *mode > MaxMode) {
		r.add(f, "mode %#o is above 0777 (setuid, setgid and sticky bits are not supported)", *mode)
	}
}

func (r *refusals) link(f string, l types.Link) {
	r.path(f+".path", l.Path)
	if l.Target == nil {
		return
	}
	target := *l.Target
	switch {
	case strings.ContainsRune(target, 0):
		r.add(f+".target", "link target %q contains a NUL byte", target)
		return
	case len(target) > MaxPath:
		r.add(f+".target", "link target is %d bytes, longer than PATH_MAX (%d)", len(target), MaxPath)
		return
	}
	if l.Hard != nil && *l.Hard {
		r.path(f+".target", target)
		return
	}
	if escapes(l.Path, target) {
		r.add(f+".target", "link target %q escapes the image root", target)
	}
}

func (r *refusals) units(units []types.Unit) {
	for i, u := range units {
		f := fmt.Sprintf("spec.config.systemd.units[%s]", u.Name)
		if strings.ContainsAny(u.Name, "/\x00") || u.Name == "." || u.Name == ".." || len(u.Name) > MaxName {
			r.add(fmt.Sprintf("spec.config.systemd.units[%d].name", i), "unit name %q is not a file name", u.Name)
		}
		for _, d := range u.Dropins {
			if strings.ContainsAny(d.Name, "/\x00") || d.Name == "." || d.Name == ".." || len(d.Name) > MaxName {
				r.add(f+".dropins["+d.Name+"].name", "drop-in name %q is not a file name", d.Name)
			}
		}
	}
}

// path refuses paths that are not absolute and clean.
func (r *refusals) path(f, p string) {
	switch {
	case strings.ContainsRune(p, 0):
		r.add(f, "path %q contains a NUL byte", p)
	case len(p) > MaxPath:
		r.add(f, "path %.40q... is %d bytes, longer than PATH_MAX (%d): no node can create it", p, len(p), MaxPath)
	case longComponent(p) != "":
		r.add(f, "path %q: component %.40q is longer than NAME_MAX (%d bytes)", p, longComponent(p), MaxName)
	case !strings.HasPrefix(p, "/"):
		r.add(f, "path %q is not absolute", p)
	case path.Clean(p) != p || hasDotDot(p):
		r.add(f, "path %q is not clean (no .., ., // or trailing /)", p)
	case p == "/":
		r.add(f, "path %q is the root directory itself", p)
	}
}

// Path limits of Linux: a path (PATH_MAX, with its NUL) and a name
// (NAME_MAX). A layer may hold longer ones, but no node can extract them.
const (
	MaxPath = 4095
	MaxName = 255
)

// longComponent returns the first component of p longer than MaxName, "".
func longComponent(p string) string {
	for _, c := range strings.Split(p, "/") {
		if len(c) > MaxName {
			return c
		}
	}
	return ""
}

func hasDotDot(p string) bool {
	for _, c := range strings.Split(p, "/") {
		if c == ".." {
			return true
		}
	}
	return false
}

// escapes reports whether a symlink at linkPath with the given target,
// followed lexically, climbs above the image root.
func escapes(linkPath, target string) bool {
	start := path.Dir(linkPath)
	if strings.HasPrefix(target, "/") {
		start = "/"
	}
	depth := 0
	for _, c := range strings.Split(strings.TrimPrefix(start, "/"), "/") {
		if c != "" {
			depth++
		}
	}
	for _, c := range strings.Split(target, "/") {
		switch c {
		case "", ".":
		case "..":
			depth--
			if depth < 0 {
				return true
			}
		default:
			depth++
		}
	}
	return false
}
