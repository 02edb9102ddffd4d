package systemctl

import (
	"path"
	"strings"
)

// Lookup paths of the system scope, as systemd 252 on RHEL/RHCOS has them
// (built without split-usr: /lib/systemd/system is not searched).
const (
	persistentConfig  = "/etc/systemd/system"
	runtimeConfig     = "/run/systemd/system"
	persistentControl = "/etc/systemd/system.control"
	runtimeControl    = "/run/systemd/system.control"
	transientDir      = "/run/systemd/transient"
	generatorDir      = "/run/systemd/generator"
	generatorEarly    = "/run/systemd/generator.early"
	generatorLate     = "/run/systemd/generator.late"
)

// SearchPath is the unit search path, highest priority first.
var SearchPath = []string{
	persistentControl, runtimeControl, transientDir, generatorEarly,
	persistentConfig, "/etc/systemd/system.attached", runtimeConfig, "/run/systemd/system.attached",
	generatorDir, "/usr/local/lib/systemd/system", "/usr/lib/systemd/system", generatorLate,
}

// ConfigPath is where enable, disable and preset make and remove links.
const ConfigPath = persistentConfig

type installMode int

const (
	modeInvalid installMode = iota
	modeRegular
	modeLinked
	modeAlias
	modeMasked
)

// Search flags.
const (
	searchLoad = 1 << iota
	searchFollowConfigSymlinks
	searchDropin
)

// info is systemd's InstallInfo.
type info struct {
	name, path                          string
	aliases, wantedBy, requiredBy, also []string
	defaultInstance                     string
	symlinkTarget                       string
	mode                                installMode
	auxiliary                           bool
	origin                              string // the name given to systemctl this info serves
}

func (i *info) hasRules() bool { return len(i.aliases)+len(i.wantedBy)+len(i.requiredBy) > 0 }

// context is systemd's InstallContext: ordered will_process and
// have_processed maps.
type context struct {
	will   []*info
	have   map[string]*info
	byName map[string]*info // both maps
}

func newContext() *context {
	return &context{have: map[string]*info{}, byName: map[string]*info{}}
}

func (c *context) find(name string) *info { return c.byName[name] }

// add is install_info_add: the info for name (or the basename of p),
// created at the end of will_process when new.
func (c *context) add(name, p string, auxiliary bool, origin string) (*info, int) {
	if name == "" {
		name = basename(p)
	}
	if !nameValid(name, nameAny) {
		return nil, -eINVAL
	}
	if i := c.find(name); i != nil {
		i.auxiliary = i.auxiliary && auxiliary
		return i, 0
	}
	i := &info{name: name, path: p, auxiliary: auxiliary, origin: origin}
	if i.origin == "" {
		i.origin = name
	}
	c.will = append(c.will, i)
	c.byName[name] = i
	return i, 1
}

// next moves the first info of will_process to have_processed.
func (c *context) next() *info {
	if len(c.will) == 0 {
		return nil
	}
	i := c.will[0]
	c.will = c.will[1:]
	c.have[i.name] = i
	return i
}

// Change types, as systemd's InstallChangeType; a negative type is an
// errno.
const (
	ChangeSymlink = iota
	ChangeUnlink
	ChangeIsMasked
	ChangeIsMaskedGenerator
	ChangeIsDangling
	ChangeDestinationNotPresent
	ChangeAuxiliaryFailed
)

// Change is one entry of systemd's change list.
type InstallChange struct {
	Type         int
	Path, Source string
	Origin       string // the name given to systemctl it concerns
}

// Result is what one systemctl call returned: systemd's return value and
// its change list.
type Result struct {
	R       int
	Changes []InstallChange
}

// Systemctl runs systemd 252's unit file installation on an FS.
type Systemctl struct {
	fs             *FS
	tags           map[string]any
	osrel          map[string]string
	nodeSpecifiers []NodeSpecifier
	presets        *presets
	// current collects the changes of the call in progress.
	current *Result
}

// New returns a Systemctl working on fs.
func New(fs *FS) *Systemctl { return &Systemctl{fs: fs, tags: map[string]any{}} }

// Tag makes the FS record the changes a call makes on behalf of name
// (a name given to that call, or one its Also= brought in) with tag.
func (s *Systemctl) Tag(name string, tag any) { s.tags[name] = tag }

// NodeSpecifier is a use of a specifier only the node can resolve: in the
// [Install] of Unit, for the name given to systemctl Origin.
type NodeSpecifier struct {
	Specifier, Unit, Origin string
}

// NodeSpecifiers lists the node-only specifiers met so far.
func (s *Systemctl) NodeSpecifiers() []NodeSpecifier { return s.nodeSpecifiers }

func (s *Systemctl) tagFor(origin string) {
	if t, ok := s.tags[origin]; ok {
		s.fs.SetTag(t)
	}
}

func (s *Systemctl) change(typ int, p, source, origin string) int {
	if s.current != nil {
		s.current.Changes = append(s.current.Changes, InstallChange{Type: typ, Path: pathSimplify(p), Source: source, Origin: origin})
	}
	return typ
}

// pathSimplify is path_simplify, which install_changes_add applies to a
// change's path: redundant slashes and "." components go, ".." stays, an
// empty path stays empty (an empty word of WantedBy= is reported as ""),
// and from a component longer than NAME_MAX on the rest is kept as is.
func pathSimplify(p string) string {
	if p == "" {
		return p
	}
	var b strings.Builder
	rest := p
	if p[0] == '/' {
		b.WriteByte('/')
		rest = p[1:]
	}
	added := false
	for {
		start := rest
		rest = skipSlashOrDot(rest)
		if rest == "" || rest == "." {
			break
		}
		c, after, _ := strings.Cut(rest, "/")
		if added {
			b.WriteByte('/')
		}
		if len(c) > nameMax {
			b.WriteString(start)
			return b.String()
		}
		b.WriteString(c)
		added = true
		if rest = skipSlashOrDot("/" + after); rest == "." {
			rest = ""
		}
	}
	if b.Len() == 0 {
		return "."
	}
	return b.String()
}

// skipSlashOrDot is skip_slash_or_dot: slashes and "./" are skipped.
func skipSlashOrDot(p string) string {
	for p != "" {
		switch {
		case p[0] == '/':
			p = p[1:]
		case strings.HasPrefix(p, "./"):
			p = p[2:]
		default:
			return p
		}
	}
	return p
}

// nameMax is NAME_MAX.
const nameMax = 255

func inSearchPath(p string) bool {
	d := path.Dir(p)
	for _, s := range SearchPath {
		if s == d {
			return true
		}
	}
	return false
}

func underSearchPath(p string) bool {
	for _, s := range SearchPath {
		if p == s || strings.HasPrefix(p, s+"/") {
			return true
		}
	}
	return false
}

func pathIsGenerator(p string) bool {
	d := path.Dir(p)
	return d == generatorDir || d == generatorEarly || d == generatorLate
}

func pathIsTransient(p string) bool { return path.Dir(p) == transientDir }

func pathIsConfig(p string, checkParent bool) bool {
	if checkParent {
		p = path.Dir(p)
	}
	return p == persistentConfig || p == runtimeConfig
}

func pathIsRuntime(p string, checkParent bool) bool {
	if p == "/run" || strings.HasPrefix(p, "/run/") {
		return true
	}
	if checkParent {
		p = path.Dir(p)
	}
	switch p {
	case runtimeConfig, generatorDir, generatorEarly, generatorLate, transientDir, runtimeControl:
		return true
	}
	return false
}

// nullOrEmpty is null_or_empty: an empty regular file or a device.
func nullOrEmpty(n Node) bool {
	return n.Kind == File && n.Size <= 0 || n.Kind == Other
}

// symlinksEquivalent is chroot_unit_symlinks_equivalent.
func (s *Systemctl) symlinksEquivalent(src, a, b string) bool {
	// Joined as path_join joins, without resolving "..".
	dir := path.Dir(src)
	abs := func(t string) string {
		if path.IsAbs(t) {
			return t
		}
		return dir + "/" + t
	}
	a, b = abs(a), abs(b)
	if a == b || s.sameFile(a, b) {
		return true
	}
	return basename(a) == basename(b) && underSearchPath(a) && underSearchPath(b)
}

// sameFile is path_equal_or_files_same: both resolve to one node.
func (s *Systemctl) sameFile(a, b string) bool {
	ra, na, _, ea := s.fs.walk(a, false, false)
	rb, nb, _, eb := s.fs.walk(b, false, false)
	return ea == 0 && eb == 0 && na != nil && nb != nil && ra == rb
}

// createSymlink is create_symlink (old is already relative to the root).
func (s *Systemctl) createSymlink(old, newPath string, force bool, origin string) int {
	s.mkdirParents(newPath)
	if e := s.fs.Symlink(old, newPath); e == 0 {
		return max(s.change(ChangeSymlink, newPath, old, origin), 1)
	} else if e != -eEXIST {
		return s.change(e, newPath, "", origin)
	}
	dest, e := s.fs.Readlink(newPath)
	if e < 0 {
		if e == -eINVAL {
			e = -eEXIST
		}
		return s.change(e, newPath, "", origin)
	}
	if s.symlinksEquivalent(newPath, dest, old) {
		s.fs.Claim(newPath)
		return 1
	}
	if !force {
		return s.change(-eEXIST, newPath, dest, origin)
	}
	s.fs.Unlink(newPath)
	s.fs.Symlink(old, newPath)
	s.change(ChangeUnlink, newPath, "", origin)
	s.change(ChangeSymlink, newPath, old, origin)
	return 1
}

// mkdirParents is mkdir_parents_label(p, 0755).
func (s *Systemctl) mkdirParents(p string) {
	s.fs.MkdirAll(path.Dir(p))
}

// rmdirParents is rmdir_parents(p, stop): removes the empty directories
// above p, up to but not including stop.
func (s *Systemctl) rmdirParents(p, stop string) {
	for d := path.Dir(p); d != stop && strings.HasPrefix(d, stop+"/"); d = path.Dir(d) {
		if s.fs.Rmdir(d) < 0 {
			return
		}
	}
}

// Reads reports whether p lies where systemctl reads unit files, drop-ins
// or preset files: a caller refuses what it cannot read there (a fifo
// systemd would block on) before systemctl treats it as anything.
func Reads(p string) bool {
	if underSearchPath(p) {
		return true
	}
	for _, d := range presetDirs {
		if p == d || strings.HasPrefix(p, d+"/") {
			return true
		}
	}
	return false
}
