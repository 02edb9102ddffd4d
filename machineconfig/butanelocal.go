package machineconfig

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	butaneutil "github.com/coreos/butane/base/util"
	"golang.org/x/sys/unix"
	"gopkg.in/yaml.v3"
)

// butaneLocals checks the local files a Butane config names before Butane
// reads them: Butane reads each whole (os.ReadFile) and every file of a
// tree, with no limit, so that a 1 GiB file next to a config, or a FIFO,
// would cost its size in memory or never end, and it follows symbolic
// links, out of the files directory too. A path with a symbolic link in
// it, a file that is not regular, and files that total more than MaxInput
// (what one input may hold), are refused at the Butane field that names
// them, with its line (name is the config's, as errors print it). References
// Butane refuses itself (outside the files directory, none for stdin) are
// left to it.
func butaneLocals(file, name string, data []byte, filesDir string) []error {
	var doc yaml.Node
	if filesDir == "" || yaml.Unmarshal(data, &doc) != nil || len(doc.Content) == 0 {
		return nil
	}
	c := localChecker{file: file, name: name, dir: filesDir}
	c.walk(doc.Content[0], nil, false)
	return c.errs
}

type localChecker struct {
	file, name, dir string
	total           int64
	over            bool // the total went over: reported once
	visits          int  // nodes walked, aliases expanded
	errs            []error
}

// maxVisits bounds the walk of a config whose aliases expand to more
// nodes than that (a YAML alias bomb): Butane's parser refuses such a
// config itself (excessive aliasing) before it reads any file.
const maxVisits = 1 << 20

// walk visits n, at Butane field path p; tree says n is an entry of
// storage.trees, whose local is a directory. An alias is walked where it
// is used, as Butane's parser expands it: a file it names is read once
// per use.
func (c *localChecker) walk(n *yaml.Node, p []string, tree bool) {
	if c.visits++; c.visits > maxVisits {
		return
	}
	switch n.Kind {
	case yaml.AliasNode:
		if n.Alias != nil {
			c.walk(n.Alias, p, tree)
		}
	case yaml.SequenceNode:
		inTrees := len(p) == 2 && p[0] == "storage" && p[1] == "trees"
		for i, item := range n.Content {
			c.walk(item, append(p[:len(p):len(p)], fmt.Sprintf("[%d]", i)), inTrees)
		}
	case yaml.MappingNode:
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i].Value, n.Content[i+1]
			if v.Kind == yaml.AliasNode && v.Alias != nil && v.Alias.Kind == yaml.ScalarNode {
				v = v.Alias // local: *name
			}
			field := append(p[:len(p):len(p)], k)
			switch {
			case k == "local" && v.Kind == yaml.ScalarNode && tree:
				c.tree(field, v)
			case (k == "local" || k == "contents_local") && v.Kind == yaml.ScalarNode:
				c.local(field, v)
			case k == "ssh_authorized_keys_local" && v.Kind == yaml.SequenceNode:
				for j, f := range v.Content {
					if f.Kind == yaml.ScalarNode {
						c.local(append(field[:len(field):len(field)], fmt.Sprintf("[%d]", j)), f)
					}
				}
			default:
				c.walk(v, field, false)
			}
		}
	}
}

// resolve is where Butane reads the local path v, "" when Butane refuses
// it itself (it leaves the files directory, by Butane's own check).
func (c *localChecker) resolve(v string) string {
	p := filepath.Join(c.dir, filepath.FromSlash(v))
	if butaneutil.EnsurePathWithinFilesDir(p, c.dir) != nil {
		return ""
	}
	return p
}

func (c *localChecker) local(field []string, v *yaml.Node) {
	fi := c.stat(field, v)
	switch {
	case fi == nil:
		return
	case !fi.Mode().IsRegular():
		c.fail(field, v, fmt.Sprintf("local file %s is not a regular file (%s)", v.Value, fi.Mode().Type()))
	default:
		c.add(field, v, v.Value, fi.Size())
	}
}

func (c *localChecker) tree(field []string, v *yaml.Node) {
	if c.stat(field, v) == nil {
		return
	}
	// Inside a tree Butane follows no link: it makes a link entry of each.
	_ = filepath.WalkDir(c.resolve(v.Value), func(q string, d fs.DirEntry, err error) error {
		if err != nil || !d.Type().IsRegular() {
			return nil // Butane reports errors, and reads only regular files
		}
		fi, err := d.Info()
		if err != nil {
			return nil
		}
		rel, _ := filepath.Rel(c.dir, q)
		if !c.add(field, v, filepath.ToSlash(rel), fi.Size()) {
			return filepath.SkipAll
		}
		return nil
	})
}

// stat returns what the local path v names, looked up beneath the files
// directory without following a symbolic link anywhere in the path
// (openat2 with RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS). Butane itself
// follows links: one to /etc/shadow, or to a CI runner's secrets, would be
// read and baked into the image (docs/design.md, Butane). A path
// with a link in it is refused at its field; nil is returned then, and
// when the path is one Butane reports itself (missing, outside the
// directory).
func (c *localChecker) stat(field []string, v *yaml.Node) fs.FileInfo {
	p := c.resolve(v.Value)
	if p == "" {
		return nil
	}
	rel, err := filepath.Rel(c.dir, p)
	if err != nil {
		return nil
	}
	dfd, err := unix.Open(c.dir, unix.O_PATH|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil // Butane reports it
	}
	defer unix.Close(dfd)
	how := unix.OpenHow{Flags: unix.O_PATH | unix.O_CLOEXEC, Resolve: unix.RESOLVE_BENEATH | unix.RESOLVE_NO_SYMLINKS | unix.RESOLVE_NO_MAGICLINKS}
	fd, err := unix.Openat2(dfd, rel, &how)
	for try := 0; errors.Is(err, unix.EAGAIN) && try < 8; try++ { // a rename raced with the lookup
		fd, err = unix.Openat2(dfd, rel, &how)
	}
	switch {
	case errors.Is(err, unix.ELOOP):
		c.fail(field, v, fmt.Sprintf("local file %s is or goes through a symbolic link: local files are read without following links", v.Value))
		return nil
	case err != nil:
		return nil // Butane reports it
	}
	f := os.NewFile(uintptr(fd), p)
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil
	}
	return fi
}

// add counts a local file of size bytes; false once the total is over.
func (c *localChecker) add(field []string, v *yaml.Node, name string, size int64) bool {
	if c.over {
		return false
	}
	if c.total += size; c.total <= MaxInput {
		return true
	}
	c.over = true
	what := fmt.Sprintf("local file %s (%d bytes)", name, size)
	if size <= MaxInput {
		what += fmt.Sprintf(" makes the local files more than %d MiB together", MaxInput>>20)
	} else {
		what += fmt.Sprintf(" is larger than %d MiB", MaxInput>>20)
	}
	c.fail(field, v, what+", as much as one input may hold")
	return false
}

func (c *localChecker) fail(field []string, v *yaml.Node, msg string) {
	c.errs = append(c.errs, &FieldError{File: c.file, MachineConfig: c.name, Field: strings.ReplaceAll(strings.Join(field, "."), ".[", "["),
		Reason: ReasonInvalid, Msg: fmt.Sprintf("Butane: line %d, column %d: %s", v.Line, v.Column, msg)})
}
