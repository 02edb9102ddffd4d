package image

import (
	"bytes"
	"context"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/storage"
)

// TestAppendContainersStorage writes to and reads from a private vfs store.
func TestAppendContainersStorage(t *testing.T) {
	c := newStoreCase(t)
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
	checkManifestOnly(t, im, c.opts)
	checkPresentSkipped(t, c, dest, d)
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

// checkManifestOnly opens the store image full as an image opened by
// openManifestOnly, which lists its layers only for TopLayer: the top
// layer's digest, the ID and the top layer's bytes are the same.
func checkManifestOnly(t *testing.T, full *Image, opts Options) {
	t.Helper()
	im, err := openManifestOnly(context.Background(), full.Reference(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer im.Close()
	ls := full.Layers()
	if len(im.Layers()) != 0 || im.topLayerDigest() != ls[len(ls)-1].Digest {
		t.Errorf("manifest-only open: %d layers listed, top layer %s; want none, %s", len(im.Layers()), im.topLayerDigest(), ls[len(ls)-1].Digest)
	}
	if !slices.Equal(im.ID().DiffIDs, full.ID().DiffIDs) || im.ID().Digest != full.ID().Digest || im.ID().Config != full.ID().Config {
		t.Errorf("manifest-only open: ID %+v, want %+v", im.ID(), full.ID())
	}
	read := func(im *Image) []byte {
		rc, err := im.TopLayer(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(rc)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	if got, want := read(im), read(full); !bytes.Equal(got, want) || len(im.Layers()) != len(ls) {
		t.Errorf("manifest-only open: top layer %d bytes, %d layers listed after; want %d bytes, %d", len(got), len(im.Layers()), len(want), len(ls))
	}
}

// checkPresentSkipped appends again to dest, which holds the image
// already: nothing is written, every blob is reported there already, and
// the store's image is the same. Then the name is moved to another
// image, and the next append writes again and moves it back.
func checkPresentSkipped(t *testing.T, c *appendCase, dest string, want digest.Digest) {
	t.Helper()
	imageID := func() string {
		im := mustOpen(t, dest, c.opts)
		defer im.Close()
		return im.src.Reference().StringWithinTransport()
	}
	before := imageID()
	appendCounting := func(ao AppendOptions) (digest.Digest, *Transfer) {
		var tr Transfer
		ao.Progress = tr.Add
		d, err := Append(context.Background(), c.base, dest, ao, c.opts)
		if err != nil {
			t.Fatalf("Append(%s): %v", dest, err)
		}
		return d, &tr
	}
	d, tr := appendCounting(c.ao)
	if _, written, skipped := tr.Totals(); d != want || written != 0 || skipped != len(c.ti.layers)+2 {
		t.Errorf("appending the image the store has: digest %s, %d blob(s) written, %d skipped; want %s, 0, %d (the layers and the config)",
			d, written, skipped, want, len(c.ti.layers)+2)
	}
	if got := imageID(); got != before {
		t.Errorf("the store's image is %s after appending it again, %s before", got, before)
	}

	named := func() digest.Digest {
		im := mustOpen(t, dest, c.opts)
		defer im.Close()
		return im.Digest()
	}
	other := c.ao
	other.Labels = map[string]string{"mcbake.test/other": "1"}
	if d, _ := appendCounting(other); d == want || named() != d {
		t.Errorf("an append of another image to %s gave %s and the name gives %s; want a new image, named", dest, d, named())
	}
	if d, _ := appendCounting(c.ao); d != want || named() != want {
		t.Errorf("appending the first image again gave %s and the name gives %s; want %s", d, named(), want)
	}
}

// newStoreCase is an append case whose options name a private vfs
// store, shut down when the test ends.
func newStoreCase(t *testing.T) *appendCase {
	t.Helper()
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
	return c
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

// TestStoreShutDownByItsLastUser: two images open from one store share
// it; closing the first leaves the store as it is (its storage.lock
// records no write, which would have the other user load it again), and
// closing the last shuts it down. A HoldStore is a user too.
func TestStoreShutDownByItsLastUser(t *testing.T) {
	c := newStoreCase(t)
	dest := "containers-storage:localhost/mcbake/test:1"
	c.append(t, dest)

	lock := filepath.Join(c.opts.StorageRoot, "storage.lock")
	read := func() string {
		b, err := os.ReadFile(lock)
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	a, b := mustOpen(t, dest, c.opts), mustOpen(t, dest, c.opts)
	before := read()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if read() != before {
		t.Error("closing one of two images of a store shut the store down")
	}
	if _, err := readLayer(t, b, b.Layers()[0].Digest); err != nil {
		t.Errorf("reading a layer of the image still open: %v", err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if read() == before {
		t.Error("closing the last image of a store did not shut it down")
	}

	release := HoldStore(dest, c.opts)
	HoldStore("oci:"+c.layout+":latest", c.opts)() // holds nothing
	before = read()
	if err := mustOpen(t, dest, c.opts).Close(); err != nil {
		t.Fatal(err)
	}
	if read() != before {
		t.Error("closing an image of a held store shut the store down")
	}
	release()
	if read() == before {
		t.Error("releasing the last hold of a store did not shut it down")
	}
}
