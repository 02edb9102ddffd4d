package image

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/containers/storage"
	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// TestAppendContainersStorage writes to and reads from a private vfs store.
func TestAppendContainersStorage(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("containers-storage test needs root (a private vfs store still needs chown); run as root to cover it")
	}
	c := newAppendCase(t)
	storeDir := t.TempDir()
	conf := filepath.Join(storeDir, "storage.conf")
	writeFile(t, conf, []byte("[storage]\ndriver = \"vfs\"\n")) // keep the host's storage.conf out
	t.Setenv("CONTAINERS_STORAGE_CONF", conf)
	c.opts.StorageRoot = filepath.Join(storeDir, "root")
	c.opts.StorageRunRoot = filepath.Join(storeDir, "runroot")
	c.opts.StorageDriver = "vfs"
	t.Cleanup(func() { shutdownTestStore(t, c.opts) })

	ociDigest := c.append(t, "oci:"+filepath.Join(c.dir, "ref")+":x")
	dest := "containers-storage:localhost/mcbake/test:1"
	d := c.append(t, dest)
	if d != ociDigest {
		t.Errorf("containers-storage digest = %s, oci: gave %s; want the same", d, ociDigest)
	}
	im := c.check(t, dest, true)
	if im.Digest() != d {
		t.Errorf("reopened digest = %s, Append returned %s", im.Digest(), d)
	}
	for i, l := range im.Layers() {
		b, err := readLayer(t, im, l.Digest)
		if err != nil || digest.FromBytes(b) != l.DiffID {
			t.Errorf("layer %d from the store: %v, digest %s, want %s", i, err, digest.FromBytes(b), l.DiffID)
		}
	}

	// A store image works as a base too; its layers stay uncompressed.
	c.base = im
	out := filepath.Join(c.dir, "from-store")
	if _, err := Append(context.Background(), im, "oci:"+out+":x", c.ao, c.opts); err != nil {
		t.Fatalf("Append from the store: %v", err)
	}
	again := mustOpen(t, "oci:"+out+":x", c.opts)
	layers := again.Layers()
	if len(layers) != 4 || layers[0].MediaType != imgspecv1.MediaTypeImageLayer || layers[0].Digest != c.ti.layers[0].diffID {
		t.Errorf("layers appended onto the store image = %+v, want 4 with uncompressed base layers", layers)
	}
	checkNoTemp(t)
}

// shutdownTestStore shuts the test store down (forcing unmounts) so that
// t.TempDir can remove it.
func shutdownTestStore(t *testing.T, opts Options) {
	store, err := storage.GetStore(storage.StoreOptions{
		GraphRoot: opts.StorageRoot, RunRoot: opts.StorageRunRoot, GraphDriverName: opts.StorageDriver,
	})
	if err != nil {
		t.Errorf("reopening the test store: %v", err)
		return
	}
	if _, err := store.Shutdown(true); err != nil {
		t.Errorf("shutting the test store down: %v", err)
	}
}
