package lint

import (
	"io/fs"
	"path"
	"strings"

	"github.com/mcbake/mcbake/internal/manifest"
	"github.com/mcbake/mcbake/internal/render"
)

// rhcosLinks are the top-level symlinks into /var of every RHCOS (and
// Fedora CoreOS) image (DESIGN.md §2), with their targets as RHCOS has
// them.
var rhcosLinks = map[string]string{
	"/usr/local": "../var/usrlocal",
	"/opt":       "var/opt",
	"/home":      "var/home",
	"/root":      "var/roothome",
	"/srv":       "var/srv",
	"/mnt":       "var/mnt",
	"/var/run":   "../run",
}

// rhcosRoot is the render.Root used without --base: an image that has
// nothing but RHCOS's symlinks into /var, so that paths are classified as
// they would be on RHCOS. No file exists in it and no owner name resolves.
type rhcosRoot struct{}

func (rhcosRoot) Lstat(p string) (render.Node, bool) {
	if t, ok := rhcosLinks[p]; ok {
		return render.Node{Type: manifest.Symlink, Mode: 0o777, Target: t}, true
	}
	return render.Node{}, false
}

func (rhcosRoot) ReadFile(p string) ([]byte, error) {
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

func (rhcosRoot) ReadDir(string) []string { return nil }

// Resolve follows the RHCOS symlinks in p's parent directories. Their
// targets are all under /var, which has no symlinks, so one pass is enough.
func (rhcosRoot) Resolve(p string) (string, error) {
	dir := path.Dir(path.Clean(p))
	for link, target := range rhcosLinks {
		if dir == link || strings.HasPrefix(dir, link+"/") {
			dir = path.Join(path.Dir(link), target) + dir[len(link):]
			break
		}
	}
	return path.Join(dir, path.Base(p)), nil
}
