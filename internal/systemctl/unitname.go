package systemctl

import "strings"

// Name classes, as systemd's UnitNameFlags.
const (
	namePlain    = 1 << iota // foo.service
	nameInstance             // foo@bar.service
	nameTemplate             // foo@.service
	nameAny      = namePlain | nameInstance | nameTemplate
)

// unitNameMax is systemd's UNIT_NAME_MAX.
const unitNameMax = 256

var unitTypes = map[string]bool{
	"service": true, "socket": true, "target": true, "device": true, "mount": true, "automount": true,
	"swap": true, "timer": true, "path": true, "slice": true, "scope": true,
}

const validChars = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ:-_.\\"

func inCharset(s, set string) bool {
	for i := 0; i < len(s); i++ {
		if strings.IndexByte(set, s[i]) < 0 {
			return false
		}
	}
	return true
}

// nameValid is unit_name_is_valid.
func nameValid(n string, flags int) bool {
	if flags == 0 || n == "" || len(n) >= unitNameMax {
		return false
	}
	e := strings.LastIndexByte(n, '.')
	if e <= 0 || !unitTypes[n[e+1:]] {
		return false
	}
	at := -1
	for i := 0; i < e; i++ {
		if n[i] == '@' && at < 0 {
			at = i
		}
		if strings.IndexByte("@"+validChars, n[i]) < 0 {
			return false
		}
	}
	switch {
	case at == 0:
		return false
	case flags&namePlain != 0 && at < 0:
		return true
	case flags&nameInstance != 0 && at >= 0 && e > at+1:
		return true
	case flags&nameTemplate != 0 && at >= 0 && e == at+1:
		return true
	}
	return false
}

// classify is unit_name_classify: namePlain, nameInstance, nameTemplate,
// or 0 for an invalid name.
func classify(n string) int {
	if !nameValid(n, nameAny) {
		return 0
	}
	at := strings.IndexByte(n, '@')
	if at < 0 {
		return namePlain
	}
	if strings.LastIndexByte(n, '.') > at+1 {
		return nameInstance
	}
	return nameTemplate
}

// instanceOf is unit_name_to_instance: the instance ("" for a plain name
// or a template) and the class (0: invalid).
func instanceOf(n string) (string, int) {
	c := classify(n)
	if c == 0 || c == namePlain {
		return "", c
	}
	at := strings.IndexByte(n, '@')
	return n[at+1 : strings.LastIndexByte(n, '.')], c
}

// unitType is unit_name_to_type: the suffix without the dot, or "".
func unitType(n string) string {
	if !nameValid(n, nameAny) {
		return ""
	}
	return n[strings.LastIndexByte(n, '.')+1:]
}

func typeMayAlias(t string) bool {
	switch t {
	case "service", "socket", "target", "device", "timer", "path":
		return true
	}
	return false
}

func typeMayTemplate(t string) bool {
	switch t {
	case "service", "socket", "target", "timer", "path":
		return true
	}
	return false
}

// templateOf is unit_name_template: "foo@.service" for an instance or a
// template; ok false otherwise.
func templateOf(n string) (string, bool) {
	if !nameValid(n, nameInstance|nameTemplate) {
		return "", false
	}
	return n[:strings.IndexByte(n, '@')+1] + n[strings.LastIndexByte(n, '.'):], true
}

// instanceValid is unit_instance_is_valid.
func instanceValid(i string) bool { return i != "" && inCharset(i, "@"+validChars) }

// replaceInstance is unit_name_replace_instance.
func replaceInstance(n, inst string) (string, bool) {
	if !nameValid(n, nameInstance|nameTemplate) || !instanceValid(inst) {
		return "", false
	}
	s := n[:strings.IndexByte(n, '@')+1] + inst + n[strings.LastIndexByte(n, '.'):]
	return s, nameValid(s, nameInstance)
}

// prefixOf is unit_name_to_prefix.
func prefixOf(n string) (string, bool) {
	if !nameValid(n, nameAny) {
		return "", false
	}
	p := strings.IndexByte(n, '@')
	if p < 0 {
		p = strings.LastIndexByte(n, '.')
	}
	return n[:p], true
}

// prefixAndInstance is unit_name_to_prefix_and_instance: the name without
// its suffix.
func prefixAndInstance(n string) (string, bool) {
	if !nameValid(n, nameAny) {
		return "", false
	}
	return n[:strings.LastIndexByte(n, '.')], true
}

// symlinkNameCompatible is unit_symlink_name_compatible.
func symlinkNameCompatible(symlink, target string, propagate bool) bool {
	t1 := classify(symlink)
	if symlink == target && t1&(namePlain|nameInstance) != 0 {
		return true
	}
	tmpl, ok := templateOf(symlink)
	if !ok {
		return false
	}
	t2 := classify(target)
	if t1 == nameInstance && t2 == nameTemplate && tmpl == target {
		return true
	}
	return propagate && t1 == nameTemplate && t2 == nameTemplate && tmpl == target
}

// validateAlias is unit_validate_alias_symlink_or_warn: 0, or -EINVAL,
// -EXDEV, -ELOOP.
func validateAlias(filename, target string) int {
	src, dst := basename(filename), basename(target)
	srcInst, srcType := instanceOf(src)
	if srcType == 0 {
		return -eINVAL
	}
	st := unitType(src)
	if !typeMayAlias(st) || srcType != namePlain && !typeMayTemplate(st) {
		return -eINVAL
	}
	if src == dst {
		return -eLOOP
	}
	dstInst, dstType := instanceOf(dst)
	if dstType == 0 {
		return -eXDEV
	}
	if !(dstType == srcType || srcType == nameInstance && dstType == nameTemplate) {
		return -eXDEV
	}
	if dstType == nameInstance && srcInst != dstInst {
		return -eXDEV
	}
	if unitType(dst) != st {
		return -eXDEV
	}
	return 0
}

func basename(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

// ValidName reports whether systemctl takes name as it is (a unit name
// with a known type, plain, instance or template).
func ValidName(name string) bool { return nameValid(name, nameAny) }
