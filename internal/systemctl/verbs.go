package systemctl

import "strings"

func (s *Systemctl) begin() *Result {
	s.current = &Result{}
	return s.current
}

func (s *Systemctl) end(r int) Result {
	res := *s.current
	res.R = r
	s.current = nil
	s.fs.SetTag(nil)
	return res
}

// Enable is `systemctl enable names...` (unit_file_enable).
func (s *Systemctl) Enable(names []string) Result {
	s.begin()
	ctx := newContext()
	for _, n := range names {
		if _, r := s.discoverAndCheck(ctx, n, searchLoad|searchFollowConfigSymlinks, n); r < 0 {
			return s.end(r)
		}
	}
	return s.end(s.contextApply(ctx, false, false, searchLoad))
}

// Disable is `systemctl disable names...` (unit_file_disable).
func (s *Systemctl) Disable(names []string) Result {
	s.begin()
	ctx := newContext()
	for _, n := range names {
		if !nameValid(n, nameAny) {
			return s.end(s.change(-eUCLEAN, n, "", n))
		}
		if _, r := ctx.add(n, "", false, n); r < 0 {
			return s.end(r)
		}
	}
	m := marks{}
	s.markForRemoval(ctx, m)
	return s.end(s.removeMarked(m))
}

// Preset is `systemctl preset name` in full mode (unit_file_preset).
func (s *Systemctl) Preset(name string) Result {
	s.begin()
	ps := s.loadPresets()
	plus, minus := newContext(), newContext()
	if r := s.presetPrepare(plus, minus, name, ps); r < 0 {
		return s.end(r)
	}
	m := marks{}
	s.markForRemoval(minus, m)
	r := s.removeMarked(m)
	q := s.contextApply(plus, false, true, searchLoad)
	if r >= 0 {
		if q < 0 {
			r = q
		} else {
			r += q
		}
	}
	return s.end(r)
}

// presetPrepare is preset_prepare_one.
func (s *Systemctl) presetPrepare(plus, minus *context, name string, ps *presets) int {
	if plus.find(name) != nil || minus.find(name) != nil {
		return 0
	}
	i, r := s.discover(newContext(), name, searchFollowConfigSymlinks, name)
	if r < 0 {
		return r
	}
	if i.name != name {
		return 0 // an alias
	}
	enable, instances, r := ps.query(name)
	if r < 0 {
		return r
	}
	if !enable {
		_, r = s.discover(minus, name, searchFollowConfigSymlinks, name)
		return r
	}
	if instances == nil {
		_, r = s.discoverAndCheck(plus, name, searchLoad|searchFollowConfigSymlinks, name)
		return r
	}
	for _, inst := range instances {
		if _, r := s.discoverAndCheck(plus, inst, searchLoad|searchFollowConfigSymlinks, name); r < 0 {
			return r
		}
	}
	return 0
}

// QueryPreset reports what the preset files say for name: enable (also
// when no rule matches, as systemd does) or disable.
func (s *Systemctl) QueryPreset(name string) bool {
	enable, _, _ := s.loadPresets().query(name)
	return enable
}

// State is `systemctl is-enabled name`'s answer (unit_file_get_state):
// "enabled", "disabled", "static", "masked", ...; r is negative when the
// unit cannot be found.
func (s *Systemctl) State(name string) (string, int) {
	if !nameValid(name, nameAny) {
		return "", -eINVAL
	}
	saved := s.current
	s.current = nil
	defer func() { s.current = saved }()
	ctx := newContext()
	i, r := s.discover(ctx, name, searchLoad|searchFollowConfigSymlinks, name)
	if r < 0 {
		return "", r
	}
	switch i.mode {
	case modeMasked:
		if pathIsRuntime(i.path, true) {
			return "masked-runtime", 0
		}
		return "masked", 0
	case modeRegular:
	default:
		return "", -eINVAL
	}
	switch {
	case name != basename(i.path) && !nameValid(i.name, nameInstance):
		return "alias", 0
	case pathIsGenerator(i.path):
		return "generated", 0
	case pathIsTransient(i.path):
		return "transient", 0
	}
	if st, found := s.symlinksInScope(i, true); found {
		return st, 0
	}
	if _, found := s.symlinksInScope(i, false); found {
		return "indirect", 0
	}
	switch {
	case i.hasRules():
		return "disabled", 0
	case len(i.also) > 0:
		return "indirect", 0
	}
	return "static", 0
}

// symlinksInScope is find_symlinks_in_scope.
func (s *Systemctl) symlinksInScope(i *info, matchName bool) (string, bool) {
	var sameNameConfig, sameNameRuntime, enabledRuntime, enabledAtAll, ignoreSameName bool
	for _, dir := range SearchPath {
		same := false
		if s.findSymlinks(i, matchName, ignoreSameName, dir, &same) {
			if dir == persistentConfig {
				return "enabled", true
			}
			if pathIsRuntime(dir, false) {
				enabledRuntime = true
			} else {
				enabledAtAll = true
			}
		} else if same {
			if dir == persistentConfig {
				sameNameConfig = true
			} else if pathIsRuntime(dir, false) {
				sameNameRuntime = true
			}
		}
		if !ignoreSameName && (i.path == dir || strings.HasPrefix(i.path, dir+"/")) {
			ignoreSameName = true
		}
	}
	switch {
	case enabledRuntime:
		return "enabled-runtime", true
	case enabledAtAll && nameValid(i.name, nameInstance):
		return "static", true
	case sameNameConfig:
		return "linked", true
	case sameNameRuntime:
		return "linked-runtime", true
	}
	return "", false
}

// findSymlinks is find_symlinks: the .wants and .requires directories of
// dir, then dir itself.
func (s *Systemctl) findSymlinks(i *info, matchName, ignoreSameName bool, dir string, same *bool) bool {
	ents, e := s.fs.ReadDir(dir)
	if e < 0 {
		return false
	}
	for _, ent := range ents {
		if ent.Kind != Dir {
			continue
		}
		if dot := strings.LastIndexByte(ent.Name, '.'); dot < 0 || ent.Name[dot:] != ".wants" && ent.Name[dot:] != ".requires" {
			continue
		}
		sub := dir + "/" + ent.Name
		if s.findSymlinksIn(sub, i, true, matchName, ignoreSameName, dir, same) {
			return true
		}
	}
	return s.findSymlinksIn(dir, i, false, matchName, ignoreSameName, dir, same)
}

// findSymlinksIn is find_symlinks_in_directory.
func (s *Systemctl) findSymlinksIn(dir string, i *info, ignoreDest, matchName, ignoreSameName bool, config string, same *bool) bool {
	ents, e := s.fs.ReadDir(dir)
	if e < 0 {
		return false
	}
	for _, ent := range ents {
		if ent.Kind != Symlink {
			continue
		}
		foundPath, foundDest := false, false
		if !ignoreDest {
			dest, e := s.fs.Readlink(dir + "/" + ent.Name)
			if e < 0 {
				continue
			}
			foundDest = basename(dest) == i.name
		}
		if ignoreDest || !ignoreSameName {
			foundPath = ent.Name == i.name
		}
		if !foundPath && ignoreDest {
			if t, ok := templateOf(ent.Name); ok {
				foundDest = t == i.name
			}
		}
		if foundPath && foundDest && dir+"/"+ent.Name == config+"/"+i.name {
			*same = true
			continue
		}
		if foundPath || foundDest {
			if !matchName || s.knownName(i, ent.Name) {
				return true
			}
		}
	}
	return false
}

// knownName is is_symlink_with_known_name.
func (s *Systemctl) knownName(i *info, name string) bool {
	if name == i.name {
		return true
	}
	for _, a := range i.aliases {
		if a == name {
			return true
		}
	}
	if i.defaultInstance != "" && nameValid(i.name, nameTemplate) {
		if n, ok := replaceInstance(i.name, i.defaultInstance); ok && n == name {
			return true
		}
	}
	return false
}

// ListUnitFiles is the set of names `systemctl list-unit-files` (and the
// D-Bus ListUnitFiles call) reports: every file or symlink with a valid
// unit name directly in a search path directory.
func (s *Systemctl) ListUnitFiles() map[string]bool {
	out := map[string]bool{}
	for _, dir := range SearchPath {
		ents, e := s.fs.ReadDir(dir)
		if e < 0 {
			continue
		}
		for _, ent := range ents {
			if nameValid(ent.Name, nameAny) && (ent.Kind == File || ent.Kind == Symlink) {
				out[ent.Name] = true
			}
		}
	}
	return out
}

// presetDirs are the preset directories, highest priority first.
var presetDirs = []string{
	"/etc/systemd/system-preset", "/run/systemd/system-preset",
	"/usr/local/lib/systemd/system-preset", "/usr/lib/systemd/system-preset",
}

type presetRule struct {
	pattern   string
	enable    bool
	instances []string
}

type presets struct{ rules []presetRule }

// loadPresets is read_presets.
func (s *Systemctl) loadPresets() *presets {
	if s.presets != nil {
		return s.presets
	}
	ps := &presets{}
	for _, f := range s.confFiles(presetDirs, ".preset") {
		b, e := s.fs.ReadFile(f, false)
		if e < 0 {
			continue
		}
		ps.rules = append(ps.rules, parsePresets(b)...)
	}
	s.presets = ps
	return ps
}

func parsePresets(b []byte) []presetRule {
	var rules []presetRule
	for _, l := range readLines(b) {
		l = strings.Trim(l, whitespace)
		if l == "" || strings.IndexByte("#;", l[0]) >= 0 {
			continue
		}
		if p, ok := firstWord(l, "enable"); ok {
			name, found, rest, more, r := extractWord(p, false, true)
			if r < 0 || !found {
				continue
			}
			rule := presetRule{pattern: name, enable: true}
			if more {
				if !nameValid(name, nameTemplate) {
					continue
				}
				rule.instances = strings.Fields(rest)
			}
			rules = append(rules, rule)
			continue
		}
		if p, ok := firstWord(l, "disable"); ok {
			rules = append(rules, presetRule{pattern: p})
		}
	}
	return rules
}

// firstWord is first_word: the rest of s after word and the whitespace
// following it.
func firstWord(s, word string) (string, bool) {
	rest, ok := strings.CutPrefix(s, word)
	if !ok {
		return "", false
	}
	if rest == "" {
		return rest, true
	}
	if strings.IndexByte(whitespace, rest[0]) < 0 {
		return "", false
	}
	return strings.TrimLeft(rest, whitespace), true
}

// query is query_presets: enable (with the instances a rule lists for a
// template) or not; no matching rule enables.
func (ps *presets) query(name string) (enable bool, instances []string, r int) {
	if !nameValid(name, nameAny) {
		return false, nil, -eINVAL
	}
	for _, rule := range ps.rules {
		insts, matched := rule.matchInstances(name)
		if matched || fnmatch(rule.pattern, name) {
			return rule.enable, insts, 0
		}
	}
	return true, nil, 0
}

// matchInstances is pattern_match_multiple_instances.
func (rule presetRule) matchInstances(name string) ([]string, bool) {
	if rule.instances == nil {
		return nil, false
	}
	tmpl, ok := templateOf(name)
	if !ok || tmpl != rule.pattern {
		return nil, false
	}
	if nameValid(name, nameTemplate) {
		var out []string
		for _, inst := range rule.instances {
			n, ok := replaceInstance(name, inst)
			if !ok {
				return nil, false
			}
			out = append(out, n)
		}
		return out, true
	}
	inst, _ := instanceOf(name)
	for _, i := range rule.instances {
		if i == inst {
			return nil, true
		}
	}
	return nil, false
}
