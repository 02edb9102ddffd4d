package image

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// appendCase is what every Append test starts from: a base layout in dir,
// the base opened, and a new layer file.
type appendCase struct {
	opts   Options
	dir    string // holds base/ and layer.tar.gz; tests add destinations
	layout string // the base OCI layout
	ti     testImage
	base   *Image
	nl     NewLayer
	tl     testLayer
	ao     AppendOptions
}

func newAppendCase(t *testing.T) *appendCase {
	t.Helper()
	c := &appendCase{opts: testEnv(t), dir: t.TempDir()}
	var ref string
	ref, c.ti = baseFixture(t, c.dir)
	c.layout = filepath.Join(c.dir, "base")
	c.base = mustOpen(t, ref, c.opts)
	c.nl, c.tl = newLayerFixture(t, c.dir)
	c.ao = defaultAppend(c.nl)
	return c
}

func (c *appendCase) append(t *testing.T, dest string) digest.Digest {
	t.Helper()
	d, err := Append(context.Background(), c.base, dest, c.ao, c.opts)
	if err != nil {
		t.Fatalf("Append(%s): %v", dest, err)
	}
	return d
}

// check opens dest and compares it with the base plus the new layer.
func (c *appendCase) check(t *testing.T, dest string, uncompressed bool) *Image {
	t.Helper()
	im := mustOpen(t, dest, c.opts)
	got := im.Layers()
	if len(got) != len(c.ti.layers)+1 {
		t.Fatalf("%s has %d layers, want %d", dest, len(got), len(c.ti.layers)+1)
	}
	want := append(wantLayers(c.ti, uncompressed), LayerInfo{
		Digest: c.tl.digest, Size: c.nl.Size, MediaType: c.nl.MediaType, DiffID: c.tl.diffID,
	})
	if uncompressed {
		want[len(want)-1].Digest, want[len(want)-1].MediaType = c.tl.diffID, imgspecv1.MediaTypeImageLayer
		for i := range want {
			want[i].Size = got[i].Size // tar sizes; the digests pin the content
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("%s layers mismatch (-want +got):\n%s", dest, diff)
	}
	wantLabels := maps.Clone(baseLabels)
	maps.Copy(wantLabels, c.ao.Labels)
	if diff := cmp.Diff(wantLabels, im.Labels()); diff != "" {
		t.Errorf("%s labels mismatch (-want +got):\n%s", dest, diff)
	}
	cfg := im.Config()
	last := cfg.History[len(cfg.History)-1]
	if len(cfg.History) != 3 || last.CreatedBy != c.nl.History || last.Created == nil || !last.Created.Equal(c.ao.Created) {
		t.Errorf("%s history = %+v, want 3 entries ending with %q at %v", dest, cfg.History, c.nl.History, c.ao.Created)
	}
	if cfg.Created == nil || !cfg.Created.Equal(c.ao.Created) {
		t.Errorf("%s created = %v, want %v", dest, cfg.Created, c.ao.Created)
	}
	if diff := cmp.Diff(append(c.ti.diffIDs(), c.tl.diffID), cfg.RootFS.DiffIDs); diff != "" {
		t.Errorf("%s diff_ids mismatch (-want +got):\n%s", dest, diff)
	}
	if cfg.Architecture != "amd64" || len(cfg.Config.Cmd) != 1 {
		t.Errorf("%s config lost base fields: %+v", dest, cfg)
	}
	if !uncompressed {
		if diff := cmp.Diff(c.ao.Annotations, im.Annotations()); diff != "" {
			t.Errorf("%s annotations mismatch (-want +got):\n%s", dest, diff)
		}
	}
	return im
}

// fileID identifies a file's inode and content.
type fileID struct {
	ino  uint64
	size int64
	mod  time.Time
}

func blobFiles(t *testing.T, layout string) map[string]fileID {
	t.Helper()
	out := map[string]fileID{}
	root := filepath.Join(layout, "blobs")
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := os.Stat(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = fileID{ino: fi.Sys().(*syscall.Stat_t).Ino, size: fi.Size(), mod: fi.ModTime()}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func indexTags(t *testing.T, layout string) map[string]digest.Digest {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(layout, "index.json"))
	if err != nil {
		t.Fatal(err)
	}
	var idx imgspecv1.Index
	if err := json.Unmarshal(b, &idx); err != nil {
		t.Fatal(err)
	}
	out := map[string]digest.Digest{}
	for _, m := range idx.Manifests {
		out[m.Annotations[imgspecv1.AnnotationRefName]] = m.Digest
	}
	return out
}

func TestAppendSameLayout(t *testing.T) {
	c := newAppendCase(t)
	before := blobFiles(t, c.layout)
	d := c.append(t, "oci:"+c.layout+":new")

	after := blobFiles(t, c.layout)
	for name, id := range before {
		if after[name] != id {
			t.Errorf("base blob %s changed: %+v, was %+v", name, after[name], id)
		}
	}
	if len(after) != len(before)+3 { // config, new layer, manifest
		t.Errorf("layout has %d blobs, want %d", len(after), len(before)+3)
	}
	wantTags := map[string]digest.Digest{"base": c.ti.digest(), "new": d}
	if diff := cmp.Diff(wantTags, indexTags(t, c.layout)); diff != "" {
		t.Errorf("index.json tags mismatch (-want +got):\n%s", diff)
	}
	if im := c.check(t, "oci:"+c.layout+":new", false); im.Digest() != d {
		t.Errorf("reopened digest = %s, Append returned %s", im.Digest(), d)
	}
	checkDirEntries(t, c.layout, "blobs", "index.json", "oci-layout")
	checkDirEntries(t, c.dir, "base", "layer.tar.gz")
	checkNoTemp(t)

	// Appending again is idempotent: same digest, the tag still unique.
	if again := c.append(t, "oci:"+c.layout+":new"); again != d {
		t.Errorf("second Append = %s, want %s", again, d)
	}
	if diff := cmp.Diff(wantTags, indexTags(t, c.layout)); diff != "" {
		t.Errorf("index.json tags after a second Append mismatch (-want +got):\n%s", diff)
	}
}

func TestAppendNewLayoutLinksBaseBlobs(t *testing.T) {
	c := newAppendCase(t)
	base := blobFiles(t, c.layout)
	for _, dest := range []string{"fresh", "empty"} {
		t.Run(dest, func(t *testing.T) {
			layout := filepath.Join(c.dir, dest)
			if dest == "empty" {
				if err := os.Mkdir(layout, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			d := c.append(t, "oci:"+layout+":new")
			got := blobFiles(t, layout)
			for _, l := range c.ti.layers {
				name := filepath.Join("sha256", l.digest.Encoded())
				if got[name].ino != base[name].ino {
					t.Errorf("base layer %s in %s has inode %d, want %d (hard link)", l.digest, dest, got[name].ino, base[name].ino)
				}
			}
			if _, ok := got[filepath.Join("sha256", digest.FromBytes(c.ti.config).Encoded())]; ok {
				t.Error("the base config was copied into the new layout")
			}
			if im := c.check(t, "oci:"+layout+":new", false); im.Digest() != d {
				t.Errorf("reopened digest = %s, Append returned %s", im.Digest(), d)
			}
			fi, err := os.Stat(layout)
			if err != nil || fi.Mode().Perm() != 0o755 {
				t.Errorf("new layout mode = %v (%v), want 0755", fi.Mode().Perm(), err)
			}
		})
	}
	checkDirEntries(t, c.dir, "base", "empty", "fresh", "layer.tar.gz")
	checkNoTemp(t)
}

func TestAppendIntoOtherLayout(t *testing.T) {
	c := newAppendCase(t)
	other := filepath.Join(c.dir, "other")
	otherImg := newImage(t, "amd64", "", false, []testLayer{gzipLayer(t, map[string]string{"x": "y"})})
	writeImageLayout(t, other, "kept", otherImg)
	before := blobFiles(t, other)

	d := c.append(t, "oci:"+other+":new")
	after := blobFiles(t, other)
	for name, id := range before {
		if after[name] != id {
			t.Errorf("existing blob %s changed", name)
		}
	}
	base := blobFiles(t, c.layout)
	for _, l := range c.ti.layers {
		name := filepath.Join("sha256", l.digest.Encoded())
		if after[name].ino != base[name].ino {
			t.Errorf("base layer %s was copied, want a hard link", l.digest)
		}
	}
	want := map[string]digest.Digest{"kept": otherImg.digest(), "new": d}
	if diff := cmp.Diff(want, indexTags(t, other)); diff != "" {
		t.Errorf("index.json tags mismatch (-want +got):\n%s", diff)
	}
	c.check(t, "oci:"+other+":new", false)
	mustOpen(t, "oci:"+other+":kept", c.opts)
	checkDirEntries(t, other, "blobs", "index.json", "oci-layout")
	checkNoTemp(t)
}

func TestAppendDestinations(t *testing.T) {
	c := newAppendCase(t)
	ociDigest := c.append(t, "oci:"+filepath.Join(c.dir, "ref")+":new")
	tests := []struct {
		dest         string
		uncompressed bool
		sameDigest   bool
	}{
		{dest: "oci-archive:" + filepath.Join(c.dir, "o.tar") + ":new", sameDigest: true},
		{dest: "oci-archive:" + filepath.Join(c.dir, "untagged.tar"), sameDigest: true},
		{dest: "dir:" + filepath.Join(c.dir, "d"), sameDigest: true},
		{dest: "docker-archive:" + filepath.Join(c.dir, "k.tar"), uncompressed: true},
		{dest: "docker-archive:" + filepath.Join(c.dir, "named.tar") + ":example.com/x:1", uncompressed: true},
	}
	for _, tt := range tests {
		t.Run(tt.dest, func(t *testing.T) {
			d := c.append(t, tt.dest)
			if (d == ociDigest) != tt.sameDigest {
				t.Errorf("Append(%s) = %s; oci: gave %s; want same=%v", tt.dest, d, ociDigest, tt.sameDigest)
			}
			im := c.check(t, tt.dest, tt.uncompressed)
			if tt.sameDigest && im.Digest() != d {
				t.Errorf("reopened digest = %s, Append returned %s", im.Digest(), d)
			}
			// Writing again replaces the destination.
			if again := c.append(t, tt.dest); again != d {
				t.Errorf("second Append(%s) = %s, want %s", tt.dest, again, d)
			}
			c.check(t, tt.dest, tt.uncompressed)
		})
	}
	checkDirEntries(t, c.dir, "base", "d", "k.tar", "layer.tar.gz", "named.tar", "o.tar", "ref", "untagged.tar")
	checkNoTemp(t)
}

func TestAppendReplacesDirImage(t *testing.T) {
	c := newAppendCase(t)
	dest := "dir:" + filepath.Join(c.dir, "d")
	first := c.append(t, dest)
	c.ao.Labels = map[string]string{"io.example.override": "second"}
	second := c.append(t, dest)
	if first == second {
		t.Fatal("different labels gave the same digest")
	}
	im := mustOpen(t, dest, c.opts)
	if im.Digest() != second || im.Labels()["io.example.override"] != "second" {
		t.Errorf("dir: holds %s with labels %v, want %s with the second labels", im.Digest(), im.Labels(), second)
	}
	checkDirEntries(t, c.dir, "base", "d", "layer.tar.gz")
	checkNoTemp(t)
}

func TestAppendRefusesForeignDestinations(t *testing.T) {
	c := newAppendCase(t)
	full := filepath.Join(c.dir, "full")
	if err := os.Mkdir(full, 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(full, "precious.txt"), []byte("keep me"))
	tests := []string{
		"oci:" + full + ":new",
		"dir:" + full,
		"oci-archive:" + full,
		"docker-archive:" + full,
		"oci:" + filepath.Join(c.dir, "layer.tar.gz") + ":new",
		"oci:" + filepath.Join(c.dir, "no", "parent") + ":new",
		"oci-archive:" + filepath.Join(c.dir, "no", "parent.tar"),
		"oci:" + full + ":@1",
		"quay.io/x:1",
	}
	for _, dest := range tests {
		if _, err := Append(context.Background(), c.base, dest, c.ao, c.opts); err == nil {
			t.Errorf("Append(%s) succeeded, want an error", dest)
		}
	}
	checkDirEntries(t, full, "precious.txt")
	checkDirEntries(t, c.dir, "base", "full", "layer.tar.gz")
	checkNoTemp(t)
}

func TestAppendFromDockerBase(t *testing.T) {
	c := newAppendCase(t)
	ti := newImage(t, "amd64", "", true, baseLayers(t))
	src := filepath.Join(c.dir, "docker")
	writeDirImage(t, src, ti.manifest, nil, ti.blobs()...)
	c.base = mustOpen(t, "dir:"+src, c.opts)
	c.ti = ti

	dest := filepath.Join(c.dir, "out")
	d := c.append(t, "oci:"+dest+":new")
	b, err := os.ReadFile(blobPath(dest, d))
	if err != nil {
		t.Fatal(err)
	}
	var m imgspecv1.Manifest
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.MediaType != imgspecv1.MediaTypeImageManifest || m.Config.MediaType != imgspecv1.MediaTypeImageConfig {
		t.Errorf("manifest types = %s / %s, want OCI", m.MediaType, m.Config.MediaType)
	}
	for i, l := range m.Layers {
		if l.MediaType != imgspecv1.MediaTypeImageLayerGzip {
			t.Errorf("layer %d media type = %s, want %s", i, l.MediaType, imgspecv1.MediaTypeImageLayerGzip)
		}
	}
	c.check(t, "oci:"+dest+":new", false)
}

func TestAppendDeterministic(t *testing.T) {
	c := newAppendCase(t)
	a := c.append(t, "oci:"+filepath.Join(c.dir, "a")+":x")
	b := c.append(t, "oci:"+filepath.Join(c.dir, "b")+":y")
	if a != b {
		t.Errorf("two layouts got %s and %s, want the same digest", a, b)
	}
	// The same instant in another zone, and a fresh copy of the layer file.
	c.ao.Created = c.ao.Created.In(time.FixedZone("X", 5*3600))
	other := filepath.Join(c.dir, "copy.tar.gz")
	writeFile(t, other, c.tl.blob)
	c.ao.Layers[0].Path = other
	if d := c.append(t, "oci-archive:"+filepath.Join(c.dir, "c.tar")); d != a {
		t.Errorf("oci-archive with equal inputs got %s, want %s", d, a)
	}
	c.ao.Labels = map[string]string{"io.mcbake.owned": "false"}
	if d := c.append(t, "oci:"+filepath.Join(c.dir, "d")+":x"); d == a {
		t.Errorf("different labels gave the same digest %s", d)
	}
}

// TestAppendUndated checks that a zero Created keeps the base's time and
// leaves the history entry undated.
func TestAppendUndated(t *testing.T) {
	c := newAppendCase(t)
	c.ao.Created = time.Time{}
	dest := "oci:" + filepath.Join(c.dir, "out") + ":x"
	c.append(t, dest)
	cfg := mustOpen(t, dest, c.opts).Config()
	if cfg.Created == nil || !cfg.Created.Equal(fixtureTime) || cfg.History[2].Created != nil {
		t.Errorf("created = %v, last history created = %v; want %v and none", cfg.Created, cfg.History[2].Created, fixtureTime)
	}
}

func TestAppendCancelled(t *testing.T) {
	for _, when := range []string{"before", "before commit"} {
		for _, kind := range []string{"oci new", "oci same layout", "dir", "oci-archive", "docker-archive"} {
			t.Run(when+"/"+kind, func(t *testing.T) {
				c := newAppendCase(t)
				dest := map[string]string{
					"oci new":         "oci:" + filepath.Join(c.dir, "out") + ":x",
					"oci same layout": "oci:" + c.layout + ":x",
					"dir":             "dir:" + filepath.Join(c.dir, "out"),
					"oci-archive":     "oci-archive:" + filepath.Join(c.dir, "out"),
					"docker-archive":  "docker-archive:" + filepath.Join(c.dir, "out"),
				}[kind]
				blobsBefore := blobFiles(t, c.layout)
				indexBefore, err := os.ReadFile(filepath.Join(c.layout, "index.json"))
				if err != nil {
					t.Fatal(err)
				}
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if when == "before" {
					cancel()
				} else {
					beforeCommit = cancel
					t.Cleanup(func() { beforeCommit = nil })
				}
				if _, err := Append(ctx, c.base, dest, c.ao, c.opts); !errors.Is(err, context.Canceled) {
					t.Fatalf("Append = %v, want context.Canceled", err)
				}
				checkDirEntries(t, c.dir, "base", "layer.tar.gz")
				checkNoTemp(t)
				if diff := cmp.Diff(blobsBefore, blobFiles(t, c.layout), cmp.AllowUnexported(fileID{})); diff != "" {
					t.Errorf("base layout blobs changed (-want +got):\n%s", diff)
				}
				indexAfter, err := os.ReadFile(filepath.Join(c.layout, "index.json"))
				if err != nil || string(indexAfter) != string(indexBefore) {
					t.Errorf("index.json changed: %v", err)
				}
			})
		}
	}
}

func TestAppendCorruptBase(t *testing.T) {
	for _, dest := range []string{"oci-archive", "dir", "docker-archive"} {
		t.Run(dest, func(t *testing.T) {
			c := newAppendCase(t)
			flipByte(t, blobPath(c.layout, c.ti.layers[0].digest), 30)
			_, err := Append(context.Background(), c.base, dest+":"+filepath.Join(c.dir, "out"), c.ao, c.opts)
			if err == nil {
				t.Fatal("Append from a corrupt base succeeded, want an error")
			}
			checkDirEntries(t, c.dir, "base", "layer.tar.gz")
			checkNoTemp(t)
		})
	}
}

func TestAppendBadLayer(t *testing.T) {
	c := newAppendCase(t)
	wrongContent := filepath.Join(c.dir, "wrong.tar.gz")
	writeFile(t, wrongContent, append([]byte{}, c.tl.blob[:len(c.tl.blob)-1]...))
	tests := []struct {
		name   string
		change func(*NewLayer)
	}{
		{"media type", func(l *NewLayer) { l.MediaType = "application/vnd.docker.image.rootfs.diff.tar.gzip" }},
		{"size", func(l *NewLayer) { l.Size++ }},
		{"missing file", func(l *NewLayer) { l.Path = filepath.Join(c.dir, "absent") }},
		{"bad digest", func(l *NewLayer) { l.Digest = "sha256:nope" }},
		{"bad diff_id", func(l *NewLayer) { l.DiffID = "" }},
		{"content does not match digest", func(l *NewLayer) { l.Path = wrongContent; l.Size-- }},
	}
	for _, tt := range tests {
		for _, dest := range []string{"oci:" + filepath.Join(c.dir, "out") + ":x", "oci-archive:" + filepath.Join(c.dir, "out.tar")} {
			ao := c.ao
			ao.Layers = slices.Clone(ao.Layers)
			tt.change(&ao.Layers[0])
			if _, err := Append(context.Background(), c.base, dest, ao, c.opts); err == nil {
				t.Errorf("%s: Append(%s) succeeded, want an error", tt.name, dest)
			}
		}
	}
	checkDirEntries(t, c.dir, "base", "layer.tar.gz", "wrong.tar.gz")
	checkNoTemp(t)
}

func TestAppendClosedBase(t *testing.T) {
	c := newAppendCase(t)
	if err := c.base.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Append(context.Background(), c.base, "oci:"+filepath.Join(c.dir, "out"), c.ao, c.opts); err == nil {
		t.Error("Append from a closed base succeeded, want an error")
	}
}

func TestSkopeoInspect(t *testing.T) {
	const skopeo = "/usr/bin/skopeo"
	if _, err := os.Stat(skopeo); err != nil {
		t.Skipf("skopeo is not installed (%v); skipping the cross-check with skopeo inspect", err)
	}
	c := newAppendCase(t)
	dest := "oci:" + filepath.Join(c.dir, "out") + ":new"
	d := c.append(t, dest)
	cmd := exec.Command(skopeo, "--registries-conf", c.opts.RegistriesConf, "inspect", dest)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("skopeo inspect %s: %v\n%s", dest, err, out)
	}
	var got struct {
		Digest digest.Digest
		Layers []digest.Digest
		Labels map[string]string
	}
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatalf("decoding skopeo output: %v\n%s", err, out)
	}
	if got.Digest != d || len(got.Layers) != 3 || got.Layers[2] != c.tl.digest || got.Labels["io.mcbake.owned"] != "true" {
		t.Errorf("skopeo inspect = %+v, want digest %s, 3 layers ending %s, io.mcbake.owned=true", got, d, c.tl.digest)
	}
	if !strings.HasPrefix(string(out), "{") {
		t.Errorf("unexpected skopeo output %q", out)
	}
}

// TestAppendLayers: the new layers go on the base's in order, each with
// its history entry and diff ID, and skopeo reads the image.
func TestAppendLayers(t *testing.T) {
	c := newAppendCase(t)
	lower := gzipLayer(t, map[string]string{"usr/libexec/mcbake/x": "guard\n"})
	p := filepath.Join(c.dir, "lower.tar.gz")
	writeFile(t, p, lower.blob)
	c.ao.Layers = []NewLayer{{Path: p, Digest: lower.digest, DiffID: lower.diffID, Size: int64(len(lower.blob)),
		MediaType: imgspecv1.MediaTypeImageLayerGzip, History: "lower"}, c.nl}
	dest := "oci:" + filepath.Join(c.dir, "out") + ":new"
	d := c.append(t, dest)
	im := mustOpen(t, dest, c.opts)
	var got []digest.Digest
	for _, l := range im.Layers() {
		got = append(got, l.Digest)
	}
	want := append(c.ti.digests(), lower.digest, c.tl.digest)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("layers (-want +got):\n%s", diff)
	}
	cfg := im.Config()
	if diff := cmp.Diff(append(c.ti.diffIDs(), lower.diffID, c.tl.diffID), cfg.RootFS.DiffIDs); diff != "" {
		t.Errorf("diff_ids (-want +got):\n%s", diff)
	}
	var hist []string
	for _, h := range cfg.History[len(cfg.History)-2:] {
		if h.Created == nil || !h.Created.Equal(c.ao.Created) {
			t.Errorf("history entry %q created %v, want %v", h.CreatedBy, h.Created, c.ao.Created)
		}
		hist = append(hist, h.CreatedBy)
	}
	if diff := cmp.Diff([]string{"lower", c.nl.History}, hist); diff != "" {
		t.Errorf("history (-want +got):\n%s", diff)
	}
	if _, err := os.Stat("/usr/bin/skopeo"); err != nil {
		return
	}
	out, err := exec.Command("/usr/bin/skopeo", "--registries-conf", c.opts.RegistriesConf, "inspect", dest).Output()
	var si struct {
		Digest digest.Digest
		Layers []digest.Digest
	}
	if err == nil {
		err = json.Unmarshal(out, &si)
	}
	if err != nil || si.Digest != d || !slices.Equal(si.Layers, want) {
		t.Errorf("skopeo inspect = %+v, %v; want digest %s, layers %v", si, err, d, want)
	}
}

// TestAppendMergesConcurrentIndexChange: another writer tags an image in
// the layout while Append writes; Append applies its own change to the
// index as it is then: both tags are there.
func TestAppendMergesConcurrentIndexChange(t *testing.T) {
	c := newAppendCase(t)
	index := filepath.Join(c.layout, "index.json")
	beforeCommit = func() {
		var idx imgspecv1.Index
		b, err := os.ReadFile(index)
		if err == nil {
			err = json.Unmarshal(b, &idx)
		}
		if err != nil {
			t.Error(err)
			return
		}
		other := idx.Manifests[0]
		other.Annotations = map[string]string{imgspecv1.AnnotationRefName: "other"}
		idx.Manifests = append(idx.Manifests, other)
		b, _ = json.Marshal(idx)
		writeFile(t, index, b)
	}
	t.Cleanup(func() { beforeCommit = nil })
	if _, err := Append(context.Background(), c.base, "oci:"+c.layout+":new", c.ao, c.opts); err != nil {
		t.Fatalf("Append with a concurrent index change = %v", err)
	}
	tags := indexTags(t, c.layout)
	for _, tag := range []string{"base", "other", "new"} {
		if _, ok := tags[tag]; !ok {
			t.Errorf("index.json lacks the tag %s: %v", tag, tags)
		}
	}
	c.check(t, "oci:"+c.layout+":new", false)
	checkNoTemp(t)
}

// TestAppendAcrossFileSystems puts the base layout on another file system
// (/dev/shm), so base blobs are copied and verified instead of hard-linked.
func TestAppendAcrossFileSystems(t *testing.T) {
	c := newAppendCase(t)
	shm, err := os.MkdirTemp("/dev/shm", "mcbake-images-test-")
	if err != nil {
		t.Skipf("no /dev/shm to hold a base on another file system: %v", err)
	}
	t.Cleanup(func() {
		if err := os.RemoveAll(shm); err != nil {
			t.Error(err)
		}
	})
	if sameDevice(t, shm, c.dir) {
		t.Skip("/dev/shm is on the same file system as the test directory")
	}
	layout := filepath.Join(shm, "base")
	writeImageLayout(t, layout, "base", c.ti)
	c.base = mustOpen(t, "oci:"+layout+":base", c.opts)

	dest := filepath.Join(c.dir, "out")
	c.append(t, "oci:"+dest+":new")
	c.check(t, "oci:"+dest+":new", false)
	src, dst := blobFiles(t, layout), blobFiles(t, dest)
	name := filepath.Join("sha256", c.ti.layers[0].digest.Encoded())
	if dst[name].ino == src[name].ino || dst[name].size != src[name].size {
		t.Errorf("base layer across file systems: %+v, source %+v; want a copy", dst[name], src[name])
	}

	flipByte(t, blobPath(layout, c.ti.layers[1].digest), 10)
	if _, err := Append(context.Background(), c.base, "oci:"+filepath.Join(c.dir, "bad")+":new", c.ao, c.opts); err == nil {
		t.Error("Append from a corrupt base on another file system succeeded, want an error")
	}
	checkDirEntries(t, c.dir, "base", "layer.tar.gz", "out")
	checkNoTemp(t)
}

func sameDevice(t *testing.T, a, b string) bool {
	t.Helper()
	var sa, sb syscall.Stat_t
	if err := syscall.Stat(a, &sa); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Stat(b, &sb); err != nil {
		t.Fatal(err)
	}
	return sa.Dev == sb.Dev
}

// TestAppendConcurrentWritersLoseNoTag: several Appends into one layout at
// once, each with its own tag, into an existing layout and into one that
// does not exist yet: they take turns on the layout's lock and all
// succeed, every tag in the final index.json.
func TestAppendConcurrentWritersLoseNoTag(t *testing.T) {
	c := newAppendCase(t)
	const n = 6
	for _, layout := range []string{c.layout, filepath.Join(c.dir, "fresh")} {
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = Append(context.Background(), c.base, fmt.Sprintf("oci:%s:t%d", layout, i), c.ao, c.opts)
			}()
		}
		wg.Wait()
		tags := indexTags(t, layout)
		for i, err := range errs {
			tag := fmt.Sprintf("t%d", i)
			if err != nil {
				t.Errorf("Append to %s:%s: %v", layout, tag, err)
			} else if _, found := tags[tag]; !found {
				t.Errorf("Append to %s:%s succeeded but index.json lacks the tag: %v", layout, tag, tags)
			}
		}
		for i := range n {
			c.check(t, fmt.Sprintf("oci:%s:t%d", layout, i), false)
		}
	}
	checkNoTemp(t)
}

// TestAppendDirectIsCopyImage checks that the direct write into an OCI
// layout leaves what copy.Image leaves: the same index.json, oci-layout
// and blobs, byte for byte, and the same blobs reported written and
// skipped, into a new layout, a layout with another tag, over the same
// tag, and with a new layer that is a base layer again. The direct path
// is the one taken: it opens no blob-info cache.
func TestAppendDirectIsCopyImage(t *testing.T) {
	c := newAppendCase(t)
	other := newImage(t, "amd64", "", false, []testLayer{gzipLayer(t, map[string]string{"x": "y"})})
	layout := func(direct bool, name string) (string, *Transfer) {
		t.Helper()
		appendDirect = direct
		defer func() { appendDirect = true }()
		dir := filepath.Join(c.dir, fmt.Sprintf("%s-%v", name, direct))
		opts := c.opts
		opts.CacheDir = filepath.Join(dir + ".cache")
		switch name {
		case "other":
			writeImageLayout(t, dir, "kept", other)
		case "retag":
			writeImageLayout(t, dir, "new", other)
		}
		tr := &Transfer{}
		ao := c.ao
		if name == "duplicate" { // the new layer is the base's top layer again
			top := c.ti.layers[len(c.ti.layers)-1]
			ao.Layers = []NewLayer{{Path: filepath.Join(c.dir, "top.tar.gz"), Digest: top.digest, DiffID: top.diffID,
				Size: int64(len(top.blob)), MediaType: c.ao.Layers[0].MediaType, History: c.ao.Layers[0].History}}
			writeFile(t, ao.Layers[0].Path, top.blob)
		}
		if name == "two" { // two new layers, the lower one the base's top layer again
			top := c.ti.layers[len(c.ti.layers)-1]
			lower := NewLayer{Path: filepath.Join(c.dir, "top.tar.gz"), Digest: top.digest, DiffID: top.diffID,
				Size: int64(len(top.blob)), MediaType: c.ao.Layers[0].MediaType, History: "lower"}
			writeFile(t, lower.Path, top.blob)
			ao.Layers = []NewLayer{lower, c.nl}
		}
		ao.Progress = tr.Add
		if _, err := Append(context.Background(), c.base, "oci:"+dir+":new", ao, opts); err != nil {
			t.Fatalf("Append(direct=%v) into %s: %v", direct, name, err)
		}
		_, err := os.Stat(filepath.Join(opts.CacheDir, "blob-info-cache-v1.sqlite"))
		if cache := err == nil; cache == direct {
			t.Errorf("direct=%v into %s: blob-info cache opened = %v", direct, name, cache)
		}
		return dir, tr
	}
	for _, name := range []string{"fresh", "other", "retag", "duplicate", "two"} {
		want, wantTr := layout(false, name)
		got, gotTr := layout(true, name)
		if diff := cmp.Diff(treeBytes(t, want), treeBytes(t, got)); diff != "" {
			t.Errorf("%s: the direct write differs from copy.Image's (-copy +direct):\n%s", name, diff)
		}
		wu, ww, ws := wantTr.Totals()
		gu, gw, gs := gotTr.Totals()
		if wu != gu || ww != gw || ws != gs {
			t.Errorf("%s: direct write reported %d bytes in %d blobs, %d skipped; copy.Image %d in %d, %d skipped", name, gu, gw, gs, wu, ww, ws)
		}
	}
}

// treeBytes maps every file under dir to its content.
func treeBytes(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		rel, _ := filepath.Rel(dir, p)
		out[rel] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}
