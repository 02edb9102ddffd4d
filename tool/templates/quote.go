package templates

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
)

// safe reports whether s needs no quoting in a Containerfile argument:
// no whitespace, quotes, backslashes (escapes and line continuations),
// dollars (variable expansion) or glob characters.
func safe(s string) bool {
	if s == "" {
		return false
	}
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9':
		case strings.ContainsRune("_./:@%+,=-", r):
		default:
			return false
		}
	}
	return true
}

// Word quotes s as one word of an instruction whose arguments go through
// variable expansion and quote removal (COPY, LABEL): s itself when it
// needs no quoting, else s in single quotes (inside which nothing is
// special; a single quote is written '"'"'). Line breaks cannot be
// expressed and are an error.
func Word(s string) (string, error) {
	if strings.ContainsAny(s, "\n\r") {
		return "", fmt.Errorf("%q: a line break cannot be written in a Containerfile", s)
	}
	if safe(s) {
		return s, nil
	}
	return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'", nil
}

// CopyArgs returns the source and destination of a COPY: "SRC DEST" when
// neither needs quoting, else the JSON form with each quoted by Word (the
// JSON form keeps spaces inside an argument).
func CopyArgs(src, dest string) (string, error) {
	if safe(src) && safe(dest) {
		return src + " " + dest, nil
	}
	s, err := Word(src)
	if err != nil {
		return "", err
	}
	d, err := Word(dest)
	if err != nil {
		return "", err
	}
	return jsonArray(s, d), nil
}

// ExecForm returns the JSON (exec) form of a RUN command, which runs args
// without a shell and without variable expansion.
func ExecForm(args ...string) string {
	return jsonArray(args...)
}

func jsonArray(args ...string) string {
	quoted := make([]string, len(args))
	for i, a := range args {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		// Encoding a string cannot fail.
		_ = enc.Encode(a)
		quoted[i] = strings.TrimSuffix(b.String(), "\n")
	}
	return "[" + strings.Join(quoted, ", ") + "]"
}
