package buildah

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"sync"
)

// logTail is how much of buildah's output a build error carries.
const logTail = 4 << 10

// buildLog is where buildah's output goes: the caller's writer, or a
// buffer of the output's end for the error of a failed build.
type buildLog struct {
	mu   sync.Mutex
	w    io.Writer
	tail []byte
}

func logFor(w io.Writer) *buildLog { return &buildLog{w: w} }

func (l *buildLog) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.w != nil {
		return l.w.Write(p)
	}
	l.tail = append(l.tail, p...)
	if len(l.tail) > 2*logTail {
		l.tail = append([]byte(nil), l.tail[len(l.tail)-logTail:]...)
	}
	return len(p), nil
}

// wrap adds the end of the kept output to err.
func (l *buildLog) wrap(err error) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	tail := l.tail
	if len(tail) > logTail {
		tail = tail[len(tail)-logTail:]
		if i := bytes.IndexByte(tail, '\n'); i >= 0 {
			tail = tail[i+1:]
		}
	}
	out := strings.TrimSpace(string(tail))
	if out == "" {
		return err
	}
	return fmt.Errorf("%w\nbuildah output (end):\n%s", err, out)
}
