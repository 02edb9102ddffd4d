package systemctl

import (
	"strings"
)

const alphanumerical = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

// printf is install_name_printf: the specifiers systemd 252 resolves in
// [Install] (%i %j %n %N %p, the OS-release ones, %g %G %u %U, %%). Any
// other letter or digit is -EBADSLT, as in systemd. The specifiers whose
// value only the node knows (%a %b %H %l %m %q %v) are -eNODE and are
// remembered (NodeSpecifiers): an image cannot know them.
func (s *Systemctl) printf(i *info, format string) (string, int) {
	var b strings.Builder
	percent := false
	for k := 0; k < len(format); k++ {
		c := format[k]
		if !percent {
			if c == '%' {
				percent = true
			} else {
				b.WriteByte(c)
			}
		} else {
			percent = false
			if c == '%' {
				b.WriteByte('%')
			} else if v, r, known := s.specifier(i, c); known {
				if r < 0 {
					return "", r
				}
				b.WriteString(v)
			} else if strings.IndexByte(alphanumerical+"%", c) >= 0 {
				return "", -eBADSLT
			} else {
				b.WriteByte('%')
				b.WriteByte(c)
			}
		}
		if b.Len() > unitNameMax {
			return "", -eNAMETOOLONG
		}
	}
	if percent {
		b.WriteByte('%')
		if b.Len() > unitNameMax {
			return "", -eNAMETOOLONG
		}
	}
	return b.String(), 0
}

// specifier resolves one specifier letter; known is false for letters
// systemd's install table lacks.
func (s *Systemctl) specifier(i *info, c byte) (v string, r int, known bool) {
	switch c {
	case 'i':
		inst, _ := instanceOf(i.name)
		if inst == "" {
			inst = i.defaultInstance
		}
		return inst, 0, true
	case 'j':
		p, ok := prefixOf(i.name)
		if !ok {
			return "", -eINVAL, true
		}
		if d := strings.LastIndexByte(p, '-'); d >= 0 {
			p = p[d+1:]
		}
		return p, 0, true
	case 'n':
		if nameValid(i.name, nameTemplate) && i.defaultInstance != "" {
			n, ok := replaceInstance(i.name, i.defaultInstance)
			if !ok {
				return "", -eINVAL, true
			}
			return n, 0, true
		}
		return i.name, 0, true
	case 'N':
		p, ok := prefixAndInstance(i.name)
		if !ok {
			return "", -eINVAL, true
		}
		if strings.HasSuffix(p, "@") && i.defaultInstance != "" {
			p += i.defaultInstance
		}
		return p, 0, true
	case 'p':
		p, ok := prefixOf(i.name)
		if !ok {
			return "", -eINVAL, true
		}
		return p, 0, true
	case 'A', 'B', 'M', 'o', 'w', 'W':
		return s.osRelease()[osReleaseKeys[c]], 0, true
	case 'g', 'u':
		return "root", 0, true
	case 'G', 'U':
		return "0", 0, true
	case 'a', 'b', 'H', 'l', 'm', 'q', 'v':
		s.nodeSpecifiers = append(s.nodeSpecifiers, NodeSpecifier{Specifier: "%" + string(c), Unit: i.name, Origin: i.origin})
		return "", -eNODE, true
	}
	return "", 0, false
}

var osReleaseKeys = map[byte]string{
	'A': "IMAGE_VERSION", 'B': "BUILD_ID", 'M': "IMAGE_ID", 'o': "ID", 'w': "VERSION_ID", 'W': "VARIANT_ID",
}

// osRelease parses the tree's os-release as parse_os_release does: the
// first of /etc/os-release and /usr/lib/os-release that exists.
func (s *Systemctl) osRelease() map[string]string {
	if s.osrel != nil {
		return s.osrel
	}
	s.osrel = map[string]string{}
	for _, p := range []string{"/etc/os-release", "/usr/lib/os-release"} {
		b, r := s.fs.ReadFile(p, false)
		if r == -eNOENT {
			continue
		}
		if r == 0 {
			s.osrel = parseEnvFile(b)
		}
		break
	}
	return s.osrel
}

// parseEnvFile reads KEY=VALUE lines with shell-like quoting, the subset
// of systemd's env-file parser os-release files use.
func parseEnvFile(b []byte) map[string]string {
	out := map[string]string{}
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.Trim(l, whitespace)
		if l == "" || l[0] == '#' || l[0] == ';' {
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok {
			continue
		}
		out[strings.Trim(k, whitespace)] = unquoteEnv(strings.TrimLeft(v, whitespace))
	}
	return out
}

func unquoteEnv(v string) string {
	var b strings.Builder
	var quote byte
	for i := 0; i < len(v); i++ {
		c := v[i]
		switch {
		case quote == 0 && (c == '"' || c == '\''):
			quote = c
		case quote != 0 && c == quote:
			quote = 0
		case c == '\\' && quote != '\'' && i+1 < len(v):
			i++
			b.WriteByte(v[i])
		case quote == 0 && strings.IndexByte(whitespace, c) >= 0:
			return b.String()
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
