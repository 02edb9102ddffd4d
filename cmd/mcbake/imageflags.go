package main

import (
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/image"
)

// imageFlags are the flags every command that reads or writes images takes.
type imageFlags struct {
	opts      image.Options
	tlsVerify bool
	cacheDir  string
}

func (f *imageFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.opts.SignaturePolicy, "signature-policy", "", "signature policy file (default: the system policy)")
	fl.BoolVar(&f.opts.InsecurePolicy, "insecure-policy", false, "accept any image without a signature policy")
	fl.StringVar(&f.opts.AuthFile, "authfile", "", "registry auth file (default: the usual auth.json)")
	fl.BoolVar(&f.tlsVerify, "tls-verify", true, "verify registry TLS certificates")
	fl.StringVar(&f.opts.Platform, "platform", "", "os/arch[/variant] to pick from a multi-platform image (default: the host's)")
	fl.StringVar(&f.opts.StorageRoot, "storage-root", "", "containers-storage root (default: from storage.conf)")
	fl.StringVar(&f.opts.StorageRunRoot, "storage-runroot", "", "containers-storage run root (default: from storage.conf)")
	fl.StringVar(&f.opts.StorageDriver, "storage-driver", "", "containers-storage driver (default: from storage.conf)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "cache for base indexes and blob info (default: $XDG_CACHE_HOME/mcbake)")
}

// options resolves the flags into image.Options; it also returns the
// cache directory.
func (f *imageFlags) options(cmd *cobra.Command) (image.Options, string, error) {
	o := f.opts
	if cmd.Flags().Changed("tls-verify") {
		v := f.tlsVerify
		o.TLSVerify = &v
	}
	dir := f.cacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return o, "", fmt.Errorf("finding the cache directory (set --cache-dir or XDG_CACHE_HOME): %w", err)
		}
		dir = filepath.Join(base, "mcbake")
	}
	o.CacheDir = filepath.Join(dir, "blobinfo")
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		// The caches only save time: without them a build reads every
		// base layer again (containers/image keeps its blob-info cache in
		// memory then).
		slog.Warn("the cache directory cannot be used; going on without a cache", "dir", dir, "err", err)
		return o, "", nil
	}
	return o, dir, nil
}
