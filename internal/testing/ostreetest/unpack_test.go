package ostreetest

import (
	"archive/tar"
	"compress/gzip"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mcbake/mcbake/internal/ocilayout"
	"github.com/mcbake/mcbake/internal/testing/testbase"
)

func writeBase(t *testing.T, opts testbase.Options) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	if _, err := testbase.Write(dir, opts); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestUnpack unpacks the default test base (which has a zstd layer, a
// whiteout, an opaque directory and a hard link) and compares the tree
// with testbase's own reading of the image.
func TestUnpack(t *testing.T) {
	layout := writeBase(t, testbase.Options{})
	rootfs := filepath.Join(t.TempDir(), "rootfs")
	Unpack(t, layout, "latest", rootfs)
	want, err := testbase.Unpack(layout)
	if err != nil {
		t.Fatal(err)
	}
	got, err := treeFiles(rootfs)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Unpack tree (-want +got):\n%s", diff)
	}
}

func TestGzipLayoutKeepsGzipImages(t *testing.T) {
	layers := testbase.DefaultLayers()
	for i := range layers {
		layers[i].Compression = "gzip"
	}
	layout := writeBase(t, testbase.Options{Layers: layers})
	got, err := gzipLayout(layout, "latest", t.TempDir())
	if err != nil || got != layout {
		t.Errorf("gzipLayout(gzip-only image) = %q, %v, want %q, nil", got, err, layout)
	}
}

// TestGzipLayoutReencodes checks the re-encoded layout: gzip layers only,
// whose uncompressed digests are the config's diff IDs.
func TestGzipLayoutReencodes(t *testing.T) {
	layout := writeBase(t, testbase.Options{})
	scratch := t.TempDir()
	got, err := gzipLayout(layout, "latest", scratch)
	if err != nil || got != scratch {
		t.Fatalf("gzipLayout(image with zstd) = %q, %v, want %q, nil", got, err, scratch)
	}
	desc, err := findTag(scratch, "latest")
	if err != nil {
		t.Fatal(err)
	}
	var m v1.Manifest
	if err := ocilayout.ReadJSON(ocilayout.BlobPath(scratch, desc.Digest.String()), &m); err != nil {
		t.Fatal(err)
	}
	var cfg v1.Image
	if err := ocilayout.ReadJSON(ocilayout.BlobPath(scratch, m.Config.Digest.String()), &cfg); err != nil {
		t.Fatal(err)
	}
	var diffIDs []digest.Digest
	for _, l := range m.Layers {
		if l.MediaType != v1.MediaTypeImageLayerGzip {
			t.Errorf("layer %s media type = %s, want %s", l.Digest, l.MediaType, v1.MediaTypeImageLayerGzip)
		}
		diffIDs = append(diffIDs, gunzipDigest(t, ocilayout.BlobPath(scratch, l.Digest.String())))
	}
	if diff := cmp.Diff(cfg.RootFS.DiffIDs, diffIDs); diff != "" {
		t.Errorf("uncompressed layer digests (-want +got):\n%s", diff)
	}
}

func gunzipDigest(t *testing.T, path string) digest.Digest {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	d, err := digest.Canonical.FromReader(zr)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestRevertUnpackedImages runs the whole harness on real images: B is
// the default test base, L adds a kubeconfig, changes a CRI-O drop-in and
// removes (whiteout) an enablement link B has. The node writes what L
// baked, so all three are clobbered; a node-modified file survives.
func TestRevertUnpackedImages(t *testing.T) {
	if ok, why := Available(); !ok {
		t.Skip(why)
	}
	const wants = "etc/systemd/system/multi-user.target.wants/openvswitch.service"
	bLayout := writeBase(t, testbase.Options{})
	lLayout := writeBase(t, testbase.Options{ExtraLayers: []testbase.Layer{{
		Files: []testbase.File{
			{Path: "etc/kubernetes/kubelet.conf", Mode: 0o644, Content: []byte("kubelet\n")},
			{Path: "etc/crio/crio.conf.d/00-default", Mode: 0o644, Content: []byte("[crio]\n# L\n")},
			{Path: "etc/chrony.conf", Mode: 0o644, Content: []byte("server L\n")},
		},
		Whiteouts: []string{wants},
	}}})
	lRoot, bRoot := filepath.Join(t.TempDir(), "l"), filepath.Join(t.TempDir(), "b")
	Unpack(t, lLayout, "latest", lRoot)
	Unpack(t, bLayout, "latest", bRoot)
	root := Revert(t, lRoot, bRoot, apply([]op{
		write("kubernetes/kubelet.conf", file(0o644, "kubelet\n")),
		write("crio/crio.conf.d/00-default", file(0o644, "[crio]\n# L\n")),
		write("chrony.conf", file(0o644, "server node\n")),
	}))
	paths := []string{"etc/kubernetes/kubelet.conf", "etc/crio/crio.conf.d/00-default", wants}
	want := readAll(t, bRoot, paths)
	want["etc/chrony.conf"] = ptr(file(0o644, "server node\n"))
	if want[wants] == nil || want["etc/kubernetes/kubelet.conf"] != nil {
		t.Fatalf("test base changed: B's %s = %v, kubelet.conf = %v", wants, want[wants], want["etc/kubernetes/kubelet.conf"])
	}
	if diff := cmp.Diff(want, readAll(t, root, append(paths, "etc/chrony.conf"))); diff != "" {
		t.Errorf("B deployment after the revert (-want +got):\n%s", diff)
	}
}

// treeFiles reads a directory tree as testbase Files; a path sharing an
// inode with an earlier one (in lexical order) is a hard link to it.
func treeFiles(root string) (map[string]testbase.File, error) {
	files := map[string]testbase.File{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, _ fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		f, err := treeFile(p, filepath.ToSlash(rel), inodes)
		files[f.Path] = f
		return err
	})
	return files, err
}

func treeFile(p, rel string, inodes map[uint64]string) (testbase.File, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return testbase.File{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	f := testbase.File{Path: rel, Mode: int64(st.Mode & 0o7777), UID: int(st.Uid), GID: int(st.Gid)}
	switch {
	case fi.IsDir():
		f.Type = tar.TypeDir
	case fi.Mode()&fs.ModeSymlink != 0:
		f.Type = tar.TypeSymlink
		f.Target, err = os.Readlink(p)
	default:
		f.Type = tar.TypeReg
		f.Content, err = os.ReadFile(p)
		if first, ok := inodes[st.Ino]; ok {
			f.Type, f.Target = tar.TypeLink, first
		} else {
			inodes[st.Ino] = rel
		}
	}
	return f, err
}
