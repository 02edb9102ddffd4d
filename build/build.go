// Package build bakes MachineConfigs into a layered OS image: it indexes
// the base image (streaming its layers once, or reading the cached index),
// renders the MachineConfigs against it, records the ownership manifest
// with the base's state of every owned path, and appends one reproducible
// layer carrying the rendered files and the manifest. The base's layers
// are reused as they are.
package build

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"sort"
	"strings"
	"time"

	"github.com/mcbake/mcbake/internal/base"
	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/images"
	"github.com/mcbake/mcbake/internal/layered"
	"github.com/mcbake/mcbake/internal/machineconfig"
	"github.com/mcbake/mcbake/internal/manifest"
	"github.com/mcbake/mcbake/internal/render"
)

// Engines.
const (
	EngineAppend  = "append"
	EngineBuildah = "buildah"
)

// Options configure a build.
type Options struct {
	// Base and Output are containers-transport references.
	Base, Output   string
	MachineConfigs []*machineconfig.MachineConfig
	// Compression of the new layer: Gzip (default) or Zstd.
	Compression string
	// Timestamp is the mtime of every entry of the new layer and the
	// image's creation time (from --timestamp or SOURCE_DATE_EPOCH).
	Timestamp time.Time
	Images    images.Options
	// CacheDir holds the base index cache ("" = no cache).
	CacheDir string
	// Progress, when set, is told of the bytes read from each base layer.
	Progress func(layer string, total, n int64)
	// Engine is EngineAppend (default) or EngineBuildah;
	// ContainerfileAppend (a file of extra Containerfile instructions)
	// needs the buildah engine.
	Engine, ContainerfileAppend string
}

// Run builds with the engine opts.Engine names.
func Run(ctx context.Context, opts Options) (*Result, error) {
	switch opts.Engine {
	case "", EngineAppend:
		if opts.ContainerfileAppend != "" {
			return nil, errors.New("--containerfile-append needs --engine buildah or --render-only")
		}
		return Image(ctx, opts)
	case EngineBuildah:
		return Buildah(ctx, opts, opts.ContainerfileAppend)
	}
	return nil, fmt.Errorf("--engine %q: want append or buildah", opts.Engine)
}

// Result describes a built image.
type Result struct {
	Digest   string
	Manifest *manifest.Manifest
	// ManifestDigest is the sha256 of the embedded manifest's bytes.
	ManifestDigest string
}

// Image builds the layered image with the append engine.
func Image(ctx context.Context, opts Options) (_ *Result, err error) {
	b, err := base.Open(ctx, opts.Base, opts.baseOptions())
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	p, err := Prepare(b, opts)
	if err != nil {
		return nil, err
	}
	tmp, err := os.MkdirTemp("", "mcbake-build-")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, os.RemoveAll(tmp)) }()
	lf, err := writeLayer(tmp, layerEntries(p.Rendered.Entries, p.extra(), mtime(opts.Timestamp)), opts.Compression)
	if err != nil {
		return nil, fmt.Errorf("writing the new layer: %w", err)
	}
	dgst, err := images.Append(ctx, b.Image, opts.Output, images.AppendOptions{
		Layer: images.NewLayer{Path: lf.path, Digest: lf.digest, DiffID: lf.diffID, Size: lf.size, MediaType: lf.mediaType,
			History: "mcbake build: " + strings.Join(p.names(), ",")},
		Labels:      p.Labels(),
		Annotations: p.Annotations(),
		Created:     mtime(opts.Timestamp),
	}, opts.Images)
	if err != nil {
		return nil, fmt.Errorf("writing %s: %w", opts.Output, err)
	}
	return &Result{Digest: dgst.String(), Manifest: p.Manifest, ManifestDigest: layered.Digest(p.ManifestJSON)}, nil
}

// Prepared is everything a build needs before writing an image: the base,
// its index, the rendering against it and the ownership manifest. Both
// engines start from it.
type Prepared struct {
	BaseRef, BaseDigest string
	Index               *baseindex.Index
	Rendered            *render.Result
	Manifest            *manifest.Manifest
	ManifestJSON        []byte
}

// Prepare renders the MachineConfigs against an opened base and records
// the manifest.
func Prepare(b *base.Image, opts Options) (*Prepared, error) {
	merged := machineconfig.Merge(opts.MachineConfigs)
	res, err := render.Render(merged, base.Root{Index: b.Index})
	if err != nil {
		return nil, err
	}
	m := res.Manifest(merged.MachineConfigs)
	m.Base = &manifest.Image{Reference: portableName(opts.Base), Digest: b.Digest().String()}
	for i := range m.Entries {
		m.Entries[i].Base = base.State(&m.Entries[i], b.Index)
	}
	raw, err := manifest.Marshal(m)
	if err != nil {
		return nil, err
	}
	return &Prepared{BaseRef: opts.Base, BaseDigest: b.Digest().String(), Index: b.Index, Rendered: res, Manifest: m, ManifestJSON: raw}, nil
}

func (o Options) baseOptions() base.Options {
	return base.Options{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress}
}

func (p *Prepared) names() []string {
	var n []string
	for _, mc := range p.Manifest.MachineConfigs {
		n = append(n, mc.Name)
	}
	return n
}

// Labels are the image config labels a build sets.
func (p *Prepared) Labels() map[string]string {
	return map[string]string{
		layered.LabelManifestDigest: layered.Digest(p.ManifestJSON),
		layered.LabelBaseDigest:     p.BaseDigest,
		layered.LabelMachineConfigs: strings.Join(p.names(), ","),
	}
}

// Annotations are the manifest annotations a build sets. The base's name
// is only recorded when it means the same on any machine (see
// portableName): a local path would make the digest depend on where the
// base was and leak it into the image.
func (p *Prepared) Annotations() map[string]string {
	a := map[string]string{
		layered.AnnotationBaseDigest: p.BaseDigest,
	}
	if name := portableName(p.BaseRef); name != "" {
		a[layered.AnnotationBaseName] = name
	}
	return a
}

// extra returns the embedded manifest and the directories it needs that
// neither the base nor the rendering has.
func (p *Prepared) extra() []render.Entry {
	have := map[string]bool{}
	for _, e := range p.Rendered.Entries {
		have[e.Where()] = true
	}
	var out []render.Entry
	for d := path.Dir(layered.ManifestPath); d != "/"; d = path.Dir(d) {
		if _, ok := p.Index.Lookup(strings.TrimPrefix(d, "/")); ok || have[d] {
			continue
		}
		out = append(out, render.Entry{Entry: manifest.Entry{Path: d, Type: manifest.Directory, Mode: 0o755}})
	}
	out = append(out, render.Entry{Entry: manifest.Entry{Path: layered.ManifestPath, Type: manifest.File, Mode: 0o644,
		Size: int64(len(p.ManifestJSON))}, Content: p.ManifestJSON})
	sort.Slice(out, func(i, j int) bool { return out[i].Path < out[j].Path })
	return out
}

// portableName is ref as a name that means the same on any machine, or "".
func portableName(ref string) string {
	r, err := images.ParseReference(ref)
	if err != nil {
		return ""
	}
	return r.Name()
}

func mtime(t time.Time) time.Time {
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t.Truncate(time.Second).UTC()
}
