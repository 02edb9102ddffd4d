package baseindex

import (
	"strings"

	"github.com/mcbake/mcbake/fstree"
)

// Limits on the contents an index keeps (see docs/limits.md).
const (
	// maxUnitSize is the size above which a unit file's content is not kept.
	maxUnitSize = 64 << 10
	// maxKeptSize bounds the other kept files (passwd, group, presets):
	// anything larger is not a real one, and would cost memory. It is what
	// a rendering reads of such a file from a directory tree.
	maxKeptSize = fstree.MaxReadFile
	// maxKeptTotal bounds the kept contents of one layer, and of the
	// merged index: a real OS image keeps about 1 MiB (some hundred unit
	// files, a few presets, passwd and group).
	maxKeptTotal = 16 << 20
)

// keptBudget counts kept contents against maxKeptTotal; scope says whose
// they are, for the error.
type keptBudget struct {
	scope string
	n     int64
}

// take counts size more bytes kept at p, refusing them past the limit
// (before they are read).
func (b *keptBudget) take(p string, size int64) error {
	if b.n += size; b.n > maxKeptTotal {
		return limitf("the unit files, presets, passwd and group files %s pass %d MiB at %s: not a real OS image", b.scope, maxKeptTotal>>20, quoteName(p))
	}
	return nil
}

// release uncounts size bytes no longer kept.
func (b *keptBudget) release(size int64) { b.n -= size }

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

// unitDirs are the systemd unit directories; the files directly in them,
// and those directly in their drop-in directories (NAME.d: systemctl
// enable reads a unit's drop-ins for [Install]; docs/design.md, "Indexing
// a base"), are kept if they are at most maxUnitSize.
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
	return false, limitf("%s is %d bytes, more than the %d MiB mcbake reads of it", quoteName(p), size, limit>>20)
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
		if len(p) > len(d) && strings.HasPrefix(p, d) && unitOrDropin(p[len(d):]) {
			return maxUnitSize, true
		}
	}
	return 0, false
}

// unitOrDropin reports whether rel, a path in a unit directory, is a file
// directly in it (a unit) or directly in one of its NAME.d directories (a
// drop-in).
func unitOrDropin(rel string) bool {
	dir, name, nested := strings.Cut(rel, "/")
	if !nested {
		return true
	}
	return strings.HasSuffix(dir, ".d") && len(dir) > len(".d") && name != "" && !strings.Contains(name, "/")
}
