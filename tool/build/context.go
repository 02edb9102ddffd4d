package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/templates"
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
	names := []string{ContextContainerfile, ContextRootfs, ContextManifest, ContextChown}
	return atomicdir.Build(dir, "build context", names, func(tmp string) error {
		return writeContextFiles(tmp, p, plan, data)
	})
}

func readAppend(file string) (string, error) {
	if file == "" {
		return "", nil
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("reading the extra Containerfile instructions: %w", err)
	}
	return strings.TrimRight(string(b), "\n"), nil
}

// contextPlan is what a context holds: the rootfs entries sorted by path
// (each at the path it occupies in the image, Path; hard links name the
// path of the file they link to) and the image paths to remove.
type contextPlan struct {
	nodes  []render.Entry
	remove []string
}

// planContext lays out the rendered entries and the directories above
// them. A directory takes the rendered entry's metadata, else the base's,
// else 0755 root:root (the manifest's parents).
func planContext(p *Prepared) (*contextPlan, error) {
	byPath := map[string]render.Entry{}
	written := map[string]string{} // requested or resolved path of a rendered file -> where
	plan := &contextPlan{}
	var links []render.Entry
	for _, e := range slices.Concat(p.Rendered.Entries, p.Own) {
		where := e.Where()
		switch e.Type {
		case manifest.Absent:
			plan.remove = append(plan.remove, where)
			continue
		case manifest.Hardlink:
			links = append(links, e)
			continue
		case manifest.File:
			written[e.Path], written[where] = where, where
		}
		byPath[where] = at(e, where)
	}
	for _, e := range links {
		target, ok := written[e.Target]
		if !ok {
			return nil, fmt.Errorf("%s: a Containerfile cannot make a hard link to %s, which only the base has", e.Path, e.Target)
		}
		if t := byPath[target]; t.UID != 0 || t.GID != 0 {
			return nil, fmt.Errorf("%s: a Containerfile cannot keep a hard link to %s, which is not owned by root", e.Path, e.Target)
		}
		byPath[e.Where()] = render.Entry{Entry: manifest.Entry{Path: e.Where(), Type: manifest.Hardlink, Target: target}}
	}
	rendered := make([]string, 0, len(byPath))
	for p := range byPath {
		rendered = append(rendered, p)
	}
	for _, rp := range rendered {
		if err := addParents(byPath, rp, p.Tree); err != nil {
			return nil, err
		}
	}
	for _, n := range byPath {
		plan.nodes = append(plan.nodes, n)
	}
	sort.Slice(plan.nodes, func(i, j int) bool { return plan.nodes[i].Path < plan.nodes[j].Path })
	sort.Strings(plan.remove)
	return plan, nil
}

// at is e placed at the path where, with no other path recorded.
func at(e render.Entry, where string) render.Entry {
	e.Path, e.ResolvedPath = where, ""
	return e
}

// addParents adds the directories above p that byPath lacks, with the
// base's metadata where the base has the directory.
func addParents(byPath map[string]render.Entry, p string, tree fstree.Tree) error {
	for d := path.Dir(p); d != "/"; d = path.Dir(d) {
		if _, ok := byPath[d]; ok {
			continue
		}
		n := render.Entry{Entry: manifest.Entry{Path: d, Type: manifest.Directory, Mode: 0o755}}
		b, ok, err := tree.Lstat(d)
		if err != nil {
			return err
		}
		if ok && b.Type == manifest.Directory {
			n.Mode, n.UID, n.GID = b.Mode, b.UID, b.GID
		}
		byPath[d] = n
	}
	return nil
}

// chowned returns the nodes COPY must give an owner other than root.
// Hard links share their target's owner.
func (c *contextPlan) chowned() []render.Entry {
	var out []render.Entry
	for _, n := range c.nodes {
		if n.Type != manifest.Hardlink && (n.UID != 0 || n.GID != 0) {
			out = append(out, n)
		}
	}
	return out
}

// containerfileData fills the Containerfile template.
func containerfileData(p *Prepared, plan *contextPlan, extra string) (*templates.ContainerfileData, error) {
	from, err := fromReference(p.BaseRef, p.BaseDigest.String())
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
	if p.Manifest != nil {
		args, err := templates.CopyArgs(ContextManifest, image.ManifestPath)
		if err != nil {
			return nil, err
		}
		d.Manifest = &templates.Copy{Args: args}
	}
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
func chownCopy(i int, n render.Entry) (templates.Copy, error) {
	flags := []string{fmt.Sprintf("--chown=%d:%d", n.UID, n.GID)}
	if n.Type != manifest.Symlink {
		flags = append(flags, fmt.Sprintf("--chmod=%04o", uint32(n.Mode)))
	}
	dest := "/"
	if parent := path.Dir(n.Path); parent != "/" {
		dest = parent + "/"
	}
	args, err := templates.CopyArgs(chownDir(i)+"/", dest)
	if err != nil {
		return templates.Copy{}, fmt.Errorf("%s: %w", n.Path, err)
	}
	return templates.Copy{Comment: strconv.Quote(n.Path), Flags: flags, Args: args}, nil
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
		"Generated by mcbake: " + p.what(),
		"rendered against " + p.BaseRef + " (" + p.BaseDigest.String() + ").",
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

// what says what a build adds, for the Containerfile's header.
func (p *Prepared) what() string {
	if p.Manifest == nil {
		return "the revert guard"
	}
	return "MachineConfigs " + strings.Join(p.names(), ", ")
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
	ctx, wo := context.Background(), render.WriteOptions{Chown: os.Geteuid() == 0}
	if err := render.WriteEntries(ctx, filepath.Join(dir, ContextRootfs), plan.nodes, wo); err != nil {
		return err
	}
	for i, n := range plan.chowned() {
		if err := render.WriteEntries(ctx, filepath.Join(dir, chownDir(i)), []render.Entry{at(n, "/"+path.Base(n.Path))}, wo); err != nil {
			return err
		}
	}
	if p.Manifest != nil {
		f, err := os.OpenFile(filepath.Join(dir, ContextManifest), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o644)
		if err != nil {
			return err
		}
		_, err = f.Write(p.ManifestJSON)
		if err = errors.Join(err, f.Chmod(0o644), f.Close()); err != nil {
			return err
		}
	}
	f, err := os.OpenFile(filepath.Join(dir, ContextContainerfile), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	err = templates.Execute(f, templates.Containerfile, data)
	return errors.Join(err, f.Close())
}
