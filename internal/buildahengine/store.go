package buildahengine

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/containers/image/v5/image"
	"github.com/containers/image/v5/manifest"
	istorage "github.com/containers/image/v5/storage"
	"github.com/containers/image/v5/transports/alltransports"
	"github.com/containers/image/v5/types"
	"github.com/containers/storage"
	"github.com/opencontainers/go-digest"
)

// openStore opens the store s names and makes it the one that
// containers-storage: references (the FROM of a Containerfile, the output)
// resolve in.
func openStore(s Store) (storage.Store, error) {
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

// shutdown unmounts whatever the build left mounted and releases the store.
func shutdown(store storage.Store) error {
	if _, err := store.Shutdown(true); err != nil {
		return fmt.Errorf("shutting down container storage: %w", err)
	}
	return nil
}

// readBack reads the image written to output and returns its manifest
// digest and its layers' diff IDs.
func readBack(ctx context.Context, store storage.Store, output string, sys *types.SystemContext) (_ string, _ []digest.Digest, err error) {
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
	img, err := image.FromUnparsedImage(ctx, sys, image.UnparsedInstance(src, nil))
	if err != nil {
		return "", nil, err
	}
	cfg, err := img.OCIConfig(ctx)
	if err != nil {
		return "", nil, err
	}
	return d.String(), cfg.RootFS.DiffIDs, nil
}

func outputReference(store storage.Store, output string) (types.ImageReference, error) {
	if name, ok := strings.CutPrefix(output, istorage.Transport.Name()+":"); ok {
		return istorage.Transport.ParseStoreReference(store, name)
	}
	return alltransports.ParseImageName(output)
}
