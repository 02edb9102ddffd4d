// Package buildah is the build engine that runs buildah as a library.
//
// It builds a Containerfile build context with buildah's imagebuildah
// into a containers-transport destination: chroot isolation, an OCI
// manifest, compressed layers, a fixed timestamp, a store of its own, and
// no network backend. Engine plugs it into build.Image. It is the only
// package that imports buildah (github.com/containers/buildah v1.43.0:
// README.md, "Libraries, and why", says why not go.podman.io/buildah); the store and
// the SystemContext it hands to buildah come from package image, the only
// one that imports containers/image and containers/storage.
//
// Programs that call Build must call InitReexec first thing in main (and in
// TestMain): buildah re-executes the program to run RUN steps and to copy
// content into the image's root.
package buildah

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/containers/buildah"
	"github.com/containers/buildah/define"
	"github.com/containers/buildah/imagebuildah"
	"github.com/opencontainers/go-digest"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/tool/image"
)

// InitReexec runs buildah's re-executed helpers. It must be the first thing
// main and TestMain do; when it returns true the process was such a helper
// and must exit.
func InitReexec() bool { return buildah.InitReexec() }

// ErrNoRuntime is returned when the Containerfile has a RUN instruction
// and neither crun nor runc is installed.
var ErrNoRuntime = errors.New("RUN needs an OCI runtime: install crun or runc")

// Options configure Build.
type Options struct {
	// Output is where the image goes, a containers-transport reference:
	// oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE, dir:DIR,
	// containers-storage:NAME (in this build's store) or docker://REF.
	// The parent directory of a file or directory destination must exist.
	Output string
	// Containerfile is the file name within the context directory; ""
	// is "Containerfile".
	Containerfile string

	// Images says how images are read and written: signature policy
	// (buildah takes only a path: see image.Options.PolicyFile), auth,
	// TLS, registries.conf, platform and the blob-info cache.
	Images image.Options

	// Store is the containers-storage store buildah works in.
	Store image.Store
	// BlobDir keeps the base's compressed layer blobs when it is pulled,
	// so that the commit reuses them instead of compressing the base's
	// layers again; "" = none.
	BlobDir string

	// Timestamp is the image's creation time and the mtime of the new
	// layer's entries; the zero time means the current time.
	Timestamp time.Time
	// Compression of the new layer: Gzip (default) or Zstd.
	Compression string
	// Annotations are set on the image manifest.
	Annotations map[string]string
	// BaseDiffIDs, when set, are the diff IDs of the base image the caller
	// prepared the context for: the built image must start with them
	// (ErrBaseChanged), or the FROM resolved to another image.
	BaseDiffIDs []digest.Digest
	// Log receives buildah's step output. When nil it is kept in memory
	// and its last lines are added to a build error.
	Log io.Writer
}

// buildMu serialises Build (see openStore).
var buildMu sync.Mutex

// Build builds the Containerfile of contextDir into opts.Output and
// returns the digest of the written image manifest. It checks up front
// that a Containerfile with RUN has an OCI runtime (ErrNoRuntime). The
// store is shut down (its mounts released) before Build returns.
func Build(ctx context.Context, contextDir string, opts Options) (dgst digest.Digest, err error) {
	// openStore sets the process-wide containers-storage transport's
	// store: builds in one process must not overlap.
	buildMu.Lock()
	defer buildMu.Unlock()
	containerfile := filepath.Join(contextDir, orDefault(opts.Containerfile, "Containerfile"))
	rt, err := checkRuntime(containerfile)
	if err != nil {
		return "", err
	}
	policy, cleanup, err := opts.Images.PolicyFile()
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, cleanup()) }()
	sys, err := opts.Images.SystemContext()
	if err != nil {
		return "", err
	}
	sys.SignaturePolicyPath = policy
	if err := os.MkdirAll(sys.BlobInfoCacheDir, 0o755); err != nil {
		return "", err
	}
	b, err := buildOptions(contextDir, opts, sys, policy, rt)
	if err != nil {
		return "", err
	}
	store, err := image.OpenStore(opts.Store)
	if err != nil {
		return "", err
	}
	defer func() { err = errors.Join(err, image.ShutdownStore(store)) }()
	return runBuild(ctx, store, containerfile, b)
}

// runBuild runs the build, then reads the image back for its digest and
// checks that it is built on the expected base.
func runBuild(ctx context.Context, store image.StoreHandle, containerfile string, b builder) (digest.Digest, error) {
	if b.opts.BlobDir != "" {
		if err := os.MkdirAll(b.opts.BlobDir, 0o700); err != nil {
			return "", err
		}
	}
	if _, _, err := imagebuildah.BuildDockerfiles(ctx, store, b.options, containerfile); err != nil {
		return "", b.log.wrap(err)
	}
	d, diffIDs, err := image.ReadBack(ctx, store, b.opts.Output, b.options.SystemContext)
	if err != nil {
		return "", fmt.Errorf("reading back %s: %w", b.opts.Output, err)
	}
	if err := checkBase(diffIDs, b.opts.BaseDiffIDs); err != nil {
		return "", fmt.Errorf("%s: %w", b.opts.Output, err)
	}
	return d, nil
}

// ErrBaseChanged is returned when the built image does not start with the
// layers the caller expects of its base.
var ErrBaseChanged = errors.New("the image was not built on the expected base")

func checkBase(got, want []digest.Digest) error {
	if len(want) == 0 {
		return nil
	}
	if len(got) < len(want) || !slices.Equal(got[:len(want)], want) {
		return fmt.Errorf("%w: its layers do not start with the base's (did the base change during the build?)", ErrBaseChanged)
	}
	return nil
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}

// builder is one build: imagebuildah's options, the caller's, and where
// buildah's output goes.
type builder struct {
	options define.BuildOptions
	opts    Options
	log     *buildLog
}

// buildOptions are imagebuildah's options for one build.
func buildOptions(contextDir string, opts Options, sys *image.SystemContext, policy, rt string) (builder, error) {
	compression, err := image.CompressionOf(opts.Compression)
	if err != nil {
		return builder{}, err
	}
	log := logFor(opts.Log)
	bo := define.BuildOptions{
		ContextDirectory:        contextDir,
		PullPolicy:              define.PullAlways,
		Isolation:               define.IsolationChroot,
		Runtime:                 rt,
		Compression:             compression,
		Output:                  opts.Output,
		Out:                     log,
		Err:                     log,
		ReportWriter:            log,
		SignaturePolicyPath:     policy,
		OutputFormat:            define.OCIv1ImageManifest,
		SystemContext:           sys,
		NamespaceOptions:        define.NamespaceOptions{{Name: "network", Host: true}},
		NetworkInterface:        noNetwork{},
		CommonBuildOpts:         &define.CommonBuildOptions{Ulimit: currentUlimits()},
		Args:                    map[string]string{},
		RemoveIntermediateCtrs:  true,
		ForceRmIntermediateCtrs: true,
		BlobDirectory:           opts.BlobDir,
		Annotations:             annotations(opts.Annotations),
	}
	if !opts.Timestamp.IsZero() {
		ts := opts.Timestamp.UTC()
		bo.Timestamp = &ts
	}
	if sys.OSChoice != "" {
		bo.Platforms = []struct{ OS, Arch, Variant string }{{sys.OSChoice, sys.ArchitectureChoice, sys.VariantChoice}}
	}
	return builder{options: bo, opts: opts, log: log}, nil
}

// currentUlimits are this process's open-file and process limits, for
// RUN: buildah otherwise raises them to 1048576, which fails without
// CAP_SYS_RESOURCE.
func currentUlimits() []string {
	var out []string
	for name, res := range map[string]int{"nofile": unix.RLIMIT_NOFILE, "nproc": unix.RLIMIT_NPROC} {
		var l unix.Rlimit
		if err := unix.Getrlimit(res, &l); err == nil {
			out = append(out, fmt.Sprintf("%s=%d:%d", name, int64(l.Cur), int64(l.Max)))
		}
	}
	sort.Strings(out)
	return out
}

func annotations(m map[string]string) []string {
	var out []string
	for k, v := range m {
		out = append(out, k+"="+v)
	}
	sort.Strings(out)
	return out
}
