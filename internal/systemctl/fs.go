package systemctl

import (
	"path"
	"sort"
	"strings"

	"github.com/mcbake/mcbake/internal/fspath"
)

// Kind is the type of a node in a tree.
type Kind uint8

// Node kinds. Other is anything else (a device, a fifo); a character
// device counts as empty, as systemd's null_or_empty does for /dev/null.
const (
	Missing Kind = iota
	File
	Dir
	Symlink
	Other
)

// Node describes a path as lstat(2) would.
type Node struct {
	Kind   Kind
	Target string // Symlink
	Size   int64  // File
}

// Base is the read-only tree an FS starts from. Paths are absolute and
// clean, and their parent directories are real directories (the FS
// resolves symlinks itself). A missing path is not an error.
type Base interface {
	Lstat(path string) (Node, bool, error)
	// ReadFile returns the content of the regular file at path.
	ReadFile(path string) ([]byte, error)
	// ReadDir lists the names in the directory at path; nil when there is
	// none.
	ReadDir(path string) ([]string, error)
}

// maxFollow is how many symlinks a path may go through (the kernel's and
// chase_symlinks' limit).
const maxFollow = 40

type node struct {
	Node
	content []byte // File: nil until read or written
	loaded  bool   // content holds the file's bytes
	opaque  bool   // Dir made here: the base's children are hidden
}

// FS is a tree as systemctl sees it: the base with every change made
// through the FS on top. Paths resolve as the kernel resolves them
// chrooted at the tree's root: absolute symlink targets start again at the
// root and ".." never climbs above it. Every change is recorded with the
// FS's current tag (SetTag); Changes lists them.
type FS struct {
	base    Base
	nodes   map[string]*node           // real path -> node; nil: absent
	added   map[string]map[string]bool // real dir -> names made here
	listed  map[string][]string        // real dir -> the base's names
	touched map[string]any             // real path -> tag of its last change or claim
	order   []string                   // touched paths, first touch first
	tag     any
	record  bool
	err     error
}

// NewFS returns an FS over base. Changes are recorded once SetTag is
// called with a non-nil tag.
func NewFS(base Base) *FS {
	return &FS{base: base, nodes: map[string]*node{"/": {Node: Node{Kind: Dir}}},
		added: map[string]map[string]bool{}, listed: map[string][]string{}, touched: map[string]any{}}
}

// SetTag sets the tag later changes are recorded with; nil stops
// recording (changes are still made: seeding the tree).
func (f *FS) SetTag(tag any) { f.tag, f.record = tag, tag != nil }

// Err returns the first error the base reported; the path it concerned
// was treated as absent.
func (f *FS) Err() error { return f.err }

// get returns the node at the real path p whose parent node is parent.
func (f *FS) get(p string, parent *node) *node {
	if n, ok := f.nodes[p]; ok {
		return n
	}
	var n *node
	if !parent.opaque {
		e, ok, err := f.base.Lstat(p)
		if err != nil && f.err == nil {
			f.err = err
		}
		if ok && err == nil {
			n = &node{Node: e}
		}
	}
	// A node has /dev/null, which masks point at, whatever the image has.
	switch {
	case n == nil && p == "/dev":
		n = &node{Node: Node{Kind: Dir}, opaque: true}
	case p == "/dev/null":
		n = &node{Node: Node{Kind: Other}}
	}
	f.nodes[p] = n
	return n
}

// walk resolves p. Every symlink is followed except a final one when
// nofollow is set. A missing final component is returned with a nil node
// and its parent; a missing component before it is -ENOENT unless
// nonexistent is set (then the rest is appended as it is, as
// chase_symlinks' CHASE_NONEXISTENT does, provided it has no "..").
func (f *FS) walk(p string, nofollow, nonexistent bool) (real string, n, parent *node, errno int) {
	todo := fspath.Components(p)
	stack := []*node{f.nodes["/"]}
	// paths[i] is the path of stack[i+1]: the components walked so far.
	var paths []string
	follows := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		if c == ".." {
			if len(paths) > 0 {
				paths, stack = paths[:len(paths)-1], stack[:len(stack)-1]
			}
			continue
		}
		cur := stack[len(stack)-1]
		if cur.Kind != Dir {
			return "", nil, nil, -eNOTDIR
		}
		parent := ""
		if len(paths) > 0 {
			parent = paths[len(paths)-1]
		}
		next := parent + "/" + c
		nd := f.get(next, cur)
		if nd == nil {
			if len(todo) == 0 {
				return next, nil, cur, 0
			}
			if nonexistent && !hasDotDot(todo) {
				return path.Join(next, strings.Join(todo, "/")), nil, nil, 0
			}
			return "", nil, nil, -eNOENT
		}
		if nd.Kind == Symlink && !(nofollow && len(todo) == 0) {
			if follows++; follows >= maxFollow {
				return "", nil, nil, -eLOOP
			}
			if nd.Target == "" {
				return "", nil, nil, -eINVAL
			}
			if strings.HasPrefix(nd.Target, "/") {
				paths, stack = paths[:0], stack[:1]
			}
			todo = append(fspath.Components(nd.Target), todo...)
			// splitPath drops "." but keeps "..", as the kernel does.
			continue
		}
		paths = append(paths, next)
		stack = append(stack, nd)
	}
	if len(paths) == 0 {
		return "/", stack[0], stack[0], 0
	}
	return paths[len(paths)-1], stack[len(stack)-1], stack[len(stack)-2], 0
}

func hasDotDot(parts []string) bool {
	for _, c := range parts {
		if c == ".." {
			return true
		}
	}
	return false
}

// Lstat describes p without following a final symlink; -ENOENT when it
// does not exist.
func (f *FS) Lstat(p string) (Node, int) {
	_, n, _, e := f.walk(p, true, false)
	return nodeOf(n, e)
}

// Stat describes p, following symlinks.
func (f *FS) Stat(p string) (Node, int) {
	_, n, _, e := f.walk(p, false, false)
	return nodeOf(n, e)
}

func nodeOf(n *node, e int) (Node, int) {
	if e < 0 {
		return Node{}, e
	}
	if n == nil {
		return Node{}, -eNOENT
	}
	return n.Node, 0
}

// Readlink returns the target of the symlink at p (-EINVAL if p is not
// one).
func (f *FS) Readlink(p string) (string, int) {
	n, e := f.Lstat(p)
	if e < 0 {
		return "", e
	}
	if n.Kind != Symlink {
		return "", -eINVAL
	}
	return n.Target, 0
}

// ReadFile returns the content of the regular file at p; with nofollow a
// final symlink is -ELOOP, as O_NOFOLLOW makes it.
func (f *FS) ReadFile(p string, nofollow bool) ([]byte, int) {
	real, n, _, e := f.walk(p, nofollow, false)
	switch {
	case e < 0:
		return nil, e
	case n == nil:
		return nil, -eNOENT
	case n.Kind == Symlink:
		return nil, -eLOOP
	case n.Kind == Dir:
		return nil, -eISDIR
	case n.Kind != File:
		return nil, -eBADFD
	}
	if !n.loaded {
		b, err := f.base.ReadFile(real)
		if err != nil {
			if f.err == nil {
				f.err = err
			}
			return nil, -eIO
		}
		n.content, n.loaded = b, true
	}
	return n.content, 0
}

// Dirent is a directory entry: its name and lstat type.
type Dirent struct {
	Name string
	Kind Kind
}

// ReadDir lists the directory p (following symlinks), sorted by name.
func (f *FS) ReadDir(p string) ([]Dirent, int) {
	real, n, _, e := f.walk(p, false, false)
	switch {
	case e < 0:
		return nil, e
	case n == nil:
		return nil, -eNOENT
	case n.Kind != Dir:
		return nil, -eNOTDIR
	}
	names := map[string]bool{}
	if !n.opaque {
		base, ok := f.listed[real]
		if !ok {
			var err error
			if base, err = f.base.ReadDir(real); err != nil && f.err == nil {
				f.err = err
			}
			f.listed[real] = base
		}
		for _, name := range base {
			names[name] = true
		}
	}
	for name := range f.added[real] {
		names[name] = true
	}
	var out []Dirent
	for name := range names {
		if c := f.get(path.Join(real, name), n); c != nil {
			out = append(out, Dirent{Name: name, Kind: c.Kind})
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out, 0
}

// set records that the real path p is now n (nil: absent).
func (f *FS) set(p string, n *node) {
	if n == nil {
		f.purge(p)
	}
	f.nodes[p] = n
	if n != nil {
		d := path.Dir(p)
		if f.added[d] == nil {
			f.added[d] = map[string]bool{}
		}
		f.added[d][path.Base(p)] = true
	}
	f.touch(p)
}

// purge forgets everything known below p, which is going away.
func (f *FS) purge(p string) {
	prefix := p + "/"
	for k := range f.nodes {
		if strings.HasPrefix(k, prefix) {
			delete(f.nodes, k)
		}
	}
	for k := range f.added {
		if k == p || strings.HasPrefix(k, prefix) {
			delete(f.added, k)
		}
	}
}

func (f *FS) touch(p string) {
	if !f.record {
		return
	}
	if _, ok := f.touched[p]; !ok {
		f.order = append(f.order, p)
	}
	f.touched[p] = f.tag
}

// Claim records p (as it is now) with the current tag without changing
// it: a link systemctl found already in place.
func (f *FS) Claim(p string) {
	if real, n, _, e := f.walk(p, true, false); e == 0 && n != nil {
		f.touch(real)
	}
}

// create resolves the parent of p and returns the real path for a new
// node there; -EEXIST when p exists.
func (f *FS) create(p string) (string, int) {
	real, n, parent, e := f.walk(p, true, false)
	switch {
	case e < 0:
		return "", e
	case n != nil:
		return real, -eEXIST
	case parent == nil || parent.Kind != Dir:
		return "", -eNOENT
	}
	return real, 0
}

// Symlink creates a symlink at p pointing to target.
func (f *FS) Symlink(target, p string) int {
	real, e := f.create(p)
	if e < 0 {
		return e
	}
	f.set(real, &node{Node: Node{Kind: Symlink, Target: target}})
	return 0
}

// Mkdir creates the directory p.
func (f *FS) Mkdir(p string) int {
	real, e := f.create(p)
	if e < 0 {
		return e
	}
	f.set(real, &node{Node: Node{Kind: Dir}, opaque: true})
	return 0
}

// MkdirAll creates p and its missing parents (mkdir -p).
func (f *FS) MkdirAll(p string) int {
	if n, e := f.Stat(p); e == 0 {
		if n.Kind != Dir {
			return -eNOTDIR
		}
		return 0
	}
	if d := path.Dir(p); d != p {
		if e := f.MkdirAll(d); e < 0 {
			return e
		}
	}
	if e := f.Mkdir(p); e < 0 && e != -eEXIST {
		return e
	}
	return 0
}

// Unlink removes the non-directory p.
func (f *FS) Unlink(p string) int {
	real, n, _, e := f.walk(p, true, false)
	switch {
	case e < 0:
		return e
	case n == nil:
		return -eNOENT
	case n.Kind == Dir:
		return -eISDIR
	}
	f.set(real, nil)
	return 0
}

// Rmdir removes the empty directory p.
func (f *FS) Rmdir(p string) int {
	real, n, _, e := f.walk(p, true, false)
	switch {
	case e < 0:
		return e
	case n == nil:
		return -eNOENT
	case n.Kind != Dir:
		return -eNOTDIR
	}
	if ents, _ := f.ReadDir(real); len(ents) > 0 {
		return -eNOTEMPTY
	}
	f.set(real, nil)
	return 0
}

// RemoveAll removes p and everything below it, as os.RemoveAll does; a
// missing p is no error.
func (f *FS) RemoveAll(p string) int {
	real, n, _, e := f.walk(p, true, false)
	if e == -eNOENT || e == 0 && n == nil {
		return 0
	}
	if e < 0 {
		return e
	}
	f.set(real, nil)
	return 0
}

// WriteFile replaces p with a regular file holding content, creating
// missing parents, as the MCD's atomic writes do (a rename over p: a
// symlink at p is replaced, a directory is -EISDIR). The FS keeps
// content itself, as ReadFile and Changes return it: the caller must not
// modify it afterwards (render seeds the tree with every file it owns, up
// to MaxTotalContent, and a copy would double that).
func (f *FS) WriteFile(p string, content []byte) int {
	if e := f.MkdirAll(path.Dir(p)); e < 0 {
		return e
	}
	real, n, parent, e := f.walk(p, true, false)
	switch {
	case e < 0:
		return e
	case n != nil && n.Kind == Dir:
		return -eISDIR
	case parent == nil:
		return -eNOENT
	}
	f.set(real, &node{Node: Node{Kind: File, Size: int64(len(content))}, content: content, loaded: true})
	return 0
}

// Change is the final state of a path the FS changed or claimed.
type Change struct {
	Path    string
	Node    Node   // Kind Missing: the path is gone
	Content []byte // File
	InBase  bool   // the base has the path
	BaseDir bool   // the base has a directory there
	Tag     any
}

// Changes lists every recorded path with its final state, in the order
// they were first touched.
func (f *FS) Changes() []Change {
	var out []Change
	for _, p := range f.order {
		c := Change{Path: p, Tag: f.touched[p]}
		if _, n, _, e := f.walk(p, true, false); e == 0 && n != nil {
			c.Node = n.Node
			if n.Kind == File {
				c.Content, _ = f.ReadFile(p, true)
			}
		}
		b, inBase, err := f.base.Lstat(p)
		c.InBase = inBase && err == nil
		c.BaseDir = c.InBase && b.Kind == Dir
		out = append(out, c)
	}
	return out
}
