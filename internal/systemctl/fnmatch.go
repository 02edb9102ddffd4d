package systemctl

import "strings"

// fnmatch is fnmatch(3) with FNM_NOESCAPE and no other flag, on bytes
// (unit names are ASCII): '*' and '?' match any byte, '/' and a leading
// '.' included; brackets take '!' or '^' for negation, ranges and POSIX
// classes; an unterminated bracket is a literal '['.
func fnmatch(pattern, name string) bool {
	// Greedy matching with one backtrack point, the last '*': linear in
	// practice, and never exponential.
	p, n := 0, 0
	star, mark := -1, 0
	for n < len(name) {
		if p < len(pattern) {
			switch c := pattern[p]; c {
			case '*':
				star, mark = p, n
				p++
				continue
			case '?':
				p, n = p+1, n+1
				continue
			case '[':
				if ok, l, valid := matchBracket(pattern[p:], name[n]); valid {
					if ok {
						p, n = p+l, n+1
						continue
					}
					break
				}
				fallthrough
			default:
				if c == name[n] {
					p, n = p+1, n+1
					continue
				}
			}
		}
		if star < 0 {
			return false
		}
		mark++
		p, n = star+1, mark
	}
	for p < len(pattern) && pattern[p] == '*' {
		p++
	}
	return p == len(pattern)
}

var classes = map[string]func(byte) bool{
	"alnum":  func(c byte) bool { return isAlpha(c) || isDigit(c) },
	"alpha":  isAlpha,
	"blank":  func(c byte) bool { return c == ' ' || c == '\t' },
	"cntrl":  func(c byte) bool { return c < 0x20 || c == 0x7f },
	"digit":  isDigit,
	"graph":  func(c byte) bool { return c > 0x20 && c < 0x7f },
	"lower":  func(c byte) bool { return c >= 'a' && c <= 'z' },
	"print":  func(c byte) bool { return c >= 0x20 && c < 0x7f },
	"punct":  func(c byte) bool { return c > 0x20 && c < 0x7f && !isAlpha(c) && !isDigit(c) },
	"space":  func(c byte) bool { return strings.IndexByte(" \t\n\r\v\f", c) >= 0 },
	"upper":  func(c byte) bool { return c >= 'A' && c <= 'Z' },
	"xdigit": func(c byte) bool { return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F' },
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// matchBracket matches c against the bracket expression at the start of
// p; n is the expression's length, valid false when it is unterminated.
func matchBracket(p string, c byte) (ok bool, n int, valid bool) {
	i := 1
	negate := false
	if i < len(p) && (p[i] == '!' || p[i] == '^') {
		negate, i = true, i+1
	}
	matched := false
	for first := true; i < len(p); first = false {
		if p[i] == ']' && !first {
			return matched != negate, i + 1, true
		}
		if p[i] == '[' && i+1 < len(p) && p[i+1] == ':' {
			if end := strings.Index(p[i+2:], ":]"); end >= 0 {
				if f, known := classes[p[i+2:i+2+end]]; known {
					matched = matched || f(c)
					i += end + 4
					continue
				}
				return false, 0, false
			}
		}
		lo := p[i]
		if i+2 < len(p) && p[i+1] == '-' && p[i+2] != ']' {
			matched = matched || lo <= c && c <= p[i+2]
			i += 3
			continue
		}
		matched = matched || lo == c
		i++
	}
	return false, 0, false
}
