package image

import (
	"os"
	"path/filepath"
	"testing"

	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/pkg/blobinfocache"
	"go.podman.io/image/v5/types"
)

// sqliteJournal returns the file format versions of a SQLite database
// file's header (bytes 18 and 19): 2 in WAL mode, 1 in rollback-journal
// mode.
func sqliteJournal(t *testing.T, file string) (write, read byte) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 100 || string(b[:16]) != "SQLite format 3\x00" {
		t.Fatalf("%s is not a SQLite database (%d bytes)", file, len(b))
	}
	return b[18], b[19]
}

// TestBlobInfoCacheWAL: the blob-info cache database mcbake opens
// (blobInfoCache) is in WAL mode, whether mcbake creates it or
// containers/image created it before in rollback-journal mode, and
// containers/image records and finds locations in it. Only opening it
// creates it.
func TestBlobInfoCacheWAL(t *testing.T) {
	for _, existing := range []bool{false, true} {
		dir := filepath.Join(t.TempDir(), "blobinfo")
		file := filepath.Join(dir, blobInfoCacheFile)
		if existing {
			c := blobinfocache.DefaultCache(&types.SystemContext{BlobInfoCacheDir: dir})
			c.RecordDigestUncompressedPair(digest.FromString("a"), digest.FromString("b"))
			if w, r := sqliteJournal(t, file); w != 1 || r != 1 {
				t.Fatalf("containers/image's own database: versions %d/%d, want the rollback journal's 1/1", w, r)
			}
		}
		sys, err := Options{CacheDir: dir}.systemContext()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := os.Stat(file); err != nil != !existing {
			t.Errorf("existing %v: the database before it is opened: %v", existing, err)
		}
		c := blobInfoCache(sys)
		if w, r := sqliteJournal(t, file); w != 2 || r != 2 {
			t.Errorf("existing %v: file format versions %d/%d, want WAL's 2/2", existing, w, r)
		}
		d := digest.FromString("layer")
		scope := types.BICTransportScope{Opaque: "registry.example"}
		c.RecordKnownLocation(docker.Transport, scope, d, types.BICLocationReference{Opaque: "registry.example/base"})
		got := blobinfocache.DefaultCache(sys).CandidateLocations(docker.Transport, scope, d, false)
		if len(got) != 1 || got[0].Location.Opaque != "registry.example/base" {
			t.Errorf("existing %v: candidates %+v, want the recorded location", existing, got)
		}
	}
}
