// Package build bakes MachineConfigs into a layered OS image.
//
// It indexes the base image (streaming its layers once, or reading the
// cached index), renders the MachineConfigs against it, records the
// ownership manifest with the base's state of every owned path, and
// appends one reproducible layer carrying the rendered files and the
// manifest. The base's layers are reused as they are.
package build

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"path"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/opencontainers/go-digest"
)

// Options are what every operation of a build reads: the base and what
// goes onto it. Prepare takes them; ImageOptions (Image) and
// RenderOptions (RenderOnly) add what their operation writes.
type Options struct {
	// Base is a containers-transport reference.
	Base           string
	MachineConfigs []*machineconfig.MachineConfig
	// LoadMachineConfigs, when set, loads the MachineConfigs (replacing
	// MachineConfigs) while the base is opened: on a warm build the two
	// take about as long, and neither needs the other. Its error wins
	// over the base's, and cancels the opening.
	LoadMachineConfigs func() ([]*machineconfig.MachineConfig, error)
	// Timestamp is the mtime of every entry of the new layer and the
	// image's creation time (from --timestamp or SOURCE_DATE_EPOCH); when
	// zero, the base's creation time (see Prepared.Time).
	Timestamp time.Time
	Images    image.Options
	// CacheDir holds the base index cache and the new layers compressed
	// before ("" = no cache).
	CacheDir string
	// Progress, when set, is told of the bytes read from each base layer.
	Progress func(layer string, total, n int64)
	// SharedIndex says where the base's index is published and read
	// from (image.SharedIndex).
	SharedIndex image.SharedIndex
	// Labels and Annotations are added to the image config's labels and
	// the manifest's annotations (--label, --annotation); mcbake's own
	// (io.mcbake.*, org.opencontainers.image.base.*) cannot be overridden.
	Labels, Annotations map[string]string
	// Guard, when set, is the revert guard's node binary: the guard
	// (guard.Entries) goes into the new layer, recorded in the manifest
	// as mcbake's own (docs/node.md, The revert guard). With no
	// MachineConfigs, the layer carries only the guard, and no manifest:
	// the image stays one built by others, with a guard. It must run on
	// the image's architecture (an ELF binary for another is refused).
	Guard []byte
	// GuardFor, when set, gives the guard's binary for an image of GOARCH
	// arch (each platform of a multi-platform build has its own), in
	// place of Guard.
	GuardFor func(arch string) ([]byte, error)

	// prefetched, when set, is the guard's entries being computed
	// (prefetchGuard).
	prefetched *guardPrefetch
}

// ImageOptions configure an image build (Image): the inputs, the
// destination image and the engine that writes it.
type ImageOptions struct {
	Options
	// Output is a containers-transport reference.
	Output string
	// Compression of the new layer: Gzip (default) or Zstd.
	Compression string
	// Engine builds the image from its Containerfile context; nil is
	// the append engine, which appends the layer itself.
	Engine Engine
	// Platforms, when set, builds one image per platform of the base
	// ("os/arch[/variant]", or AllPlatforms alone for every platform the
	// base's image list names) and writes them under one image list (an
	// OCI image index): the append engine only. Images.Platform is then
	// ignored.
	Platforms []string
	// PushProgress, when set, is told of every blob the append engine
	// writes to the destination or finds there already.
	PushProgress func(image.BlobProgress)
}

// RenderOptions configure a render-only build (RenderOnly): the inputs
// and the directory the build context goes to. It writes no image: of
// Images, the destination's settings (Destination, Sign) apply only to
// the index it publishes to SharedIndex.Repo.
type RenderOptions struct {
	Options
	// Dir is the directory of the build context (not an image reference).
	Dir string
	// ContainerfileAppend is a file of extra Containerfile instructions
	// (RPM installs, say) that ends the Containerfile ("" = none).
	ContainerfileAppend string
}

// Engine builds the image of a prepared build from its Containerfile
// context instead of appending the layer itself, e.g. build/buildah's.
// Image calls it with the base closed (an engine opens the base again,
// possibly in the same store).
type Engine interface {
	// Build writes the image of p to opts.Output and returns the digest
	// of its manifest. The image must start with p.BaseDiffIDs.
	Build(ctx context.Context, p *Prepared, opts ImageOptions) (digest.Digest, error)
}

// Image builds the layered image with opts.Engine, or with the append
// engine when nil: one image, or with opts.Platforms an image list of
// one image per platform (the append engine only).
func Image(ctx context.Context, opts ImageOptions) (*Result, error) {
	if err := opts.checkOutput(); err != nil {
		return nil, err
	}
	if opts.Engine == nil {
		return appendImage(ctx, opts)
	}
	if len(opts.Platforms) > 0 {
		return nil, errors.New("a multi-platform build (an index) needs the append engine")
	}
	// Other engines read and write with one configuration (buildah).
	if opts.Images.Sign != (image.Signing{}) || opts.Images.Destination != (image.Registry{}) {
		return nil, errors.New("signing and destination registry settings need the append engine")
	}
	p, err := prepareClosed(ctx, &opts.Options)
	if err != nil {
		return nil, err
	}
	dgst, err := opts.Engine.Build(ctx, p, opts)
	if err != nil {
		return nil, err
	}
	return &Result{Digest: dgst, Manifest: p.Manifest, ManifestDigest: digest.FromBytes(p.ManifestJSON)}, nil
}

// checkOutput refuses, before the base is opened (for a registry base,
// before it is downloaded), what would fail only once the image is
// written: an output that is not an image reference, a compression
// mcbake does not write, signing options that cannot work.
func (o ImageOptions) checkOutput() error {
	if _, err := image.ParseReference(o.Output); err != nil {
		return fmt.Errorf("output: %w", err)
	}
	if _, err := compressorID(o.Compression); err != nil {
		return err
	}
	return o.Images.Sign.Check()
}

// RenderOnly is `mcbake build --render-only`: it renders the
// MachineConfigs against opts.Base and writes the build context of
// WriteContext into the directory opts.Dir, for buildah, podman,
// OpenShift Builds or Konflux to build.
func RenderOnly(ctx context.Context, opts RenderOptions) (*Prepared, error) {
	if _, err := image.ParseReference(opts.Dir); err == nil {
		return nil, fmt.Errorf("output %q is an image reference: a render-only build writes its Containerfile and context to a directory", opts.Dir)
	}
	p, err := prepareClosed(ctx, &opts.Options)
	if err != nil {
		return nil, err
	}
	if err := WriteContext(opts.Dir, p, opts.ContainerfileAppend); err != nil {
		return nil, fmt.Errorf("writing the build context %s: %w", opts.Dir, err)
	}
	return p, nil
}

// prepareClosed opens and indexes the base, prepares the build and closes
// the base again. opts.MachineConfigs are the loaded ones afterwards, for
// an engine.
func prepareClosed(ctx context.Context, opts *Options) (p *Prepared, err error) {
	b, err := openBase(ctx, opts, "")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	return Prepare(ctx, b, *opts)
}

// Result describes a built image.
type Result struct {
	// Digest is the image's manifest digest, or the image list's.
	Digest   digest.Digest
	Manifest *manifest.Manifest
	// ManifestDigest is the sha256 of the embedded manifest's bytes.
	ManifestDigest digest.Digest
	// Platforms are the images of a multi-platform build, in the list's
	// order; the
	// fields above are then the first one's (Digest excepted).
	Platforms []PlatformResult
}

// PlatformResult is one image of a multi-platform build.
type PlatformResult struct {
	Platform       string
	Manifest       *manifest.Manifest
	ManifestDigest digest.Digest
}

// appendImage builds the layered image with the append engine: one
// image, or with opts.Platforms an image list of one image per platform.
func appendImage(ctx context.Context, opts ImageOptions) (_ *Result, err error) {
	if len(opts.Platforms) > 0 {
		return multiPlatform(ctx, opts)
	}
	opts.SharedIndex.Later = true // published once the image is written
	opts.prefetchGuard()
	tmpDir, err := atomicdir.MkdirTemp("", "mcbake-build-")
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, tmpDir.RemoveAll()) }()
	ahead := opts.guardAhead(ctx, tmpDir.Path)
	defer ahead.stop()
	b, err := openBase(ctx, &opts.Options, opts.Output)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	p, ao, err := prepareAppend(ctx, b, opts, tmpDir.Path, ahead)
	if err != nil {
		return nil, err
	}
	dgst, err := image.Append(ctx, b.Image, opts.Output, ao, opts.Images)
	if err != nil {
		return nil, err // Append names the destination
	}
	b.PublishIndex(ctx)
	return &Result{Digest: dgst, Manifest: p.Manifest, ManifestDigest: digest.FromBytes(p.ManifestJSON)}, nil
}

// openBase opens opts.Base while opts.LoadMachineConfigs, when set, loads
// opts.MachineConfigs (image.OpenBaseWhile): the loading, the longer of
// the two on a warm cache, runs on the calling goroutine. A loading
// error cancels the opening and is the one returned.
func openBase(ctx context.Context, opts *Options, dest string) (*image.Base, error) {
	bo := opts.baseOptions()
	bo.MountInto = dest
	load := opts.LoadMachineConfigs
	if load == nil {
		return image.OpenBase(ctx, opts.Base, bo)
	}
	opts.LoadMachineConfigs = nil
	return image.OpenBaseWhile(ctx, opts.Base, bo, func() (err error) {
		opts.MachineConfigs, err = load()
		return err
	})
}

// loadMachineConfigs runs opts.LoadMachineConfigs, when set, before a
// build that opens its base more than once.
func (o *Options) loadMachineConfigs() error {
	if o.LoadMachineConfigs == nil {
		return nil
	}
	var err error
	o.MachineConfigs, err = o.LoadMachineConfigs()
	o.LoadMachineConfigs = nil
	return err
}

// prepareAppend prepares the build on b and writes its new layers into
// tmp, or takes the guard's from ahead (nil: none): what image.Append
// needs.
func prepareAppend(ctx context.Context, b *image.Base, opts ImageOptions, tmp string, ahead *guardAhead) (*Prepared, image.AppendOptions, error) {
	p, err := Prepare(ctx, b, opts.Options)
	if err != nil {
		return nil, image.AppendOptions{}, err
	}
	layers, err := p.layers()
	if err != nil {
		return nil, image.AppendOptions{}, err
	}
	ao := image.AppendOptions{
		Labels:      p.Labels(),
		Annotations: p.Annotations(),
		Created:     p.Time,
		Progress:    opts.PushProgress,
	}
	for _, l := range layers {
		if l.guardDirs != nil {
			if lf, up := ahead.take(ctx, p.Own, l.guardDirs); lf != nil {
				ao.Layers = append(ao.Layers, lf.newLayer(l.history))
				if up != nil {
					ao.Ahead = append(ao.Ahead, up)
				}
				continue
			}
		}
		lf, err := writeLayer(tmp, opts.CacheDir, l.entries, opts.Compression)
		if err != nil {
			return nil, image.AppendOptions{}, fmt.Errorf("writing the %s layer: %w", l.what, err)
		}
		ao.Layers = append(ao.Layers, lf.newLayer(l.history))
	}
	return p, ao, nil
}

// guardAhead is the revert guard's layer written, and uploaded to a
// registry destination (image.UploadAhead), while the build opens the
// base (docs/design.md, "The revert guard's layer"). It is written for
// the guard's entries prefetchGuard computes and the directories the
// guard's layer has on a systemd OS's base (guardDirsAhead); a build
// whose guard or base differs writes its own.
type guardAhead struct {
	done   chan struct{}
	cancel context.CancelFunc
	own    []render.Entry
	lf     *layerFile
	upload *image.Upload
}

// guardDirsAhead are the directories the guard's layer has when the base
// has /usr/libexec and /usr/lib/systemd/system/multi-user.target.wants,
// as every systemd-based OS does.
var guardDirsAhead = []string{path.Dir(guard.BinaryPath)}

// noGuardAhead turns guardAhead off, for the tests.
var noGuardAhead bool

// guardAhead starts writing the guard's layer into tmp (nil: the build
// has no guard, or it is not known yet).
func (o ImageOptions) guardAhead(ctx context.Context, tmp string) *guardAhead {
	g := o.prefetched
	if g == nil || noGuardAhead {
		return nil
	}
	ctx, cancel := context.WithCancel(ctx)
	a := &guardAhead{done: make(chan struct{}), cancel: cancel}
	go func() {
		defer close(a.done)
		own, err := g.get()
		if err != nil || own == nil {
			return // the build reports it
		}
		lf, err := writeLayer(tmp, o.CacheDir, guardLayerEntries(own, guardDirsAhead), o.Compression)
		if err != nil {
			slog.Debug("the revert guard's layer was not written ahead", "err", err)
			return
		}
		a.own, a.lf = own, lf
		if o.Images.Sign == (image.Signing{}) { // a signing copy uploads everything itself
			a.upload = image.UploadAhead(ctx, o.Output, lf.newLayer(guard.LayerHistory), o.Images)
		}
	}()
	return a
}

// take returns the layer written ahead, and its upload (nil: none), when
// it is the one for own with dirs; nil when it is not, and then cancels
// the upload (stop waits for it).
func (a *guardAhead) take(ctx context.Context, own []render.Entry, dirs []string) (*layerFile, *image.Upload) {
	if a == nil {
		return nil, nil
	}
	select {
	case <-a.done:
	case <-ctx.Done():
		return nil, nil
	}
	if a.lf == nil || len(own) == 0 || len(a.own) != len(own) || a.own[0].Digest != own[0].Digest || !slices.Equal(dirs, guardDirsAhead) {
		a.upload.Cancel() // not this build's layer: it would only take the copy's bandwidth (stop waits for it)
		return nil, nil
	}
	return a.lf, a.upload
}

// stop stops the writing and the upload, and waits for them.
func (a *guardAhead) stop() {
	if a == nil {
		return
	}
	a.cancel()
	<-a.done
	a.upload.Stop()
}

// Prepared is everything a build needs before writing an image: the base,
// its tree, the rendering against it and the ownership manifest. Every
// engine starts from it.
type Prepared struct {
	BaseRef    string
	BaseDigest digest.Digest
	// BaseDiffIDs are the base's layers' diff IDs: the built image starts
	// with them.
	BaseDiffIDs []digest.Digest
	Tree        fstree.Tree
	Rendered    *render.Result
	// Manifest and ManifestJSON are nil for a guard-only build.
	Manifest     *manifest.Manifest
	ManifestJSON []byte
	// Own are mcbake's own files (the revert guard), with their content.
	Own []render.Entry
	// GuardDigest is the digest of the guard's binary, when it has one.
	GuardDigest digest.Digest
	// Time is the new image's creation time and its layer's mtime:
	// Options.Timestamp, else the base's creation time, so that a build
	// is reproducible without SOURCE_DATE_EPOCH and `podman images`
	// does not show it created in 1970 (docs/usage.md, Building images).
	Time time.Time
	// ExtraLabels and ExtraAnnotations are the caller's (Options.Labels,
	// Options.Annotations), included in Labels and Annotations.
	ExtraLabels, ExtraAnnotations map[string]string
}

// guardFor is the revert guard's node binary for an image of GOARCH arch:
// GuardFor's, else Guard; nil for none. It must run on arch.
func (o Options) guardFor(arch string) ([]byte, error) {
	bin := o.Guard
	if o.GuardFor != nil {
		var err error
		if bin, err = o.GuardFor(arch); err != nil {
			return nil, err
		}
	}
	if bin == nil {
		return nil, nil
	}
	return bin, guard.CheckArch(bin, arch)
}

// ownEntries are mcbake's own files for an image of GOARCH arch (the
// guard's, guard.Entries; nil for none): prefetchGuard's when it
// started on arch.
func (o Options) ownEntries(arch string) ([]render.Entry, error) {
	if g := o.prefetched; g != nil && g.arch == arch {
		return g.get()
	}
	return o.computeOwn(arch)
}

func (o Options) computeOwn(arch string) ([]render.Entry, error) {
	bin, err := o.guardFor(arch)
	if err != nil || bin == nil {
		return nil, err
	}
	return guard.Entries(bin), nil
}

// guardPrefetch is the guard's entries for arch, computed once.
type guardPrefetch struct {
	arch string
	get  func() ([]render.Entry, error)
}

// prefetchGuard starts computing the guard's entries for the platform
// asked for, else the host's architecture, the base's nearly always, in
// the background: copying the
// 12 MB binary out of mcbake's own and hashing it take about 35 ms, which
// a build then spends while it waits for the base's manifest, config and
// index (a cold registry build) or loads the MachineConfigs (docs/design.md,
// "The warm path"). An image of another architecture computes its own.
func (o *Options) prefetchGuard() {
	if o.Guard == nil && o.GuardFor == nil {
		return
	}
	c, arch := *o, runtime.GOARCH
	if p, err := o.Images.PlatformSpec(); err == nil {
		arch = p.Architecture // an error is the open's to report
	}
	g := &guardPrefetch{arch: arch, get: sync.OnceValues(func() ([]render.Entry, error) { return c.computeOwn(arch) })}
	o.prefetched = g
	go func() { _, _ = g.get() }()
}

// Prepare renders the MachineConfigs against an opened base and records
// the manifest, with the base's state of every owned path. With none,
// and opts.Guard, it prepares a guard-only build. Once ctx is done it
// stops rendering and returns ctx's error.
func Prepare(ctx context.Context, b *image.Base, opts Options) (*Prepared, error) {
	tree := b.Tree()
	p := &Prepared{BaseRef: opts.Base, BaseDigest: b.Digest(), Tree: tree, Time: opts.timeFor(b.Image.Config().Created)}
	p.ExtraLabels, p.ExtraAnnotations = maps.Clone(opts.Labels), maps.Clone(opts.Annotations)
	if err := p.checkExtra(); err != nil {
		return nil, err
	}
	for _, l := range b.Layers() {
		p.BaseDiffIDs = append(p.BaseDiffIDs, l.DiffID)
	}
	own, err := opts.ownEntries(b.Image.Config().Architecture)
	if err != nil {
		return nil, err
	}
	if own != nil {
		p.Own = own
		p.GuardDigest = own[0].Digest
	}
	if len(opts.MachineConfigs) == 0 {
		if own == nil {
			return nil, errors.New("no MachineConfig given (-f), and no revert guard to add")
		}
		p.Rendered = &render.Result{}
		return p, nil
	}
	merged := machineconfig.Merge(opts.MachineConfigs)
	res, err := render.Render(ctx, merged, tree)
	if err != nil {
		return nil, err
	}
	m := res.Manifest(merged.MachineConfigs)
	m.Base = &manifest.ImageRef{Reference: portableName(opts.Base), Digest: b.Digest()}
	for i := range m.Entries {
		if m.Entries[i].Base, err = fstree.BaseState(tree, m.Entries[i]); err != nil {
			return nil, fmt.Errorf("%s: %w", m.Entries[i].Path, err)
		}
	}
	for _, e := range p.Own {
		e.Content = nil
		m.Own = append(m.Own, e.Entry)
	}
	raw, err := manifest.Marshal(m)
	if err != nil {
		return nil, err
	}
	p.Rendered, p.Manifest, p.ManifestJSON = res, m, raw
	return p, nil
}

func (o Options) baseOptions() image.BaseOptions {
	return image.BaseOptions{Images: o.Images, CacheDir: o.CacheDir, Progress: o.Progress, Shared: o.SharedIndex}
}

func (p *Prepared) names() []string {
	if p.Manifest == nil {
		return []string{"revert guard"}
	}
	var n []string
	for _, mc := range p.Manifest.MachineConfigs {
		n = append(n, mc.Name)
	}
	return n
}

// Labels are the image config labels a build sets.
func (p *Prepared) Labels() map[string]string {
	l := maps.Clone(p.ExtraLabels)
	if l == nil {
		l = map[string]string{}
	}
	l[image.LabelBaseDigest] = p.BaseDigest.String()
	if p.GuardDigest != "" {
		l[guard.Label] = p.GuardDigest.String()
	}
	if p.Manifest != nil {
		l[image.LabelManifestDigest] = digest.FromBytes(p.ManifestJSON).String()
		l[image.LabelMachineConfigs] = strings.Join(p.names(), ",")
	}
	return l
}

// Annotations are the manifest annotations a build sets. The base's name
// is only recorded when it means the same on any machine (see
// portableName): a local path would make the digest depend on where the
// base was and leak it into the image.
func (p *Prepared) Annotations() map[string]string {
	a := maps.Clone(p.ExtraAnnotations)
	if a == nil {
		a = map[string]string{}
	}
	a[image.AnnotationBaseDigest] = p.BaseDigest.String()
	if name := portableName(p.BaseRef); name != "" {
		a[image.AnnotationBaseName] = name
	}
	return a
}

// checkExtra refuses caller labels and annotations that would replace
// mcbake's own.
func (p *Prepared) checkExtra() error {
	for _, m := range []struct {
		what  string
		extra map[string]string
	}{{"label", p.ExtraLabels}, {"annotation", p.ExtraAnnotations}} {
		for k := range m.extra {
			if strings.HasPrefix(k, "io.mcbake.") || strings.HasPrefix(k, "org.opencontainers.image.base.") {
				return fmt.Errorf("%s %s is mcbake's own and cannot be set", m.what, k)
			}
		}
	}
	return nil
}

// newLayer is what one of a build's new layers holds.
type newLayer struct {
	what    string // for errors: "revert guard", "MachineConfig"
	history string // its history entry's created_by
	entries []tarEntry
	// guardDirs, for the guard's layer, are the directories it has.
	guardDirs []string
}

// guardLayerEntries are the entries of the guard's layer: the guard's
// own entries and the directories dirs, with the Unix epoch as mtime.
func guardLayerEntries(own []render.Entry, dirs []string) []tarEntry {
	return layerEntries(append(dirEntries(dirs), own...), nil, time.Unix(0, 0).UTC())
}

// dirEntries are directories at paths, mode 0755, root's.
func dirEntries(paths []string) []render.Entry {
	var out []render.Entry
	for _, d := range paths {
		out = append(out, render.Entry{Entry: manifest.Entry{Path: d, Type: manifest.Directory, Mode: 0o755}})
	}
	return out
}

// layers are the build's new layers, bottom first (docs/design.md, "The
// revert guard's layer"): the revert guard's files, when it has them, in a layer of
// their own, with the Unix epoch as their mtime, so that it is the same
// layer in every image built with the same guard binary; then the
// rendered files and the embedded manifest, with p.Time, unless there are
// none (a guard-only build). Each carries the parent directories of its
// files that neither the base nor a layer below has.
func (p *Prepared) layers() ([]newLayer, error) {
	have := map[string]bool{}
	var out []newLayer
	if len(p.Own) > 0 {
		dirs, err := p.missingParents(p.Own, have)
		if err != nil {
			return nil, err
		}
		out = append(out, newLayer{what: "revert guard", history: guard.LayerHistory, guardDirs: dirs,
			entries: guardLayerEntries(p.Own, dirs)})
	}
	if p.Manifest == nil && len(p.Rendered.Entries) == 0 {
		return out, nil
	}
	for _, e := range p.Rendered.Entries {
		have[e.Where()] = true
	}
	var own []render.Entry
	if p.Manifest != nil {
		own = append(own, render.Entry{Entry: manifest.Entry{Path: image.ManifestPath, Type: manifest.File, Mode: 0o644,
			Size: int64(len(p.ManifestJSON)), Digest: digest.FromBytes(p.ManifestJSON)}, Content: p.ManifestJSON})
	}
	dirs, err := p.missingParents(own, have)
	if err != nil {
		return nil, err
	}
	out = append(out, newLayer{what: "MachineConfig", history: "mcbake build: " + strings.Join(p.names(), ","),
		entries: layerEntries(p.Rendered.Entries, append(dirEntries(dirs), own...), p.Time)})
	return out, nil
}

// missingParents returns the parent directories of entries that neither
// the base nor have has, sorted (never nil), and adds them to have.
func (p *Prepared) missingParents(entries []render.Entry, have map[string]bool) ([]string, error) {
	out := []string{}
	for _, e := range entries {
		have[e.Path] = true
		for d := path.Dir(e.Path); d != "/" && !have[d]; d = path.Dir(d) {
			if _, ok, err := p.Tree.Lstat(d); err != nil {
				return nil, err
			} else if ok {
				break
			}
			have[d] = true
			out = append(out, d)
		}
	}
	slices.Sort(out)
	return out, nil
}

// portableName is ref as a name that means the same on any machine, or "".
func portableName(ref string) string {
	r, err := image.ParseReference(ref)
	if err != nil {
		return ""
	}
	return r.Name()
}

// timeFor is the build's timestamp as images record it, in whole
// seconds, UTC: o.Timestamp, else base (the base's creation time), else
// the Unix epoch.
func (o Options) timeFor(base *time.Time) time.Time {
	t := o.Timestamp
	if t.IsZero() && base != nil {
		t = *base
	}
	if t.IsZero() {
		return time.Unix(0, 0).UTC()
	}
	return t.Truncate(time.Second).UTC()
}
