package systemctl

import (
	"path"
	"strings"
)

// verifyAlias is unit_file_verify_alias: the alias name to create (the
// destination with the instance propagated), or a negative errno (-ELOOP:
// an alias to itself, ignored).
func (s *Systemctl) verifyAlias(i *info, dst string) (string, int) {
	if slash := strings.LastIndexByte(dst, '/'); slash >= 0 {
		// The legacy form of Alias= making .wants and .requires links.
		alias, dir := dst[slash+1:], dst[:slash]
		unit, ok := strings.CutSuffix(dir, ".wants")
		if !ok {
			unit, ok = strings.CutSuffix(dir, ".requires")
		}
		if !ok {
			return "", s.change(-eXDEV, dst, "", i.origin)
		}
		typ := classify(unit)
		if typ == 0 {
			return "", s.change(-eXDEV, dst, "", i.origin)
		}
		if !symlinkNameCompatible(alias, i.name, typ == nameTemplate) {
			return "", s.change(-eXDEV, dst, i.name, i.origin)
		}
		return dst, 0
	}
	updated := dst
	if nameValid(dst, nameTemplate) {
		inst, typ := instanceOf(i.name)
		if typ == 0 {
			return "", s.change(-eUCLEAN, i.name, "", i.origin)
		}
		if typ == nameInstance {
			u, ok := replaceInstance(dst, inst)
			if !ok {
				return "", -eINVAL
			}
			updated = u
		}
	}
	switch r := validateAlias(updated, i.name); {
	case r == -eLOOP:
		return "", r
	case r == -eINVAL:
		return "", s.change(-eXDEV, updated, i.name, i.origin)
	case r < 0:
		return "", s.change(r, updated, i.name, i.origin)
	}
	return updated, 0
}

// symlinkAlias is install_info_symlink_alias.
func (s *Systemctl) symlinkAlias(i *info, force bool) int {
	r := 0
	for _, a := range i.aliases {
		dst, q := s.printf(i, a)
		if q < 0 {
			s.change(q, a, "", i.origin)
			if r >= 0 {
				r = q
			}
			continue
		}
		dst, q = s.verifyAlias(i, dst)
		if q == -eLOOP {
			continue
		}
		if q < 0 {
			if r >= 0 {
				r = q
			}
			continue
		}
		q = s.createSymlink(i.path, path.Join(ConfigPath, dst), force, i.origin)
		if r >= 0 {
			r = q
		}
	}
	return r
}

// symlinkWants is install_info_symlink_wants for WantedBy= (suffix
// ".wants/") or RequiredBy= (".requires/").
func (s *Systemctl) symlinkWants(i *info, list []string, suffix string, ignoreAux bool) int {
	if len(list) == 0 {
		return 0
	}
	validDst := nameAny
	var n string
	switch {
	case nameValid(i.name, namePlain|nameInstance):
		n = i.name
	case i.defaultInstance != "":
		name, ok := replaceInstance(i.name, i.defaultInstance)
		if !ok {
			return -eINVAL
		}
		inst := &info{name: name, origin: i.origin}
		if r := s.search(nil, inst, searchFollowConfigSymlinks); r < 0 {
			return r
		}
		if inst.mode == modeMasked {
			return s.change(-eRFKILL, inst.path, "", i.origin)
		}
		n = inst.name
	default:
		validDst = nameInstance | nameTemplate
		n = i.name
	}
	r := 0
	for _, w := range list {
		dst, q := s.printf(i, w)
		if q < 0 {
			s.change(q, w, "", i.origin)
			if r >= 0 {
				r = q
			}
			continue
		}
		if !nameValid(dst, validDst) {
			if ignoreAux {
				continue
			}
			if nameValid(dst, nameAny) {
				q = s.change(-eIDRM, dst, n, i.origin)
			} else {
				q = s.change(-eUCLEAN, dst, "", i.origin)
			}
			if r >= 0 {
				r = q
			}
			continue
		}
		q = s.createSymlink(i.path, ConfigPath+"/"+dst+suffix+n, true, i.origin)
		if q < 0 && r >= 0 || r == 0 {
			r = q
		}
		if !s.exists(dst) {
			s.change(ChangeDestinationNotPresent, dst, i.path, i.origin)
		}
	}
	return r
}

// exists is unit_file_exists.
func (s *Systemctl) exists(name string) bool {
	saved := s.current
	s.current = nil
	defer func() { s.current = saved }()
	_, r := s.discover(newContext(), name, 0, "")
	return r != -eNOENT
}

// symlinkLink is install_info_symlink_link: a unit file outside the
// search path is linked into the config path.
func (s *Systemctl) symlinkLink(i *info, force bool) int {
	if inSearchPath(i.path) {
		return 0
	}
	return s.createSymlink(i.path, path.Join(ConfigPath, i.name), force, i.origin)
}

// apply is install_info_apply.
func (s *Systemctl) apply(i *info, force, ignoreAux bool) int {
	if i.mode != modeRegular {
		return 0
	}
	s.tagFor(i.origin)
	if r := s.symlinkLink(i, force); r < 0 {
		return r
	}
	r := s.symlinkAlias(i, force)
	if q := s.symlinkWants(i, i.wantedBy, ".wants/", ignoreAux); r == 0 {
		r = q
	}
	if q := s.symlinkWants(i, i.requiredBy, ".requires/", ignoreAux); r == 0 {
		r = q
	}
	return r
}

// contextApply is install_context_apply.
func (s *Systemctl) contextApply(ctx *context, force, ignoreAux bool, flags int) int {
	r := 0
	for i := ctx.next(); i != nil; i = ctx.next() {
		if _, q := s.traverse(ctx, i, flags); q < 0 {
			if i.auxiliary {
				s.change(ChangeAuxiliaryFailed, i.name, "", i.origin)
				continue
			}
			return s.change(q, i.name, "", i.origin)
		}
		if i.mode == modeMasked {
			s.change(ChangeIsMasked, i.path, "", i.origin)
			if r >= 0 {
				r++
			}
			continue
		}
		if i.mode != modeRegular {
			continue
		}
		q := s.apply(i, force, ignoreAux)
		if r >= 0 {
			if q < 0 {
				r = q
			} else {
				r += q
			}
		}
	}
	return r
}

// marks is the set of names and paths whose symlinks disable removes,
// each with the name given to systemctl it serves.
type marks map[string]string

// markForRemoval is install_context_mark_for_removal.
func (s *Systemctl) markForRemoval(ctx *context, m marks) int {
	for i := ctx.next(); i != nil; i = ctx.next() {
		_, r := s.traverse(ctx, i, searchLoad|searchFollowConfigSymlinks)
		switch {
		case r == -eNOLINK:
			s.change(ChangeIsDangling, orName(i), "", i.origin)
		case r == -eNOENT:
			if !i.auxiliary {
				s.change(r, orName(i), "", i.origin)
			}
		case r < 0:
			s.change(r, orName(i), "", i.origin)
		case i.mode == modeMasked:
			s.change(ChangeIsMasked, orName(i), "", i.origin)
			continue
		case i.mode != modeRegular:
			continue
		}
		if _, ok := m[i.name]; !ok {
			m[i.name] = i.origin
		}
	}
	return 0
}

func orName(i *info) string {
	if i.path != "" {
		return i.path
	}
	return i.name
}

// removeMarked is remove_marked_symlinks on the config path: every
// symlink there (at any depth) named like a marked unit (or its
// template), or resolving to a marked path or name, goes, and then every
// symlink to it, until nothing more matches. Paths resolve as on a
// running node (no --root): a symlink to a removed alias matches by path.
func (s *Systemctl) removeMarked(m marks) int {
	if len(m) == 0 {
		return 0
	}
	if _, e := s.fs.Stat(ConfigPath); e < 0 {
		return 0
	}
	r := 0
	for restart := true; restart; {
		restart = false
		if q := s.removeMarkedIn(m, ConfigPath, &restart); q < 0 && r == 0 {
			r = q
		}
	}
	return r
}

func (s *Systemctl) removeMarkedIn(m marks, dir string, restart *bool) int {
	ents, e := s.fs.ReadDir(dir)
	if e < 0 {
		if e == -eNOENT {
			return 0
		}
		return e
	}
	r := 0
	for _, ent := range ents {
		p := path.Join(dir, ent.Name)
		switch ent.Kind {
		case Dir:
			if q := s.removeMarkedIn(m, p, restart); q < 0 && r == 0 {
				r = q
			}
		case Symlink:
			if !nameValid(ent.Name, nameAny) {
				continue
			}
			origin, found := m[ent.Name]
			if !found {
				if t, ok := templateOf(ent.Name); ok {
					origin, found = m[t]
				}
			}
			if !found {
				dest, _, _, q := s.fs.walk(p, false, true)
				if q == -eNOENT {
					continue
				}
				if q < 0 {
					s.change(q, p, "", "")
					if r == 0 {
						r = q
					}
					continue
				}
				if origin, found = m[dest]; !found {
					origin, found = m[basename(dest)]
				}
			}
			if !found {
				continue
			}
			s.tagFor(origin)
			if q := s.fs.Unlink(p); q < 0 && q != -eNOENT {
				if r == 0 {
					r = q
				}
				s.change(q, p, "", origin)
				continue
			}
			s.rmdirParents(p, ConfigPath)
			s.change(ChangeUnlink, p, "", origin)
			if _, ok := m[p]; !ok {
				m[p] = origin
				*restart = true
			}
		}
	}
	return r
}
