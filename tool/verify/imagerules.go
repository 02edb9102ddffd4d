package verify

import (
	"context"
	"maps"
	"slices"

	"fmt"
	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/tool/guard"
	"path"
	"sort"
	"strings"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/opencontainers/go-digest"
)

// imageRules checks the layered image (MCB008, MCB009, MCB012, MCB015,
// MCB025, MCB026).
func (c *checker) imageRules(ctx context.Context) {
	img := c.image
	if img == nil {
		return
	}
	if img.isBase {
		c.add(RuleImageIsBase, machineconfig.Source{}, "", "the image %s is the base %s (same digest %s): nothing is baked into it; a revert is a no-op and rpm-ostree rebase to it fails with \"Old and new refs are equal\"",
			img.ref, c.base.ref, img.digest)
		for _, id := range []string{RuleManifestDrift, RuleStaleImage, RuleBaseMismatch, RuleRevertGuard, RuleContentMismatch} {
			c.skip(id, "the image is the base")
		}
		return
	}
	c.revertGuard()
	if img.builtByOthers {
		for _, id := range []string{RuleManifestDrift, RuleStaleImage, RuleBaseMismatch} {
			c.skip(id, "the image has no mcbake manifest (built by others)")
		}
		c.contentMismatch(ctx)
		return
	}
	// An image with mcbake's manifest: MCB008 and MCB009 check it.
	if !c.embeddedManifest() {
		c.skip(RuleStaleImage, "the image has no valid embedded manifest")
		c.skip(RuleBaseMismatch, "the image has no valid embedded manifest")
		return
	}
	c.labelDrift()
	c.layerDrift()
	c.staleImage()
	c.baseMismatch()
	c.renderDrift()
}

// revertGuard reports an image without the revert guard (MCB025): it
// has none unless its config has the guard's label or its layers hold
// the guard's paths.
func (c *checker) revertGuard() {
	img := c.image
	if img.labels[guard.Label] != "" {
		return
	}
	var missing []string
	for _, p := range []string{guard.BinaryPath, guard.UnitPath, guard.WantsPath} {
		if !img.has(p) {
			missing = append(missing, p)
		}
	}
	if len(missing) > 0 {
		c.add(RuleRevertGuard, machineconfig.Source{}, "", "the image %s has no revert guard (no %s label; %s missing): a node that reverts from it to its base loses every MachineConfig file it left as the image baked it",
			img.ref, guard.Label, strings.Join(missing, ", "))
	}
}

// has reports whether the image holds p: in its top layer or the revert
// guard's layer under it, or, for an image built by others, in its
// indexed tree.
func (in *imageInput) has(p string) bool {
	for _, l := range []*layerScan{in.layer, in.guard} {
		if l == nil {
			continue
		}
		if e, ok := l.entries[p]; ok {
			return e.Type != manifest.Absent
		}
	}
	if in.tree == nil {
		return false
	}
	_, ok, err := in.tree.Lstat(p)
	return ok && err == nil
}

// drift reports an MCB008 finding not tied to a manifest entry.
func (c *checker) drift(format string, args ...any) {
	c.add(RuleManifestDrift, machineconfig.Source{}, "", format, args...)
}

// embeddedManifest checks and decodes the embedded manifest; it reports
// whether there is one to check the image against.
func (c *checker) embeddedManifest() bool {
	img := c.image
	raw := img.layer.manifest
	if raw == nil {
		c.drift("the image's top layer has no %s (the manifest label says it has one; was a layer added on top?)", image.ManifestPath)
		return false
	}
	if got, want := digest.FromBytes(raw), img.labels[image.LabelManifestDigest]; got.String() != want {
		c.drift("the embedded manifest %s does not match the label %s=%s", got, image.LabelManifestDigest, want)
	}
	m, err := manifest.Unmarshal(raw)
	if err != nil {
		c.drift("the embedded manifest %s is not valid: %v", image.ManifestPath, err)
		return false
	}
	img.manifest = m
	return true
}

// labelDrift compares the base and MachineConfig labels with the manifest.
func (c *checker) labelDrift() {
	m, labels := c.image.manifest, c.image.labels
	if m.Base != nil && labels[image.LabelBaseDigest] != m.Base.Digest.String() {
		c.drift("the label %s=%s does not match the embedded manifest's base %s", image.LabelBaseDigest, labels[image.LabelBaseDigest], m.Base.Digest)
	}
	var names []string
	for _, mc := range m.MachineConfigs {
		names = append(names, mc.Name)
	}
	if got := labels[image.LabelMachineConfigs]; got != strings.Join(names, ",") {
		c.drift("the label %s=%s does not match the embedded manifest's MachineConfigs %s", image.LabelMachineConfigs, got, strings.Join(names, ","))
	}
}

// layerDrift compares the top layer with the manifest entries, and, when
// the manifest records mcbake's own files, the revert guard's layer under
// it too (mcbake build puts them there; an image built on a guard-only
// image has the base's guard layer there, which is not its own).
// Unrecorded directories are tolerated (a Containerfile build re-declares
// the base's parent directories); unrecorded files, links and whiteouts
// are not.
func (c *checker) layerDrift() {
	entries := c.image.layer.entries
	if g := c.image.guard; g != nil && len(c.image.manifest.Own) > 0 {
		entries = maps.Clone(entries)
		for p, e := range g.entries {
			if _, ok := entries[p]; !ok {
				entries[p] = e
			}
		}
	}
	recorded := map[string]bool{}
	for d := image.ManifestPath; d != "/"; d = path.Dir(d) {
		recorded[d] = true
	}
	for _, e := range slices.Concat(c.image.manifest.Entries, c.image.manifest.Own) {
		recorded[e.Where()] = true
		src := c.sourceOf(e.Source)
		le, ok := entries[e.Where()]
		switch {
		case !ok && e.Type == manifest.Absent:
			c.add(RuleManifestDrift, src, e.Path, "the manifest records %s as removed, but the top layer has no whiteout for it", e.Where())
		case !ok:
			c.add(RuleManifestDrift, src, e.Path, "the manifest records %s %s, but the top layer does not have it", e.Type, e.Where())
		default:
			if d := entryDiffers(e, le); len(d) > 0 {
				c.add(RuleManifestDrift, src, e.Path, "the top layer's %s differs from the manifest (%s)", e.Where(), strings.Join(d, ", "))
			}
		}
	}
	for _, name := range sortedKeys(entries) {
		le := entries[name]
		if !recorded[name] && le.Type != manifest.Directory {
			c.drift("the top layer has %s %s, which the manifest does not record", layerType(le.Type), name)
		}
	}
}

// layerType names a layer entry's type as a layer has it: an absence is a
// whiteout.
func layerType(t manifest.Type) string {
	if t == manifest.Absent {
		return "whiteout"
	}
	return string(t)
}

// entryDiffers lists how a layer entry differs from a manifest entry.
func entryDiffers(e, le manifest.Entry) []string {
	d := manifest.Compare(e, le)
	if len(d) == 1 && d[0] == manifest.AttrType {
		return []string{fmt.Sprintf("type %s, manifest %s", layerType(le.Type), layerType(e.Type))}
	}
	out := make([]string, len(d))
	for i, a := range d {
		out[i] = string(a)
	}
	return out
}

// staleImage compares the MachineConfigs given with those baked (MCB009).
func (c *checker) staleImage() {
	for _, d := range revert.Staleness(c.image.manifest, c.in.mcs) {
		c.stale = true
		c.add(RuleStaleImage, d.Source, "", "%s", d.Message)
	}
}

// baseMismatch notes a --base that is not the image's own (MCB015).
func (c *checker) baseMismatch() {
	m := c.image.manifest
	if c.base == nil || m.Base == nil || m.Base.Digest == c.base.digest {
		return
	}
	c.add(RuleBaseMismatch, machineconfig.Source{}, "", "the image was built from base %s (%s), not from the --base given (%s): revert analysis is against the given base, the manifest is not re-rendered",
		m.Base.Digest, m.Base.Reference, c.base.digest)
}

// renderDrift compares the embedded manifest with a fresh render against
// the image's own base (MCB008), when that comparison means something: the
// base is the image's, the MachineConfigs are the ones baked, and the
// render left nothing out.
func (c *checker) renderDrift() {
	m := c.image.manifest
	if c.base == nil || m.Base == nil || m.Base.Digest != c.base.digest || c.stale || c.pruned || c.rendered == nil {
		return
	}
	fresh := c.rendered.Manifest(c.merged.MachineConfigs)
	for i := range fresh.Entries {
		st, err := fstree.BaseState(c.root, fresh.Entries[i])
		if err != nil {
			c.add(RuleRenderFailure, c.sourceOf(fresh.Entries[i].Source), fresh.Entries[i].Path, "reading the base: %v", err)
			return
		}
		fresh.Entries[i].Base = st
	}
	embedded := map[string]manifest.Entry{}
	for _, e := range m.Entries {
		embedded[e.Path] = e
	}
	for _, f := range fresh.Entries {
		e, ok := embedded[f.Path]
		delete(embedded, f.Path)
		src := c.sourceOf(f.Source)
		switch {
		case !ok:
			c.add(RuleManifestDrift, src, f.Path, "a fresh render of the MachineConfigs owns %s %s, which the embedded manifest does not record", f.Type, f.Path)
		default:
			if d := manifestDiffers(e, f); len(d) > 0 {
				c.add(RuleManifestDrift, src, f.Path, "the embedded manifest records %s differently from a fresh render of the MachineConfigs against the base (%s)", f.Path, strings.Join(d, ", "))
			}
		}
	}
	for _, p := range sortedKeys(embedded) {
		e := embedded[p]
		c.add(RuleManifestDrift, c.sourceOf(e.Source), p, "the embedded manifest records %s %s, which a fresh render of the MachineConfigs does not own", e.Type, p)
	}
	c.unitDrift(m.Units, fresh.Units)
}

// manifestDiffers lists the fields in which two records of one owned path
// differ: the record's own fields, then the filesystem attributes
// (manifest.Compare, naming a file's content "digest" as the record does).
func manifestDiffers(a, b manifest.Entry) []string {
	var d []string
	add := func(attr string, differs bool) {
		if differs {
			d = append(d, attr)
		}
	}
	add("resolvedPath", a.ResolvedPath != b.ResolvedPath)
	add("size", a.Size != b.Size)
	for _, attr := range manifest.Compare(a, b) {
		if attr == manifest.AttrContent {
			attr = "digest"
		}
		add(string(attr), true)
	}
	add("source", a.Source != b.Source)
	add("base", fmt.Sprint(a.Base) != fmt.Sprint(b.Base))
	return d
}

func (c *checker) unitDrift(embedded, fresh []manifest.Unit) {
	had := map[string]manifest.Unit{}
	for _, u := range embedded {
		had[u.Name] = u
	}
	for _, u := range fresh {
		e, ok := had[u.Name]
		delete(had, u.Name)
		if !ok || e != u {
			c.add(RuleManifestDrift, c.sourceOf(u.Source), path.Join("/etc/systemd/system", u.Name),
				"the embedded manifest records unit %s as %q, a fresh render as %q", u.Name, e.Enablement, u.Enablement)
		}
	}
	for _, n := range sortedKeys(had) {
		c.add(RuleManifestDrift, c.sourceOf(had[n].Source), path.Join("/etc/systemd/system", n),
			"the embedded manifest records unit %s, which a fresh render does not", n)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// predictRevert predicts the revert of the owned paths to the base; for
// an image built by others, of those derived from the MachineConfigs
// against the image's own tree. A prediction that cannot be made skips
// MCB007 and returns false.
func (c *checker) predictRevert(ctx context.Context) ([]revert.Entry, bool) {
	var entries []revert.Entry
	var err error
	if c.image != nil && c.image.builtByOthers {
		owned, derr := revert.Derive(ctx, c.renderInput(), c.image.tree, c.root)
		if derr != nil {
			c.skip(RuleRevertClobber, "the owned paths could not be derived for the image built by others: "+derr.Error())
			return nil, false
		}
		entries, err = revert.PredictDerived(ctx, owned, c.image.tree, c.root)
	} else {
		m := c.ownedManifest()
		if m == nil {
			c.skip(RuleRevertClobber, "the MachineConfigs could not be rendered")
			return nil, false
		}
		entries, err = revert.Predict(ctx, m, c.root)
	}
	if err != nil {
		c.skip(RuleRevertClobber, "the base could not be read: "+err.Error())
		return nil, false
	}
	return entries, true
}

// revert reports what a revert to the base clobbers (MCB007).
func (c *checker) revert(ctx context.Context) {
	if c.base == nil {
		return
	}
	entries, ok := c.predictRevert(ctx)
	if !ok {
		return
	}
	var paths []string
	count := map[revert.Outcome]int{}
	mcs := map[string]bool{}
	for _, e := range entries {
		if e.Clobbered {
			paths = append(paths, e.Path)
			count[e.Outcome]++
			mcs[e.Source.MachineConfig] = true
		}
	}
	if len(paths) == 0 {
		return
	}
	sort.Strings(paths)
	var src machineconfig.Source
	if len(mcs) == 1 {
		name := sortedKeys(mcs)[0]
		src = machineconfig.Source{File: c.fileOf(name), MachineConfig: name}
	}
	var parts []string
	for _, o := range []revert.Outcome{revert.Removed, revert.Reverted, revert.Restored, revert.Lost} {
		if count[o] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", o, count[o]))
		}
	}
	f := c.add(RuleRevertClobber, src, "", "a revert to the base %s clobbers %d of %d owned paths (%s): a node must rewrite them after the rebase (mcbake plan)",
		c.base.ref, len(paths), len(entries), strings.Join(parts, ", "))
	if f == nil {
		return
	}
	f.Paths = paths
	if c.strict {
		f.Severity = Warning
	}
}
