// Package fspath splits slash-separated paths for walks that resolve symlinks.
//
// A walk through a tree (fstree's trees, systemctl's FS) steps through a
// path one name at a time, following each symlink it meets, so it cannot
// clean the path lexically first: ".." must be resolved against where
// the symlinks led.
package fspath

import "strings"

// Components returns the names a walk of p steps through: its
// slash-separated components without the empty ones and ".". ".." is
// kept, for the walk to resolve.
func Components(p string) []string {
	var out []string
	for _, c := range strings.Split(p, "/") {
		if c != "" && c != "." {
			out = append(out, c)
		}
	}
	return out
}
