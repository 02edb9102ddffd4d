package image

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	_ "github.com/mattn/go-sqlite3" // containers/image's blob-info cache driver
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/pkg/blobinfocache"
	"go.podman.io/image/v5/signature"
	"go.podman.io/image/v5/types"
	"golang.org/x/sys/unix"
)

// blobInfoCacheFile is the file containers/image keeps its blob-info
// cache in, in SystemContext.BlobInfoCacheDir.
const blobInfoCacheFile = "blob-info-cache-v1.sqlite"

// blobInfoCache is blobinfocache.DefaultCache(sys), its database in WAL
// mode (walBlobInfoCache).
func blobInfoCache(sys *types.SystemContext) types.BlobInfoCache {
	walBlobInfoCacheOf(sys)
	return blobinfocache.DefaultCache(sys)
}

// openBlobInfoCache is blobInfoCache(sys), opened for a run of records
// and lookups (containers/image's caches open their database once
// between Open and Close, else once a call); done closes it.
func openBlobInfoCache(sys *types.SystemContext) (cache types.BlobInfoCache, done func()) {
	cache = blobInfoCache(sys)
	if c, ok := cache.(interface{ Open() }); ok {
		c.Open()
	}
	if c, ok := cache.(interface{ Close() }); ok {
		return cache, c.Close
	}
	return cache, func() {}
}

// copyImageWAL is copy.Image, the blob-info cache it opens (DestinationCtx's)
// in WAL mode first.
func copyImageWAL(ctx context.Context, pc *signature.PolicyContext, dest, src types.ImageReference, co *copy.Options) ([]byte, error) {
	walBlobInfoCacheOf(co.DestinationCtx)
	return copy.Image(ctx, pc, dest, src, co)
}

// walBlobInfoCacheOf is walBlobInfoCache for the cache of sys; called
// right before containers/image opens it, so that a command that opens no
// cache creates none.
func walBlobInfoCacheOf(sys *types.SystemContext) {
	if sys != nil && sys.BlobInfoCacheDir != "" {
		walBlobInfoCache(sys.BlobInfoCacheDir)
	}
}

// walDirs holds a *sync.Once for each blob-info cache directory
// walBlobInfoCache has seen: a second caller waits for the first's switch.
var walDirs sync.Map

// walBlobInfoCache puts the blob-info cache database in dir in SQLite's
// write-ahead-log mode, once per process, before containers/image opens
// it (docs/design.md, "Registries"). containers/image commits every
// record in its own transaction with synchronous=FULL; in the default
// rollback-journal mode that is four fsyncs a record (the journal twice,
// the database, the directory), in WAL mode one. A cold build records
// about seven a base layer: 212 fsyncs for an 8-layer base, 70 in WAL
// mode (its commits, and the directory when the log is made). The mode
// is a property of the database file, which containers/image keeps. A
// cache on a network filesystem, where WAL does not work, is left alone;
// so is a database another process holds (the next run switches it).
func walBlobInfoCache(dir string) {
	once, _ := walDirs.LoadOrStore(dir, new(sync.Once))
	once.(*sync.Once).Do(func() { switchToWAL(dir) })
}

func switchToWAL(dir string) {
	file := filepath.Join(dir, blobInfoCacheFile)
	if inWAL(file) || networkFS(dir) {
		return
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return // containers/image falls back to a memory cache
	}
	db, err := sql.Open("sqlite3", file+"?_busy_timeout=0")
	if err != nil {
		return
	}
	defer db.Close()
	var mode string
	if err := db.QueryRow("PRAGMA journal_mode=WAL").Scan(&mode); err != nil || mode != "wal" {
		slog.Debug("blob-info cache: not switched to WAL mode", "dir", dir, "mode", mode, "err", err)
	}
}

// inWAL reports whether the SQLite database file is in WAL mode, from
// its header's file format versions (bytes 18 and 19: 2 for WAL), so that
// a warm run does not open SQLite.
func inWAL(file string) bool {
	f, err := os.Open(file)
	if err != nil {
		return false
	}
	defer f.Close()
	var h [20]byte
	_, err = io.ReadFull(f, h[:])
	return err == nil && h[18] == 2 && h[19] == 2
}

// Magic numbers of filesystems shared between hosts that x/sys/unix does
// not name (statfs(2)).
const (
	cephSuperMagic   = 0x00c36400
	lustreSuperMagic = 0x0bd00bd0
	gpfsSuperMagic   = 0x47504653
)

// networkFS reports whether dir (or its nearest existing parent) is on a
// filesystem shared between hosts, where SQLite's WAL does not work: NFS,
// SMB/CIFS, AFS, CephFS, Lustre, GPFS, OCFS2, or a FUSE mount.
func networkFS(dir string) bool {
	for {
		var st unix.Statfs_t
		err := unix.Statfs(dir, &st)
		if err == nil {
			switch uint32(st.Type) {
			case unix.NFS_SUPER_MAGIC, unix.SMB_SUPER_MAGIC, unix.SMB2_SUPER_MAGIC, unix.CIFS_SUPER_MAGIC, unix.FUSE_SUPER_MAGIC,
				unix.AFS_SUPER_MAGIC, unix.OCFS2_SUPER_MAGIC, cephSuperMagic, lustreSuperMagic, gpfsSuperMagic:
				return true
			}
			return false
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return false
		}
		dir = parent
	}
}
