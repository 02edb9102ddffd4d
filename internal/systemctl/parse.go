package systemctl

import (
	"fmt"
	"strings"
	"unicode/utf8"
)

const whitespace = " \t\n\r"

// longLineMax is systemd's LONG_LINE_MAX.
const longLineMax = 1 << 20

// extractWord is extract_first_word with whitespace separators: the first
// word of *p and the rest (more false: nothing is left, as when systemd
// sets *p to NULL). unquote and retainEscape are EXTRACT_UNQUOTE and
// EXTRACT_RETAIN_ESCAPE. An unbalanced quote or a trailing backslash is
// -EINVAL.
func extractWord(s string, unquote, retainEscape bool) (word string, found bool, rest string, more bool, r int) {
	i := 0
	for i < len(s) && strings.IndexByte(whitespace, s[i]) >= 0 {
		i++
	}
	if i == len(s) {
		return "", false, "", false, 0
	}
	var b strings.Builder
	var quote byte
	for ; ; i++ {
		if i == len(s) {
			if quote != 0 {
				return "", false, "", false, -eINVAL
			}
			return b.String(), true, "", false, 0
		}
		c := s[i]
		switch {
		case quote != 0:
			switch {
			case c == quote:
				quote = 0
				if !unquote {
					b.WriteByte(c)
				}
			case c == '\\' && !retainEscape:
				if i+1 == len(s) {
					return "", false, "", false, -eINVAL
				}
				i++
				b.WriteByte(s[i])
			default:
				b.WriteByte(c)
			}
		case (c == '\'' || c == '"') && unquote:
			quote = c
		case c == '\\' && !retainEscape:
			if i+1 == len(s) {
				return "", false, "", false, -eINVAL
			}
			i++
			b.WriteByte(s[i])
		case strings.IndexByte(whitespace, c) >= 0:
			for i < len(s) && strings.IndexByte(whitespace, s[i]) >= 0 {
				i++
			}
			if i == len(s) {
				return b.String(), true, "", false, 0
			}
			return b.String(), true, s[i:], true, 0
		default:
			b.WriteByte(c)
		}
	}
}

// installParser holds what config_parse needs for one unit file or
// drop-in: the install info it fills and the context Also= adds to.
type installParser struct {
	s    *Systemctl
	ctx  *context
	info *info
}

// parse is config_parse with systemd's unit-file sections for
// install_info: only [Install] is read; a negative return is a fatal
// parse error.
func (p *installParser) parse(content []byte) int {
	var section string
	inSection, bomSeen := false, false
	var continuation *string
	for _, raw := range readLines(content) {
		if len(raw) > longLineMax {
			return -eNOBUFS
		}
		l := strings.TrimLeft(raw, whitespace)
		if l != "" && strings.IndexByte("#;", l[0]) >= 0 {
			continue
		}
		l = raw
		if !bomSeen && strings.HasPrefix(l, "\ufeff") {
			l, bomSeen = l[len("\ufeff"):], true
		}
		var cur string
		if continuation != nil {
			if len(*continuation)+len(l) > longLineMax {
				return -eNOBUFS
			}
			cur = *continuation + l
		} else {
			cur = l
		}
		if endsEscaped(cur) {
			cur = cur[:len(cur)-1] + " "
			continuation = &cur
			continue
		}
		if r := p.line(cur, &section, &inSection); r < 0 {
			return r
		}
		continuation = nil
	}
	if continuation != nil {
		if r := p.line(*continuation, &section, &inSection); r < 0 {
			return r
		}
	}
	return 0
}

// readLines splits content as read_line does: a line ends at "\n",
// "\r\n", "\r" or a NUL.
func readLines(content []byte) []string {
	var out []string
	s := string(content)
	for len(s) > 0 {
		i := strings.IndexAny(s, "\n\r\x00")
		if i < 0 {
			out = append(out, s)
			break
		}
		out = append(out, s[:i])
		if s[i] == '\r' && i+1 < len(s) && s[i+1] == '\n' {
			i++
		}
		s = s[i+1:]
	}
	return out
}

func endsEscaped(s string) bool {
	escaped := false
	for i := 0; i < len(s); i++ {
		if escaped {
			escaped = false
		} else if s[i] == '\\' {
			escaped = true
		}
	}
	return escaped
}

// line is parse_line.
func (p *installParser) line(l string, section *string, inSection *bool) int {
	l = strings.Trim(l, whitespace)
	if l == "" {
		return 0
	}
	if !utf8Valid(l) {
		return -eINVAL
	}
	if l[0] == '[' {
		if l[len(l)-1] != ']' || len(l) < 2 {
			return -eBADMSG
		}
		n := l[1 : len(l)-1]
		if !stringSafe(n) {
			return -eBADMSG
		}
		*section, *inSection = n, n == "Install"
		return 0
	}
	if !*inSection {
		return 0
	}
	e := strings.IndexByte(l, '=')
	if e <= 0 {
		return 0
	}
	return p.assign(strings.Trim(l[:e], whitespace), strings.Trim(l[e+1:], whitespace))
}

// stringSafe is string_is_safe.
func stringSafe(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c > 0 && c < ' ' || c == '"' || c == '\'' || c == '\\' || c == 0x7f {
			return false
		}
	}
	return true
}

// utf8Valid is utf8_is_valid: Go's check plus systemd's refusal of
// noncharacters.
func utf8Valid(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r >= 0xFDD0 && r <= 0xFDEF || r&0xFFFE == 0xFFFE {
			return false
		}
	}
	return true
}

// assign is the [Install] table of unit_file_load.
func (p *installParser) assign(key, value string) int {
	i := p.info
	switch key {
	case "Alias":
		if !typeMayAlias(unitType(i.name)) {
			return 0
		}
		i.aliases = parseStrv(i.aliases, value)
	case "WantedBy":
		i.wantedBy = parseStrv(i.wantedBy, value)
	case "RequiredBy":
		i.requiredBy = parseStrv(i.requiredBy, value)
	case "DefaultInstance":
		return p.defaultInstance(value)
	case "Also":
		return p.also(value)
	}
	return 0
}

// parseStrv is config_parse_strv: an empty value resets the list; a word
// that does not parse ends the assignment, keeping the words before it.
func parseStrv(list []string, value string) []string {
	if value == "" {
		return nil
	}
	for rest, more := value, true; more; {
		var w string
		var found bool
		var r int
		w, found, rest, more, r = extractWord(rest, true, true)
		if r < 0 || !found {
			break
		}
		list = append(list, w)
	}
	return list
}

// also is config_parse_also.
func (p *installParser) also(value string) int {
	for rest, more := value, true; more; {
		w, found, next, m, r := extractWord(rest, false, false)
		if r < 0 {
			return r
		}
		if !found {
			break
		}
		rest, more = next, m
		printed, r := p.s.printf(p.info, w)
		if r < 0 {
			return r
		}
		if _, r := p.ctx.add(printed, "", true, p.info.origin); r < 0 {
			return r
		}
		p.info.also = append(p.info.also, printed)
	}
	return 0
}

// defaultInstance is config_parse_default_instance.
func (p *installParser) defaultInstance(value string) int {
	switch {
	case nameValid(p.info.name, nameInstance):
		return 0
	case !nameValid(p.info.name, nameTemplate):
		return 0
	}
	printed, r := p.s.printf(p.info, value)
	if r < 0 {
		return r
	}
	if printed != "" && !instanceValid(printed) {
		return -eINVAL
	}
	p.info.defaultInstance = printed
	return 0
}

// HasInstall reports whether the [Install] section of the unit file
// content (of the unit name) has WantedBy=, RequiredBy=, Alias= or
// Also=; a file systemd cannot parse is an error.
func HasInstall(name string, content []byte) (bool, error) {
	s := New(NewFS(emptyBase{}))
	i := &info{name: name, origin: name}
	if r := (&installParser{s: s, ctx: newContext(), info: i}).parse(content); r < 0 && r != -eNODE {
		return false, fmt.Errorf("parsing %s: %s", name, errnoString(r))
	}
	return i.hasRules() || len(i.also) > 0, nil
}

type emptyBase struct{}

func (emptyBase) Lstat(string) (Node, bool, error) { return Node{}, false, nil }
func (emptyBase) ReadFile(string) ([]byte, error)  { return nil, nil }
func (emptyBase) ReadDir(string) ([]string, error) { return nil, nil }
