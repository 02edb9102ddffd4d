package build

import (
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/layered"
	"github.com/mcbake/mcbake/internal/manifest"
	"github.com/mcbake/mcbake/internal/render"
	"github.com/mcbake/mcbake/templates"
)

// The files of a build context written by WriteContext.
const (
	ContextContainerfile = "Containerfile"
	ContextRootfs        = "rootfs"
	ContextManifest      = "manifest.json"
	// ContextChown holds, in numbered directories, a copy of each path
	// that is not root's, COPY'd again with --chown.
	ContextChown = "chown"
)

// WriteContext writes a Containerfile build context for p into dir:
// dir/Containerfile (templates.Containerfile), dir/rootfs with the rendered
// entries at their resolved paths and their modes (and owners, when
// running as root), dir/chown with the paths COPY must give another owner
// than root, and dir/manifest.json. The directories of rootfs that the
// base already has carry the base's mode and owner, so that COPY leaves
// them as they are. The content of appendFile ("" = none) ends the
// Containerfile verbatim. This is `mcbake build --render-only`, and what
// the buildah engine builds.
//
// The context is written into a temporary sibling of dir and moved into
// place at the end: on error nothing is left behind. dir must be absent,
// empty or an earlier context; anything else is refused, not replaced.
func WriteContext(dir string, p *Prepared, appendFile string) (err error) {
	extra, err := readAppend(appendFile)
	if err != nil {
		return err
	}
	plan, err := planContext(p)
	if err != nil {
		return err
	}
	data, err := containerfileData(p, plan, extra)
	if err != nil {
		return err
	}
	if err := atomicdir.CheckReplaceable(dir, "build context", ContextContainerfile, ContextRootfs, ContextManifest, ContextChown); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp(filepath.Dir(filepath.Clean(dir)), "."+filepath.Base(dir)+".tmp-")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, atomicdir.RemoveTree(tmp))
		}
	}()
	if err := writeContextFiles(tmp, p, plan, data); err != nil {
		return err
	}
	return atomicdir.Replace(tmp, dir)
}

func readAppend(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading --containerfile-append: %w", err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// node is one path of the context's rootfs, relative to it ("etc/foo").
type node struct {
	rel      string
	typ      manifest.Type
	mode     uint32
	uid, gid int
	content  []byte
	target   string // a symlink's target; a hard link's rootfs path
}

// contextPlan is what a context holds: the rootfs nodes sorted by path
// and the image paths to remove.
type contextPlan struct {
	nodes  []*node
	remove []string
}

// planContext lays out the rendered entries and the directories above
// them. A directory takes the rendered entry's metadata, else the base's,
// else 0755 root:root (the manifest's parents).
func planContext(p *Prepared) (*contextPlan, error) {
	byPath := map[string]*node{}
	written := map[string]string{} // requested or resolved path of a rendered file -> rel
	plan := &contextPlan{}
	var links []render.Entry
	for _, e := range p.Rendered.Entries {
		rel := strings.TrimPrefix(e.Where(), "/")
		switch e.Type {
		case manifest.Absent:
			plan.remove = append(plan.remove, e.Where())
			continue
		case manifest.Hardlink:
			links = append(links, e)
			continue
		case manifest.File:
			written[e.Path], written[e.Where()] = rel, rel
		}
		byPath[rel] = &node{rel: rel, typ: e.Type, mode: uint32(e.Mode), uid: e.UID, gid: e.GID, content: e.Content, target: e.Target}
	}
	for _, e := range links {
		target, ok := written[e.Target]
		if !ok {
			return nil, fmt.Errorf("%s: a Containerfile cannot make a hard link to %s, which only the base has", e.Path, e.Target)
		}
		if t := byPath[target]; t.uid != 0 || t.gid != 0 {
			return nil, fmt.Errorf("%s: a Containerfile cannot keep a hard link to %s, which is not owned by root", e.Path, e.Target)
		}
		rel := strings.TrimPrefix(e.Where(), "/")
		byPath[rel] = &node{rel: rel, typ: manifest.Hardlink, target: target}
	}
	rendered := make([]string, 0, len(byPath))
	for rel := range byPath {
		rendered = append(rendered, rel)
	}
	for _, rel := range rendered {
		addParents(byPath, rel, p.Index)
	}
	for _, n := range byPath {
		plan.nodes = append(plan.nodes, n)
	}
	sort.Slice(plan.nodes, func(i, j int) bool { return plan.nodes[i].rel < plan.nodes[j].rel })
	sort.Strings(plan.remove)
	return plan, nil
}

// addParents adds the directories above rel that byPath lacks.
func addParents(byPath map[string]*node, rel string, ix *baseindex.Index) {
	for d := path.Dir(rel); d != "." && d != "/"; d = path.Dir(d) {
		if _, ok := byPath[d]; ok {
			continue
		}
		n := &node{rel: d, typ: manifest.Directory, mode: 0o755}
		if b, ok := ix.Lookup(d); ok && b.Type == baseindex.Dir {
			n.mode, n.uid, n.gid = b.Mode, int(b.UID), int(b.GID)
		}
		byPath[d] = n
	}
}

// chowned returns the nodes COPY must give an owner other than root.
// Hard links share their target's owner.
func (c *contextPlan) chowned() []*node {
	var out []*node
	for _, n := range c.nodes {
		if n.typ != manifest.Hardlink && (n.uid != 0 || n.gid != 0) {
			out = append(out, n)
		}
	}
	return out
}

// containerfileData fills the Containerfile template.
func containerfileData(p *Prepared, plan *contextPlan, extra string) (*templates.ContainerfileData, error) {
	from, err := fromReference(p.BaseRef, p.BaseDigest)
	if err != nil {
		return nil, err
	}
	d := &templates.ContainerfileData{Header: header(p), From: from, Rootfs: ContextRootfs + "/", Append: extra}
	for i, n := range plan.chowned() {
		c, err := chownCopy(i, n)
		if err != nil {
			return nil, err
		}
		d.Chowns = append(d.Chowns, c)
	}
	args, err := templates.CopyArgs(ContextManifest, layered.ManifestPath)
	if err != nil {
		return nil, err
	}
	d.Manifest = templates.Copy{Args: args}
	if len(plan.remove) > 0 {
		d.Remove = templates.ExecForm(append([]string{"rm", "-f", "--"}, plan.remove...)...)
	}
	if d.Labels, err = labels(p.Labels()); err != nil {
		return nil, err
	}
	return d, nil
}

// chownCopy is the COPY that gives n its owner: it copies the contents of
// chown/I (n's base name only, a directory without its children) into n's
// parent directory, leaving that directory itself alone.
func chownCopy(i int, n *node) (templates.Copy, error) {
	flags := []string{fmt.Sprintf("--chown=%d:%d", n.uid, n.gid)}
	if n.typ != manifest.Symlink {
		flags = append(flags, fmt.Sprintf("--chmod=%04o", n.mode))
	}
	dest := "/"
	if parent := path.Dir(n.rel); parent != "." {
		dest = "/" + parent + "/"
	}
	args, err := templates.CopyArgs(chownDir(i)+"/", dest)
	if err != nil {
		return templates.Copy{}, fmt.Errorf("/%s: %w", n.rel, err)
	}
	return templates.Copy{Comment: strconv.Quote("/" + n.rel), Flags: flags, Args: args}, nil
}

func chownDir(i int) string { return ContextChown + "/" + strconv.Itoa(i) }

func labels(m map[string]string) ([]templates.Label, error) {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var out []templates.Label
	for _, k := range keys {
		qk, err := templates.Word(k)
		if err != nil {
			return nil, fmt.Errorf("label %s: %w", k, err)
		}
		qv, err := templates.Word(m[k])
		if err != nil {
			return nil, fmt.Errorf("label %s: %w", k, err)
		}
		out = append(out, templates.Label{Key: qk, Value: qv})
	}
	return out, nil
}

func header(p *Prepared) []string {
	h := []string{
		"Generated by mcbake: MachineConfigs " + strings.Join(p.names(), ", "),
		"rendered against " + p.BaseRef + " (" + p.BaseDigest + ").",
		"Build it from this directory, e.g.:",
		"  buildah build --timestamp 0 \\",
	}
	ann := p.Annotations()
	keys := make([]string, 0, len(ann))
	for k := range ann {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		h = append(h, "    --annotation "+k+"="+ann[k]+" \\")
	}
	return append(h, "    -t IMAGE .")
}

// fromReference is the FROM of the Containerfile: a registry image by
// name pinned to the base's digest (what every builder accepts), other
// transports as containers-transport references with an absolute path
// (what buildah and podman accept).
func fromReference(ref, dgst string) (string, error) {
	if strings.ContainsAny(ref, " \t\n\r\"'$\\") {
		return "", fmt.Errorf("base %q cannot be written in a Containerfile FROM line", ref)
	}
	transport, rest, _ := strings.Cut(ref, ":")
	switch transport {
	case "docker":
		name := strings.TrimPrefix(rest, "//")
		if !strings.Contains(name, "@") {
			name += "@" + dgst
		}
		return name, nil
	case "dir":
		abs, err := filepath.Abs(rest)
		return transport + ":" + abs, err
	case "oci", "oci-archive", "docker-archive":
		p, suffix, found := strings.Cut(rest, ":")
		abs, err := filepath.Abs(p)
		if found {
			abs += ":" + suffix
		}
		return transport + ":" + abs, err
	}
	return ref, nil
}

// writeContextFiles writes the context into the empty directory dir.
func writeContextFiles(dir string, p *Prepared, plan *contextPlan, data *templates.ContainerfileData) error {
	chown := os.Geteuid() == 0
	if err := writeNodes(filepath.Join(dir, ContextRootfs), plan.nodes, chown); err != nil {
		return err
	}
	for i, n := range plan.chowned() {
		staged := *n
		staged.rel = path.Base(n.rel)
		if err := writeNodes(filepath.Join(dir, chownDir(i)), []*node{&staged}, chown); err != nil {
			return err
		}
	}
	if err := writeFileMode(filepath.Join(dir, ContextManifest), p.ManifestJSON, 0o644); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, ContextContainerfile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = templates.Execute(f, templates.Containerfile, data)
	return errors.Join(err, f.Close(), os.Chmod(dir, 0o755))
}

// writeNodes creates root (0755) and the nodes under it, sorted by path
// (parents first); owners are set when chown is true. Hard links are made
// once their targets exist; directory modes are set last, deepest first,
// so a read-only directory does not stop its children from being written.
func writeNodes(root string, nodes []*node, chown bool) error {
	if err := os.MkdirAll(root, 0o755); err != nil {
		return err
	}
	var dirs, links []*node
	for _, n := range nodes {
		switch n.typ {
		case manifest.Hardlink:
			links = append(links, n)
			continue
		case manifest.Directory:
			dirs = append(dirs, n)
		}
		if err := writeNode(root, n, chown); err != nil {
			return fmt.Errorf("writing /%s: %w", n.rel, err)
		}
	}
	for _, n := range links {
		if err := os.Link(filepath.Join(root, n.target), filepath.Join(root, n.rel)); err != nil {
			return fmt.Errorf("writing /%s: %w", n.rel, err)
		}
	}
	for i := len(dirs) - 1; i >= 0; i-- {
		if err := os.Chmod(filepath.Join(root, dirs[i].rel), fileMode(dirs[i].mode)); err != nil {
			return err
		}
	}
	return nil
}

func writeNode(root string, n *node, chown bool) error {
	p := filepath.Join(root, n.rel)
	var err error
	switch n.typ {
	case manifest.File:
		err = writeFileMode(p, n.content, 0o600)
	case manifest.Directory:
		err = os.Mkdir(p, 0o700)
	case manifest.Symlink:
		err = os.Symlink(n.target, p)
	default:
		err = fmt.Errorf("unknown entry type %q", n.typ)
	}
	if err != nil {
		return err
	}
	if chown {
		if err := os.Lchown(p, n.uid, n.gid); err != nil {
			return err
		}
	}
	if n.typ == manifest.File {
		// After the chown, which clears setuid and setgid.
		return os.Chmod(p, fileMode(n.mode))
	}
	return nil
}

// writeFileMode creates the regular file p (never following a symlink,
// never replacing anything) with data and the permission bits perm.
func writeFileMode(p string, data []byte, perm os.FileMode) (err error) {
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	if _, err := f.Write(data); err != nil {
		return err
	}
	return f.Chmod(perm)
}

// fileMode converts Unix permission bits (07777) to an os.FileMode.
func fileMode(m uint32) os.FileMode {
	mode := os.FileMode(m & 0o777)
	if m&syscall.S_ISUID != 0 {
		mode |= os.ModeSetuid
	}
	if m&syscall.S_ISGID != 0 {
		mode |= os.ModeSetgid
	}
	if m&syscall.S_ISVTX != 0 {
		mode |= os.ModeSticky
	}
	return mode
}
