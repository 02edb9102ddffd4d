package verify

import (
	"io/fs"

	"github.com/mcbake/mcbake/manifest"
)

// rhcosLinks are the top-level symlinks into /var of every RHCOS (and
// Fedora CoreOS) image (docs/design.md, "/usr, /var and the RHCOS symlinks"), with their targets as RHCOS has
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

// rhcosRoot is the fstree.Tree used without --base: an image that has
// nothing but RHCOS's symlinks into /var, so that paths are classified as
// they would be on RHCOS. No file exists in it and no owner name resolves.
type rhcosRoot struct{}

func (rhcosRoot) Lstat(p string) (manifest.Entry, bool, error) {
	if t, ok := rhcosLinks[p]; ok {
		return manifest.Entry{Path: p, Type: manifest.Symlink, Mode: 0o777, Target: t}, true, nil
	}
	return manifest.Entry{}, false, nil
}

func (rhcosRoot) ReadFile(p string) ([]byte, error) {
	return nil, &fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}
}

func (rhcosRoot) ReadDir(string) ([]string, error) { return nil, nil }
