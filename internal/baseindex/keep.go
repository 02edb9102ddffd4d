package baseindex

import (
	"fmt"
	"strings"
)

const (
	// maxUnitSize is the size above which a unit file's content is not kept.
	maxUnitSize = 64 << 10
	// maxKeptSize bounds the other kept files (passwd, group, presets):
	// anything larger is not a real one, and would cost memory.
	maxKeptSize = 16 << 20
)

// accountFiles are the passwd and group files owners by name resolve
// against (/usr/lib ones for nss-altfiles).
var accountFiles = map[string]bool{
	"etc/passwd":     true,
	"etc/group":      true,
	"usr/lib/passwd": true,
	"usr/lib/group":  true,
}

// presetDirs are the systemd preset directories; every file under them is
// kept.
var presetDirs = []string{
	"usr/lib/systemd/system-preset/",
	"etc/systemd/system-preset/",
}

// unitDirs are the systemd unit directories; the files directly in them
// are kept if they are at most maxUnitSize.
var unitDirs = []string{
	"usr/lib/systemd/system/",
	"etc/systemd/system/",
	"lib/systemd/system/",
}

// keptPath reports whether a regular file at p may have its content kept,
// whatever its size.
func keptPath(p string) bool {
	_, ok := keepLimit(p)
	return ok
}

// keepContent reports whether the content of a regular file at p with the
// given size is kept. A unit larger than maxUnitSize is not kept; any
// other kept file larger than maxKeptSize is an error.
func keepContent(p string, size int64) (bool, error) {
	limit, ok := keepLimit(p)
	switch {
	case !ok:
		return false, nil
	case size <= limit:
		return true, nil
	case limit == maxUnitSize:
		return false, nil
	}
	return false, fmt.Errorf("%s is %d bytes, more than the %d bytes mcbake reads of it", p, size, limit)
}

// keepLimit returns the size limit for keeping the content at p, and
// whether p is a kept path at all.
func keepLimit(p string) (int64, bool) {
	if accountFiles[p] {
		return maxKeptSize, true
	}
	for _, d := range presetDirs {
		if len(p) > len(d) && strings.HasPrefix(p, d) {
			return maxKeptSize, true
		}
	}
	for _, d := range unitDirs {
		if len(p) > len(d) && strings.HasPrefix(p, d) && !strings.Contains(p[len(d):], "/") {
			return maxUnitSize, true
		}
	}
	return 0, false
}
