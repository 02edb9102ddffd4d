package testbase

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// These tests prove that other OCI tools read what Write produces. They
// skip when the tools are not installed.

func requireTool(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (Debian package %s): skipping the cross-check with another OCI reader", name, name)
	}
	return p
}

func run(t *testing.T, name string, args ...string) ([]byte, error) {
	t.Helper()
	out, err := exec.Command(name, args...).Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return out, fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, ee.Stderr)
	}
	return out, err
}

type inspected struct {
	Digest       digest.Digest
	Architecture string
	Labels       map[string]string
	Layers       []digest.Digest
}

func TestSkopeoInspect(t *testing.T) {
	skopeo := requireTool(t, "skopeo")
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			dir, top := write(t, c.opts)
			ref := "oci:" + dir + ":" + tagOf(c.opts)
			raw, err := run(t, skopeo, "inspect", "--raw", ref)
			if err != nil && c.opts.Format == "docker" && strings.Contains(err.Error(), "no descriptor found") {
				t.Skipf("this skopeo predates Docker schema2 manifests in OCI layouts: %v", err)
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := digest.FromBytes(raw); got != top {
				t.Errorf("skopeo inspect --raw digest = %s, want %s", got, top)
			}
			for _, arch := range archs(c.opts) {
				checkInspect(t, skopeo, ref, arch)
			}
		})
	}
}

func archs(o Options) []string {
	if len(o.Platforms) == 0 {
		return []string{"amd64"}
	}
	var out []string
	for _, p := range o.Platforms {
		out = append(out, strings.Split(p, "/")[1])
	}
	return out
}

func checkInspect(t *testing.T, skopeo, ref, arch string) {
	t.Helper()
	out, err := run(t, skopeo, "--override-arch", arch, "inspect", ref)
	if err != nil {
		t.Fatal(err)
	}
	var got inspected
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if got.Architecture != arch || got.Labels[v1.AnnotationTitle] != Title || len(got.Layers) < 4 {
		t.Errorf("skopeo inspect (%s) = arch %q, labels %v, %d layers; want %s, %s=%s, at least 4 layers",
			arch, got.Architecture, got.Labels, len(got.Layers), arch, v1.AnnotationTitle, Title)
	}
}

// TestSkopeoDecompresses copies the default image with decompression and
// checks the uncompressed layers are exactly the config's diff IDs.
func TestSkopeoDecompresses(t *testing.T) {
	skopeo := requireTool(t, "skopeo")
	dir, _ := write(t, Options{ExtraLayers: []Layer{extraLayer()}})
	out := filepath.Join(t.TempDir(), "copy")
	if _, err := run(t, skopeo, "copy", "--dest-decompress", "oci:"+dir+":latest", "dir:"+out); err != nil {
		t.Fatal(err)
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	var cfg v1.Image
	if err := readJSON(blobPath(dir, m.Config.Digest), &cfg); err != nil {
		t.Fatal(err)
	}
	for i, d := range cfg.RootFS.DiffIDs {
		b, err := os.ReadFile(filepath.Join(out, d.Encoded()))
		if err != nil {
			t.Errorf("layer %d: skopeo did not produce its diff ID %s: %v", i, d, err)
			continue
		}
		if sum := sha256.Sum256(b); digest.NewDigestFromBytes(digest.SHA256, sum[:]) != d {
			t.Errorf("layer %d: decompressed by skopeo to sha256:%x, diff ID %s", i, sum, d)
		}
	}
}

// TestUmociUnpack unpacks with umoci and compares the tree with Unpack.
// umoci 0.4.7 cannot read zstd layers, so the layers are all gzip here
// (plus the uncompressed extra layer).
func TestUmociUnpack(t *testing.T) {
	umoci := requireTool(t, "umoci")
	layers := DefaultLayers()
	for i := range layers {
		layers[i].Compression = "gzip"
	}
	dir, _ := write(t, Options{Layers: layers, ExtraLayers: []Layer{extraLayer()}})
	bundle := filepath.Join(t.TempDir(), "bundle")
	rootless := os.Geteuid() != 0
	args := []string{"unpack", "--image", dir + ":latest", bundle}
	if rootless {
		args = append([]string{"unpack", "--rootless"}, args[1:]...)
	}
	if _, err := run(t, umoci, args...); err != nil {
		t.Fatal(err)
	}
	got, err := treeFiles(filepath.Join(bundle, "rootfs"), !rootless)
	if err != nil {
		t.Fatal(err)
	}
	want, err := Unpack(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rootless {
		for p, f := range want {
			f.UID, f.GID = 0, 0
			want[p] = f
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("umoci's tree differs from Unpack (-want +got):\n%s", diff)
	}
}

// treeFiles reads a directory tree as Files; a path sharing an inode with
// an earlier one (in lexical order) is a hard link to it.
func treeFiles(root string, owners bool) (map[string]File, error) {
	files := map[string]File{}
	inodes := map[uint64]string{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == root {
			return err
		}
		rel, err := filepath.Rel(root, p)
		if err != nil {
			return err
		}
		f, err := treeFile(p, filepath.ToSlash(rel), inodes)
		if !owners {
			f.UID, f.GID = 0, 0
		}
		files[f.Path] = f
		return err
	})
	return files, err
}

func treeFile(p, rel string, inodes map[uint64]string) (File, error) {
	fi, err := os.Lstat(p)
	if err != nil {
		return File{}, err
	}
	st := fi.Sys().(*syscall.Stat_t)
	f := File{Path: rel, Mode: int64(fi.Mode().Perm()), UID: int(st.Uid), GID: int(st.Gid)}
	for bit, tarBit := range map[fs.FileMode]int64{fs.ModeSetuid: 0o4000, fs.ModeSetgid: 0o2000, fs.ModeSticky: 0o1000} {
		if fi.Mode()&bit != 0 {
			f.Mode |= tarBit
		}
	}
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
