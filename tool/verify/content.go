package verify

import (
	"context"
	"path"
	"strings"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// kubeconfig is the file whose mode the machine-config-daemon sets to 0600
// whatever the MachineConfig says, and Ignition does not.
const kubeconfig = "/etc/kubernetes/kubeconfig"

// contentMismatch compares an image built by others with the MachineConfigs
// (MCB026): they are rendered against the image's own tree, what the
// machine-config-daemon writes on a node that runs it, and the image must
// have that at every path an item writes as Ignition writes it too
// (comparedItems). Anything else the daemon writes otherwise than
// ignition-apply by design is not compared (docs/design.md, "Images built
// by others").
func (c *checker) contentMismatch(ctx context.Context) {
	img := c.image
	m := c.inputFor(true)
	m.SSHKeys = nil // Ignition skips passwd: nothing to compare
	res, err := render.Render(ctx, m, img.tree)
	if err != nil {
		c.skip(RuleContentMismatch, "the MachineConfigs could not be rendered against the image: "+firstLine(err))
		return
	}
	items := comparedItems(m)
	for _, e := range res.Entries {
		attrs, ok := items[e.Path]
		if !ok || e.Type == manifest.Absent || e.Managed != "" {
			continue
		}
		have, found, err := fstree.Observe(img.tree, e.Where(), e.Entry)
		if err != nil {
			c.skip(RuleContentMismatch, "the image could not be read: "+firstLine(err))
			return
		}
		src := c.sourceOf(e.Source)
		if !found {
			c.add(RuleContentMismatch, src, e.Path, "the image has no %s %s, which the MachineConfigs write: it was not built from them", e.Type, e.Path)
			continue
		}
		var differs []string
		for _, a := range manifest.Compare(e.Entry, have) {
			if attrs[a] {
				differs = append(differs, string(a))
			}
		}
		if len(differs) > 0 {
			c.add(RuleContentMismatch, src, e.Path, "the image has %s otherwise than the MachineConfigs write it (%s): it was not built from them", e.Path, strings.Join(differs, ", "))
		}
	}
}

// comparedItems maps each path a MachineConfig item writes the way
// Ignition writes it too to the attributes compared there: a file's type,
// owner, mode (but kubeconfig's) and content (when it has a source); a
// directory's type and owner, and mode when given; a link's type and
// target; a unit's contents or mask, and its drop-ins with contents.
func comparedItems(m *machineconfig.Merged) map[string]map[manifest.Attr]bool {
	attrs := func(as ...manifest.Attr) map[manifest.Attr]bool {
		out := map[manifest.Attr]bool{}
		for _, a := range as {
			out[a] = true
		}
		return out
	}
	items := map[string]map[manifest.Attr]bool{}
	for _, f := range m.Files {
		a := attrs(manifest.AttrType, manifest.AttrUID, manifest.AttrGID, manifest.AttrMode)
		if f.Path == kubeconfig {
			delete(a, manifest.AttrMode)
		}
		if f.Contents.Source != nil {
			a[manifest.AttrContent] = true
		}
		items[f.Path] = a
	}
	for _, d := range m.Directories {
		a := attrs(manifest.AttrType, manifest.AttrUID, manifest.AttrGID)
		if d.Mode != nil {
			a[manifest.AttrMode] = true
		}
		items[d.Path] = a
	}
	for _, l := range m.Links {
		items[l.Path] = attrs(manifest.AttrType, manifest.AttrTarget)
	}
	for _, u := range m.Units {
		p := path.Join(render.UnitDir, u.Name)
		switch {
		case u.Mask != nil && *u.Mask:
			items[p] = attrs(manifest.AttrType, manifest.AttrTarget)
		case u.Contents != nil && *u.Contents != "":
			items[p] = attrs(manifest.AttrType, manifest.AttrContent, manifest.AttrMode)
		}
		for _, d := range u.Dropins {
			if d.Contents != nil && *d.Contents != "" {
				items[path.Join(render.UnitDir, u.Name+".d", d.Name)] = attrs(manifest.AttrType, manifest.AttrContent, manifest.AttrMode)
			}
		}
	}
	return items
}

// firstLine is err's message up to its first line break.
func firstLine(err error) string {
	msg, _, _ := strings.Cut(err.Error(), "\n")
	return msg
}
