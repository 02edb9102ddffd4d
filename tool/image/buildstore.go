package image

// The store and the types the buildah engine (build/buildah) works with:
// it takes them from here, so that this package stays the only one that
// imports containers/image and containers/storage.

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/opencontainers/go-digest"
	ciimage "go.podman.io/image/v5/image"
	"go.podman.io/image/v5/manifest"
	istorage "go.podman.io/image/v5/storage"
	"go.podman.io/image/v5/transports/alltransports"
	"go.podman.io/image/v5/types"
	"go.podman.io/storage"
	"go.podman.io/storage/pkg/archive"
)

// Store says where a containers-storage store is.
type Store struct {
	// Root and RunRoot are the store's directories. An empty Root means
	// the store configured in storage.conf (for root,
	// /var/lib/containers/storage); an empty RunRoot with a Root means a
	// directory under $XDG_RUNTIME_DIR, /run (root) or the temporary
	// directory.
	Root, RunRoot string
	// Driver is the graph driver; "" = overlay as root and vfs otherwise
	// when Root is set, else storage.conf's.
	Driver string
}

// StoreHandle is an open containers-storage store (ShutdownStore
// releases it); SystemContext says how containers/image reaches
// registries and files; LayerCompression is a layer compression. They are
// the types buildah's API is made of.
type (
	StoreHandle      = storage.Store
	SystemContext    = types.SystemContext
	LayerCompression = archive.Compression
)

// Compression algorithms of a new layer.
const (
	Gzip = "gzip"
	Zstd = "zstd"
)

// CompressionOf is the LayerCompression called name: Gzip (also "") or
// Zstd.
func CompressionOf(name string) (LayerCompression, error) {
	switch name {
	case "", Gzip:
		return archive.Gzip, nil
	case Zstd:
		return archive.Zstd, nil
	}
	return 0, fmt.Errorf("compression %q: want gzip or zstd", name)
}

// OpenStore opens the store s names and makes it the one that
// containers-storage: references (the FROM of a Containerfile, the output)
// resolve in. The caller releases it with ShutdownStore; stores are
// process-wide state, so callers serialise their use.
func OpenStore(s Store) (StoreHandle, error) {
	so, err := storeOptions(s)
	if err != nil {
		return nil, err
	}
	store, err := storage.GetStore(so)
	if err != nil {
		return nil, fmt.Errorf("opening container storage at %s: %w", so.GraphRoot, err)
	}
	istorage.Transport.SetStore(store)
	return store, nil
}

func storeOptions(s Store) (storage.StoreOptions, error) {
	if s.Root == "" {
		so, err := storage.DefaultStoreOptions()
		if err != nil {
			return so, fmt.Errorf("reading storage configuration: %w", err)
		}
		if s.RunRoot != "" {
			so.RunRoot = s.RunRoot
		}
		if s.Driver != "" && s.Driver != so.GraphDriverName {
			so.GraphDriverName, so.GraphDriverOptions = s.Driver, nil
		}
		return so, nil
	}
	so := storage.StoreOptions{GraphRoot: s.Root, RunRoot: s.RunRoot, GraphDriverName: s.Driver}
	if so.RunRoot == "" {
		so.RunRoot = defaultRunRoot()
	}
	if so.GraphDriverName == "" {
		so.GraphDriverName = "vfs"
		if os.Geteuid() == 0 {
			so.GraphDriverName = "overlay"
		}
	}
	return so, nil
}

// defaultRunRoot is a per-user directory that does not survive a reboot
// where the system has one.
func defaultRunRoot() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "mcbake", "buildah")
	}
	if os.Geteuid() == 0 {
		return "/run/mcbake/buildah"
	}
	return filepath.Join(os.TempDir(), "mcbake-buildah-run-"+strconv.Itoa(os.Geteuid()))
}

// ShutdownStore unmounts whatever a build left mounted and releases the
// store.
func ShutdownStore(store StoreHandle) error {
	if _, err := store.Shutdown(true); err != nil {
		return fmt.Errorf("shutting down container storage: %w", err)
	}
	return nil
}

// ReadBack reads the image written to output (a containers-transport
// reference; containers-storage: in store) and returns its manifest digest
// and its layers' diff IDs.
func ReadBack(ctx context.Context, store StoreHandle, output string, sys *SystemContext) (_ digest.Digest, _ []digest.Digest, err error) {
	ref, err := outputReference(store, output)
	if err != nil {
		return "", nil, err
	}
	src, err := ref.NewImageSource(ctx, sys)
	if err != nil {
		return "", nil, err
	}
	defer func() { err = errors.Join(err, src.Close()) }()
	blob, _, err := src.GetManifest(ctx, nil)
	if err != nil {
		return "", nil, err
	}
	d, err := manifest.Digest(blob)
	if err != nil {
		return "", nil, err
	}
	img, err := ciimage.FromUnparsedImage(ctx, sys, ciimage.UnparsedInstance(src, nil))
	if err != nil {
		return "", nil, err
	}
	cfg, err := img.OCIConfig(ctx)
	if err != nil {
		return "", nil, err
	}
	return d, cfg.RootFS.DiffIDs, nil
}

func outputReference(store storage.Store, output string) (types.ImageReference, error) {
	if name, ok := strings.CutPrefix(output, istorage.Transport.Name()+":"); ok {
		return istorage.Transport.ParseStoreReference(store, name)
	}
	return alltransports.ParseImageName(output)
}
