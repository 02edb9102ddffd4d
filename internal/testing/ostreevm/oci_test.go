package ostreevm

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/mcbake/mcbake/internal/ocilayout"
	"golang.org/x/sys/unix"
)

type ociManifest struct {
	Config ocilayout.Descriptor   `json:"config"`
	Layers []ocilayout.Descriptor `json:"layers"`
}

type ociIndex struct {
	Manifests []ocilayout.Descriptor `json:"manifests"`
}

func readBlob(t *testing.T, layout string, d ocilayout.Descriptor) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout, "blobs", "sha256", d.Digest[len("sha256:"):]))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256(b)
	if "sha256:"+hex.EncodeToString(sum[:]) != d.Digest || int64(len(b)) != d.Size {
		t.Fatalf("blob %s: digest or size mismatch", d.Digest)
	}
	return b
}

// manifestFor returns the manifest descriptor tagged tag.
func manifestFor(t *testing.T, layout, tag string) ocilayout.Descriptor {
	t.Helper()
	var idx ociIndex
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	var found []ocilayout.Descriptor
	for _, d := range idx.Manifests {
		if d.Annotations[ocilayout.AnnotationRefName] == tag {
			found = append(found, d)
		}
	}
	if len(found) != 1 {
		t.Fatalf("index.json has %d manifests tagged %q, want 1", len(found), tag)
	}
	return found[0]
}

func TestPackOCI(t *testing.T) {
	root := filepath.Join(t.TempDir(), "root")
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.MkdirAll(filepath.Join(root, "etc/sub"), 0o755))
	must(os.MkdirAll(filepath.Join(root, "tmp"), 0o755))
	must(os.Chmod(filepath.Join(root, "tmp"), 0o777|os.ModeSticky))
	must(os.WriteFile(filepath.Join(root, "etc/a"), []byte("alpha\n"), 0o640))
	must(os.WriteFile(filepath.Join(root, "suid"), []byte("#!/bin/sh\n"), 0o755))
	must(os.Chmod(filepath.Join(root, "suid"), 0o755|os.ModeSetuid))
	must(os.Link(filepath.Join(root, "etc/a"), filepath.Join(root, "etc/sub/a-link")))
	must(os.Symlink("../a", filepath.Join(root, "etc/sub/sym")))
	must(unix.Mkfifo(filepath.Join(root, "fifo"), 0o600))
	root0 := os.Geteuid() == 0
	if root0 {
		must(os.Lchown(filepath.Join(root, "etc/a"), 1000, 2000))
		must(unix.Mknod(filepath.Join(root, "null"), unix.S_IFCHR|0o666, int(unix.Mkdev(1, 3))))
	}

	layout := t.TempDir()
	must(PackOCI(root, layout, "one"))
	must(PackOCI(root, layout, "two"))
	must(PackOCI(root, layout, "one")) // re-tagging replaces, does not duplicate
	one, two := manifestFor(t, layout, "one"), manifestFor(t, layout, "two")
	if one.Digest != two.Digest {
		t.Errorf("packing the same tree twice gave %s and %s", one.Digest, two.Digest)
	}

	var m ociManifest
	must(json.Unmarshal(readBlob(t, layout, one), &m))
	var cfg struct {
		Architecture string `json:"architecture"`
		OS           string `json:"os"`
		RootFS       struct {
			DiffIDs []string `json:"diff_ids"`
		} `json:"rootfs"`
	}
	must(json.Unmarshal(readBlob(t, layout, m.Config), &cfg))
	if len(m.Layers) != 1 || len(cfg.RootFS.DiffIDs) != 1 || cfg.OS != "linux" || cfg.Architecture != "amd64" {
		t.Fatalf("manifest %+v, config %+v: want one layer, linux/amd64", m, cfg)
	}
	zr, err := gzip.NewReader(bytes.NewReader(readBlob(t, layout, m.Layers[0])))
	must(err)
	raw, err := io.ReadAll(zr)
	must(err)
	sum := sha256.Sum256(raw)
	if got := "sha256:" + hex.EncodeToString(sum[:]); got != cfg.RootFS.DiffIDs[0] {
		t.Errorf("diff_id %s, uncompressed layer %s", cfg.RootFS.DiffIDs[0], got)
	}

	type ent struct {
		typ      byte
		mode     int64
		uid, gid int
		link     string
		body     string
	}
	got := map[string]ent{}
	var order []string
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		must(err)
		b, err := io.ReadAll(tr)
		must(err)
		if !h.ModTime.Equal(packTime) || h.Uname != "" || h.Gname != "" {
			t.Errorf("%s: mtime %v uname %q gname %q, want %v and numeric owners only", h.Name, h.ModTime, h.Uname, h.Gname, packTime)
		}
		got[h.Name] = ent{h.Typeflag, h.Mode, h.Uid, h.Gid, h.Linkname, string(b)}
		order = append(order, h.Name)
	}
	wantOwner := 1000
	wantGroup := 2000
	if !root0 {
		wantOwner, wantGroup = os.Geteuid(), os.Getegid()
	}
	want := map[string]ent{
		"etc/":           {tar.TypeDir, 0o755, got["etc/"].uid, got["etc/"].gid, "", ""},
		"etc/a":          {tar.TypeReg, 0o640, wantOwner, wantGroup, "", "alpha\n"},
		"etc/sub/a-link": {tar.TypeLink, 0o640, wantOwner, wantGroup, "etc/a", ""},
		"etc/sub/sym":    {tar.TypeSymlink, 0o777, got["etc/sub/sym"].uid, got["etc/sub/sym"].gid, "../a", ""},
		"suid":           {tar.TypeReg, 0o4755, got["suid"].uid, got["suid"].gid, "", "#!/bin/sh\n"},
		"tmp/":           {tar.TypeDir, 0o1777, got["tmp/"].uid, got["tmp/"].gid, "", ""},
		"fifo":           {tar.TypeFifo, 0o600, got["fifo"].uid, got["fifo"].gid, "", ""},
	}
	for name, w := range want {
		if g, ok := got[name]; !ok || g != w {
			t.Errorf("%s: got %+v (present %v), want %+v", name, g, ok, w)
		}
	}
	if root0 {
		if g := got["null"]; g.typ != tar.TypeChar {
			t.Errorf("null: type %c, want a character device", g.typ)
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i-1] >= order[i] && !(order[i-1][len(order[i-1])-1] == '/' && order[i-1][:len(order[i-1])-1] < order[i]) {
			t.Errorf("entries out of order: %q before %q", order[i-1], order[i])
		}
	}
	// GNU tar reads it too.
	if out, err := exec.Command("tar", "-tzf", filepath.Join(layout, "blobs", "sha256", m.Layers[0].Digest[7:])).CombinedOutput(); err != nil {
		t.Errorf("tar -tzf: %v: %s", err, out)
	}
}

// TestPackOCIBase packs the base root filesystem, for its size and time.
func TestPackOCIBase(t *testing.T) {
	base := baseForTest(t)
	layout := t.TempDir()
	start := time.Now()
	if err := PackOCI(base, layout, "base"); err != nil {
		t.Fatal(err)
	}
	var m ociManifest
	b := readBlob(t, layout, manifestFor(t, layout, "base"))
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	t.Logf("packed the base root filesystem in %v: layer %d MB compressed", time.Since(start).Round(time.Millisecond), m.Layers[0].Size>>20)
}
