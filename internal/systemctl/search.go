package systemctl

import (
	"path"
	"sort"
	"strings"
)

// load is unit_file_load.
func (s *Systemctl) load(ctx *context, i *info, p string, flags int) int {
	var n Node
	var e int
	if flags&searchDropin == 0 {
		t := unitType(i.name)
		if t == "" {
			return -eINVAL
		}
		if nameValid(i.name, nameTemplate|nameInstance) && !typeMayTemplate(t) {
			return -eINVAL
		}
		if n, e = s.fs.Lstat(p); e < 0 {
			return e
		}
		if flags&searchLoad == 0 {
			switch {
			case nullOrEmpty(n):
				i.mode = modeMasked
			case n.Kind == File:
				i.mode = modeRegular
			case n.Kind == Symlink:
				return -eLOOP
			case n.Kind == Dir:
				return -eISDIR
			default:
				return -eNOTTY
			}
			return 0
		}
		if n.Kind == Symlink { // open(O_NOFOLLOW)
			return -eLOOP
		}
	} else {
		if flags&searchLoad == 0 {
			return 0
		}
		if n, e = s.fs.Stat(p); e < 0 {
			return e
		}
	}
	if nullOrEmpty(n) {
		if flags&searchDropin == 0 {
			i.mode = modeMasked
		}
		return 0
	}
	switch n.Kind {
	case Dir:
		return -eISDIR
	case File:
	default:
		return -eBADFD
	}
	content, e := s.fs.ReadFile(p, false)
	if e < 0 {
		return e
	}
	if r := (&installParser{s: s, ctx: ctx, info: i}).parse(content); r < 0 {
		return r
	}
	if flags&searchDropin == 0 {
		i.mode = modeRegular
	}
	return len(i.aliases) + len(i.wantedBy) + len(i.requiredBy)
}

// loadOrReadlink is unit_file_load_or_readlink.
func (s *Systemctl) loadOrReadlink(ctx *context, i *info, p string, flags int) int {
	r := s.load(ctx, i, p, flags)
	if r != -eLOOP || flags&searchDropin != 0 {
		return r
	}
	target, outside, r := s.resolveSymlink(p)
	if r < 0 {
		return r
	}
	i.symlinkTarget = target
	switch masked, r := s.nullOrEmptyPath(target); {
	case r < 0 && r != -eNOENT:
		return r
	case masked:
		i.mode = modeMasked
	case outside:
		i.mode = modeLinked
	default:
		i.mode = modeAlias
	}
	return 0
}

// nullOrEmptyPath is null_or_empty_path_with_root: /dev/null by name,
// else what the path resolves to.
func (s *Systemctl) nullOrEmptyPath(p string) (bool, int) {
	if p == "/dev/null" {
		return true, 0
	}
	n, e := s.fs.Stat(p)
	if e < 0 {
		return false, e
	}
	return nullOrEmpty(n), 0
}

// resolveSymlink is unit_file_resolve_symlink with
// resolve_destination_target: the symlink's destination (intermediate
// symlinks resolved, "." and ".." gone), and whether it lies outside the
// search path (a linked unit file); an alias that does not match its
// target is an error.
func (s *Systemctl) resolveSymlink(p string) (string, bool, int) {
	target, e := s.fs.Readlink(p)
	if e < 0 {
		return "", false, e
	}
	if !path.IsAbs(target) {
		target = path.Join(path.Dir(p), target)
	}
	simplified, _, _, e := s.fs.walk(target, true, true)
	if e < 0 {
		return "", false, e
	}
	if !underSearchPath(simplified) {
		return simplified, true, 0
	}
	if r := validateAlias(p, simplified); r < 0 {
		return "", false, r
	}
	return simplified, false, 0
}

// search is unit_file_search.
func (s *Systemctl) search(ctx *context, i *info, flags int) int {
	if i.mode != modeInvalid {
		return 0
	}
	if i.path != "" {
		return s.loadOrReadlink(ctx, i, i.path, flags)
	}
	tmpl, isInst := "", false
	if nameValid(i.name, nameInstance) {
		tmpl, isInst = templateOf(i.name)
	}
	result, found := 0, false
	try := func(name string) int {
		for _, dir := range SearchPath {
			p := path.Join(dir, name)
			r := s.loadOrReadlink(ctx, i, p, flags)
			if r >= 0 {
				i.path, result, found = p, r, true
				return 0
			}
			if r != -eNOENT && r != -eNOTDIR && r != -eACCES {
				return r
			}
		}
		return 0
	}
	if r := try(i.name); r < 0 {
		return r
	}
	if !found && isInst {
		if r := try(tmpl); r < 0 {
			return r
		}
	}
	if !found {
		return -eNOENT
	}
	if i.mode == modeMasked {
		return result
	}
	dirs := dropinDirs(i.name)
	if isInst {
		dirs = append(dirs, dropinDirs(tmpl)...)
	}
	for _, f := range s.confFiles(dirs, ".conf") {
		if r := s.loadOrReadlink(ctx, i, f, flags|searchDropin); r < 0 {
			return r
		}
	}
	return result
}

func dropinDirs(name string) []string {
	var out []string
	for _, dir := range SearchPath {
		out = append(out, path.Join(dir, name+".d"))
	}
	return out
}

// confFiles is conf_files_list_strv without flags: the files named
// *suffix in dirs, the first directory winning for each name, sorted by
// name.
func (s *Systemctl) confFiles(dirs []string, suffix string) []string {
	byName := map[string]string{}
	for _, d := range dirs {
		ents, e := s.fs.ReadDir(d)
		if e < 0 {
			continue
		}
		for _, ent := range ents {
			if strings.HasSuffix(ent.Name, suffix) && byName[ent.Name] == "" {
				byName[ent.Name] = path.Join(d, ent.Name)
			}
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	out := make([]string, len(names))
	for k, n := range names {
		out[k] = byName[n]
	}
	return out
}

// follow is install_info_follow.
func (s *Systemctl) follow(ctx *context, i *info, flags int, ignoreDifferentName bool) int {
	if i.mode != modeAlias && i.mode != modeLinked || i.symlinkTarget == "" {
		return -eINVAL
	}
	if !ignoreDifferentName && basename(i.symlinkTarget) != i.name {
		return -eXDEV
	}
	i.path, i.symlinkTarget = i.symlinkTarget, ""
	i.mode = modeInvalid
	return s.loadOrReadlink(ctx, i, i.path, flags)
}

// traverse is install_info_traverse: the info the unit file of start
// leads to, following alias symlinks.
func (s *Systemctl) traverse(ctx *context, start *info, flags int) (*info, int) {
	if r := s.search(ctx, start, flags); r < 0 {
		return nil, r
	}
	i := start
	for k := 0; i.mode == modeAlias || i.mode == modeLinked; {
		if k++; k > 64 {
			return nil, -eLOOP
		}
		if flags&searchFollowConfigSymlinks == 0 && pathIsConfig(i.path, true) {
			return nil, -eLOOP
		}
		target := i.symlinkTarget
		r := s.follow(ctx, i, flags, i.mode == modeLinked)
		if r == -eXDEV && target != "" {
			bn := basename(target)
			if nameValid(i.name, nameInstance) && nameValid(bn, nameTemplate) {
				inst, _ := instanceOf(i.name)
				buf, ok := replaceInstance(bn, inst)
				if !ok {
					return nil, -eINVAL
				}
				if buf == i.name {
					i.symlinkTarget = target
					if r := s.follow(ctx, i, flags, true); r < 0 {
						return nil, r
					}
					continue
				}
				bn = buf
			}
			next, r := ctx.add(bn, "", false, i.origin)
			if r < 0 {
				return nil, r
			}
			i = next
			if r := s.search(ctx, i, flags); r < 0 {
				if r == -eNOENT {
					return nil, -eNOLINK
				}
				return nil, r
			}
			continue
		}
		if r < 0 {
			return nil, r
		}
	}
	return i, 0
}

// discover is install_info_discover for a name.
func (s *Systemctl) discover(ctx *context, name string, flags int, origin string) (*info, int) {
	i, r := ctx.add(name, "", false, origin)
	if r >= 0 {
		i, r = s.traverse(ctx, i, flags)
	}
	if r < 0 {
		s.change(r, name, "", origin)
		return nil, r
	}
	return i, 0
}

// mayProcess is install_info_may_process.
func (s *Systemctl) mayProcess(i *info) int {
	if i.mode == modeMasked {
		return s.change(-eRFKILL, i.path, "", i.origin)
	}
	if pathIsGenerator(i.path) || pathIsTransient(i.path) {
		return s.change(-eADDRNOTAVAIL, i.path, "", i.origin)
	}
	return 0
}

// discoverAndCheck is install_info_discover_and_check.
func (s *Systemctl) discoverAndCheck(ctx *context, name string, flags int, origin string) (*info, int) {
	i, r := s.discover(ctx, name, flags, origin)
	if r < 0 {
		return nil, r
	}
	return i, s.mayProcess(i)
}
