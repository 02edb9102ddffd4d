package image_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"

	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/imagestest"
)

// baseForm is one form of the test base and how its layers must be read.
type baseForm struct {
	name, ref string
	opts      image.Options
	how       string // "blob", "toc" or "tar-split"
}

// indexingBase writes the ostree-shaped test base as a gzip OCI layout
// and converts it to zstd:chunked and, as root, into a vfs and an overlay
// containers-storage store.
func indexingBase(t *testing.T) []baseForm {
	t.Helper()
	dir := t.TempDir()
	opts := imagestest.Isolate(t, dir)
	layout := filepath.Join(dir, "gzip")
	_, err := testbase.Write(layout, testbase.Options{Ostree: true, Size: &testbase.SizeOptions{TotalBytes: 2 << 20, Files: 400, Layers: 4}})
	if err != nil {
		t.Fatal(err)
	}
	gz := "oci:" + layout + ":latest"
	forms := []baseForm{{name: "gzip", ref: gz, opts: opts, how: "blob"}}
	chunked := "oci:" + filepath.Join(dir, "chunked") + ":latest"
	if err := image.Convert(context.Background(), gz, chunked, "zstd:chunked", opts); err != nil {
		t.Fatal(err)
	}
	forms = append(forms, baseForm{name: "zstd:chunked", ref: chunked, opts: opts, how: "toc"})
	if os.Geteuid() != 0 {
		t.Log("not root: the containers-storage forms are not covered")
		return forms
	}
	conf := filepath.Join(dir, "storage.conf")
	if err := os.WriteFile(conf, []byte("[storage]\ndriver = \"vfs\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("CONTAINERS_STORAGE_CONF", conf) // keep the host's storage.conf out
	for _, driver := range []string{"vfs", "overlay"} {
		so := opts
		so.StorageRoot, so.StorageRunRoot, so.StorageDriver = filepath.Join(dir, driver, "root"), filepath.Join(dir, driver, "run"), driver
		ref := "containers-storage:localhost/mcbake/indexing:1"
		if err := image.Convert(context.Background(), gz, ref, "", so); err != nil {
			if driver == "overlay" {
				t.Logf("no overlay store here: %v", err)
				continue
			}
			t.Fatal(err)
		}
		t.Cleanup(func() { image.ShutdownTestStore(t, so) })
		forms = append(forms, baseForm{name: "containers-storage/" + driver, ref: ref, opts: so, how: "tar-split"})
	}
	return forms
}

// TestIndexingPathsAgree: one base read from its gzip blobs, its
// zstd:chunked TOCs and its containers-storage tar-splits gives the same
// index, byte for byte, cold and warm, and the same manifest and revert
// prediction for the reference MachineConfigs; each form's layers are
// read the way they should be, and a warm run reads none.
func TestIndexingPathsAgree(t *testing.T) {
	forms := indexingBase(t)
	mcs, err := machineconfig.Load([]string{"../../testdata/machineconfigs/rendered-worker-aws.json"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	var want *indexed
	for _, f := range forms {
		t.Run(f.name, func(t *testing.T) {
			cache := t.TempDir()
			cold := indexForm(t, f, mcs, cache, f.how)
			warm := indexForm(t, f, mcs, cache, "")
			if want == nil {
				want = cold
			}
			for _, got := range []*indexed{cold, warm} {
				if !bytes.Equal(got.index, want.index) {
					t.Errorf("index differs from the gzip form's:\n%s", cmp.Diff(string(want.index), string(got.index)))
				}
				if !bytes.Equal(got.manifest, want.manifest) {
					t.Errorf("manifest differs from the gzip form's:\n%s", cmp.Diff(string(want.manifest), string(got.manifest)))
				}
				if !bytes.Equal(got.report, want.report) {
					t.Errorf("revert prediction differs from the gzip form's:\n%s", cmp.Diff(string(want.report), string(got.report)))
				}
			}
		})
	}
}

// indexed is what a form gives: the index listed, the manifest and the
// prediction with the base's name and digest left out.
type indexed struct{ index, manifest, report []byte }

// indexForm opens and indexes a form of the base, checks every layer was
// read as want says ("" for none: all cached), and renders and predicts.
func indexForm(t *testing.T, f baseForm, mcs []*machineconfig.MachineConfig, cache, want string) *indexed {
	t.Helper()
	var mu sync.Mutex
	how := map[string]string{}
	b, err := image.OpenBase(context.Background(), f.ref, image.BaseOptions{
		Images: f.opts, CacheDir: cache,
		Read: func(layer, h string) { mu.Lock(); how[layer] = h; mu.Unlock() },
		Fallback: func(layer string, err error) {
			t.Errorf("layer %s fell back to its blob: %v", layer, err)
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	for _, l := range b.Layers() {
		if got := how[l.Digest.String()]; got != want {
			t.Errorf("layer %s read from %q, want %q", l.Digest, got, want)
		}
	}
	p, err := build.Prepare(context.Background(), b, build.Options{Base: f.ref, MachineConfigs: mcs})
	if err != nil {
		t.Fatal(err)
	}
	m := *p.Manifest
	m.Base = nil
	raw, err := manifest.Marshal(&m)
	if err != nil {
		t.Fatal(err)
	}
	report, err := revert.Diff(context.Background(), p.Manifest, manifest.ImageRef{}, manifest.ImageRef{}, b.Tree())
	if err != nil {
		t.Fatal(err)
	}
	rj, err := json.MarshalIndent(report, "", " ")
	if err != nil {
		t.Fatal(err)
	}
	return &indexed{index: listIndex(t, b.Index), manifest: raw, report: rj}
}

// listIndex lists every node of ix, digests computed and kept contents
// included, one line each, sorted.
func listIndex(t *testing.T, ix *baseindex.Index) []byte {
	t.Helper()
	var lines []string
	var walk func(dir string)
	walk = func(dir string) {
		for _, n := range ix.ReadDir(dir) {
			d, err := ix.Digest(n)
			if err != nil {
				t.Errorf("Digest(%s): %v", n.Path, err)
			}
			lt, ltarget := n.Lstat()
			line := fmt.Sprintf("%s %s %04o %d:%d size=%d digest=%s target=%q lstat=%s,%q implied=%v", n.Path, n.Type, n.Mode, n.UID, n.GID, n.Size, d, n.Target, lt, ltarget, n.Implied())
			if c, ok := ix.Content(n.Path); ok {
				line += fmt.Sprintf(" content=%q", c)
			}
			lines = append(lines, line)
			if n.Type == baseindex.Dir {
				walk(n.Path)
			}
		}
	}
	walk("")
	sort.Strings(lines)
	lines = append(lines, fmt.Sprintf("len=%d", ix.Len()))
	return []byte(strings.Join(lines, "\n"))
}

// chunkedBase writes the default test base and its zstd:chunked copy,
// and returns the copy's layout directory and image options.
func chunkedBase(t *testing.T) (string, image.Options) {
	t.Helper()
	dir := t.TempDir()
	opts := imagestest.Isolate(t, dir)
	layout := filepath.Join(dir, "gzip")
	if _, err := testbase.Write(layout, testbase.Options{}); err != nil {
		t.Fatal(err)
	}
	chunked := filepath.Join(dir, "chunked")
	if err := image.Convert(context.Background(), "oci:"+layout+":latest", "oci:"+chunked+":latest", "zstd:chunked", opts); err != nil {
		t.Fatal(err)
	}
	return chunked, opts
}

// editManifest rewrites the manifest index.json points at.
func editManifest(t *testing.T, layout string, edit func(*imgspecv1.Manifest)) {
	t.Helper()
	var idx imgspecv1.Index
	readJSON(t, filepath.Join(layout, "index.json"), &idx)
	var m imgspecv1.Manifest
	readJSON(t, blobFile(layout, idx.Manifests[0].Digest), &m)
	edit(&m)
	b, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	d := digest.FromBytes(b)
	if err := os.WriteFile(blobFile(layout, d), b, 0o644); err != nil {
		t.Fatal(err)
	}
	idx.Manifests[0].Digest, idx.Manifests[0].Size = d, int64(len(b))
	ib, err := json.Marshal(idx)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(layout, "index.json"), ib, 0o644); err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, file string, v any) {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func blobFile(layout string, d digest.Digest) string {
	return filepath.Join(layout, "blobs", d.Algorithm().String(), d.Encoded())
}

const tocChecksum = "io.github.containers.zstd-chunked.manifest-checksum"

// reads indexes ref and returns how each layer was read and the
// fallbacks reported.
func reads(t *testing.T, ref string, opts image.Options) (map[string]int, []string, error) {
	t.Helper()
	var mu sync.Mutex
	how := map[string]int{}
	var fallbacks []string
	b, err := image.OpenBase(context.Background(), ref, image.BaseOptions{Images: opts,
		Read:     func(_, h string) { mu.Lock(); how[h]++; mu.Unlock() },
		Fallback: func(_ string, err error) { mu.Lock(); fallbacks = append(fallbacks, err.Error()); mu.Unlock() },
	})
	if err != nil {
		return nil, nil, err
	}
	if err := b.Close(); err != nil {
		t.Error(err)
	}
	return how, fallbacks, nil
}

// TestTOCFailures: a zstd:chunked TOC that does not match its annotation
// fails the index; a layer without the annotation is read from its blob.
func TestTOCFailures(t *testing.T) {
	t.Run("digest mismatch", func(t *testing.T) {
		layout, opts := chunkedBase(t)
		editManifest(t, layout, func(m *imgspecv1.Manifest) {
			m.Layers[1].Annotations[tocChecksum] = digest.FromString("another toc").String()
		})
		_, _, err := reads(t, "oci:"+layout+":latest", opts)
		if !errors.Is(err, baseindex.ErrTOCDigest) {
			t.Fatalf("OpenBase() error = %v, want %v", err, baseindex.ErrTOCDigest)
		}
	})
	t.Run("no annotation", func(t *testing.T) {
		layout, opts := chunkedBase(t)
		editManifest(t, layout, func(m *imgspecv1.Manifest) { m.Layers[1].Annotations = nil })
		how, fallbacks, err := reads(t, "oci:"+layout+":latest", opts)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"toc": 3, "blob": 1}; !cmp.Equal(how, want) || len(fallbacks) != 0 {
			t.Errorf("layers read %v with fallbacks %q, want %v and none", how, fallbacks, want)
		}
	})
	t.Run("position outside the blob", func(t *testing.T) {
		layout, opts := chunkedBase(t)
		editManifest(t, layout, func(m *imgspecv1.Manifest) {
			m.Layers[1].Annotations["io.github.containers.zstd-chunked.manifest-position"] = "999999999:10:10:1"
		})
		how, fallbacks, err := reads(t, "oci:"+layout+":latest", opts)
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string]int{"toc": 3, "blob": 1}; !cmp.Equal(how, want) || len(fallbacks) != 1 {
			t.Errorf("layers read %v with fallbacks %q, want %v and one", how, fallbacks, want)
		}
	})
}

// registry serves an OCI layout's image as a registry would, with range
// requests as ranges says: "ranges", "ignored" (the whole blob, 200) or
// "refused" (400); it counts the layer blob requests with and without a
// range.
type registry struct {
	layout         string
	ranges         string
	mu             sync.Mutex
	ranged, whole  int
	manifest       []byte
	manifestDigest digest.Digest
	layers         map[digest.Digest]bool
}

func (r *registry) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	switch {
	case req.URL.Path == "/v2/":
		w.WriteHeader(http.StatusOK)
	case strings.Contains(req.URL.Path, "/manifests/"):
		w.Header().Set("Content-Type", imgspecv1.MediaTypeImageManifest)
		w.Header().Set("Docker-Content-Digest", r.manifestDigest.String())
		http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(r.manifest))
	case strings.Contains(req.URL.Path, "/blobs/"):
		d, err := digest.Parse(req.URL.Path[strings.LastIndex(req.URL.Path, "/")+1:])
		if err != nil {
			http.NotFound(w, req)
			return
		}
		b, err := os.ReadFile(blobFile(r.layout, d))
		if err != nil {
			http.NotFound(w, req)
			return
		}
		r.mu.Lock()
		switch {
		case !r.layers[d] || req.Method != http.MethodGet:
		case req.Header.Get("Range") != "":
			r.ranged++
		default:
			r.whole++
		}
		r.mu.Unlock()
		switch {
		case req.Header.Get("Range") != "" && r.ranges == "refused":
			w.WriteHeader(http.StatusBadRequest)
		case r.ranges == "ignored":
			req.Header.Del("Range")
			fallthrough
		default:
			w.Header().Set("Docker-Content-Digest", d.String())
			http.ServeContent(w, req, "", time.Time{}, bytes.NewReader(b))
		}
	default:
		http.NotFound(w, req)
	}
}

// TestRemoteTOC: a registry's zstd:chunked base is indexed from range
// requests, and gives the same index as the layout it serves; a registry
// that ignores ranges still works, one that refuses them makes the index
// download the blobs.
func TestRemoteTOC(t *testing.T) {
	for _, mode := range []string{"ranges", "ignored", "refused"} {
		t.Run(mode, func(t *testing.T) {
			layout, opts := chunkedBase(t)
			r := &registry{layout: layout, ranges: mode}
			var idx imgspecv1.Index
			readJSON(t, filepath.Join(layout, "index.json"), &idx)
			r.manifestDigest = idx.Manifests[0].Digest
			var err error
			if r.manifest, err = os.ReadFile(blobFile(layout, r.manifestDigest)); err != nil {
				t.Fatal(err)
			}
			var m imgspecv1.Manifest
			readJSON(t, blobFile(layout, r.manifestDigest), &m)
			r.layers = map[digest.Digest]bool{}
			for _, l := range m.Layers {
				r.layers[l.Digest] = true
			}
			srv := httptest.NewServer(r)
			defer srv.Close()
			insecure := false
			opts.TLSVerify = &insecure
			ref := "docker://" + strings.TrimPrefix(srv.URL, "http://") + "/mcbake/base:latest"
			cache := t.TempDir()
			remote := listRef(t, ref, opts, cache)
			local := listRef(t, "oci:"+layout+":latest", opts, t.TempDir())
			if !bytes.Equal(remote.index, local.index) {
				t.Errorf("remote index differs from the local one:\n%s", cmp.Diff(string(local.index), string(remote.index)))
			}
			wantHow := map[string]int{"toc": 4}
			if mode == "refused" {
				wantHow = map[string]int{"blob": 4}
			}
			if !cmp.Equal(remote.how, wantHow) {
				t.Errorf("layers read %v, want %v", remote.how, wantHow)
			}
			if mode == "ranges" && (r.whole != 0 || r.ranged == 0) {
				t.Errorf("%d whole blob downloads and %d range requests, want none and some", r.whole, r.ranged)
			}
		})
	}
}

// indexedRef is an index listed and how its layers were read.
type indexedRef struct {
	index []byte
	how   map[string]int
}

func listRef(t *testing.T, ref string, opts image.Options, cache string) indexedRef {
	t.Helper()
	var mu sync.Mutex
	how := map[string]int{}
	b, err := image.OpenBase(context.Background(), ref, image.BaseOptions{Images: opts, CacheDir: cache,
		Read: func(_, h string) { mu.Lock(); how[h]++; mu.Unlock() }})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := b.Close(); err != nil {
			t.Error(err)
		}
	}()
	return indexedRef{index: listIndex(t, b.Index), how: how}
}

// damageViewBody flips a byte of every block of the body of each view
// cached in dir (past the head: header, fixed part and block checksums),
// so that a lookup meets the damage, and removes the layers' cache files,
// so that building the index again reads the layers.
func damageViewBody(t *testing.T, dir string) {
	t.Helper()
	views, err := filepath.Glob(filepath.Join(dir, "views", "sha256", "*"))
	if err != nil || len(views) == 0 {
		t.Fatalf("cached views: %v, %v", views, err)
	}
	for _, v := range views {
		b, err := os.ReadFile(v)
		if err != nil {
			t.Fatal(err)
		}
		const header, fixed = 32, 48
		head := header + fixed + 4*int(binary.LittleEndian.Uint32(b[header+fixed-4:]))
		for off := head + 10; off < len(b); off += 4096 {
			b[off] ^= 0xff
		}
		if err := os.WriteFile(v, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.RemoveAll(filepath.Join(dir, "layers")); err != nil {
		t.Fatal(err)
	}
}

// TestDamagedViewAfterClose: an index read from a cached view may
// outlive its image. A damaged view is found, and the index built again
// from the layers, while OpenBase has the image open: lookups after the
// image is closed answer as before the damage.
func TestDamagedViewAfterClose(t *testing.T) {
	for _, f := range indexingBase(t) {
		t.Run(f.name, func(t *testing.T) {
			ctx := context.Background()
			cache := t.TempDir()
			bo := image.BaseOptions{Images: f.opts, CacheDir: cache}
			want := func() manifest.Entry {
				b, err := image.OpenBase(ctx, f.ref, bo)
				if err != nil {
					t.Fatal(err)
				}
				defer b.Close()
				e, ok, err := b.Tree().Lstat("/etc/passwd")
				if err != nil || !ok {
					t.Fatalf("Lstat(/etc/passwd) = %v, %v", ok, err)
				}
				return e
			}()
			for _, closed := range []bool{false, true} {
				damageViewBody(t, cache)
				b, err := image.OpenBase(ctx, f.ref, bo)
				if err != nil {
					t.Fatal(err)
				}
				if closed {
					b.Close()
				}
				e, ok, err := b.Tree().Lstat("/etc/passwd")
				if err != nil || !ok || e != want {
					t.Errorf("closed %v: Lstat(/etc/passwd) over a damaged view = %+v, %v, %v; want %+v", closed, e, ok, err, want)
				}
				if !closed {
					b.Close()
				}
			}
		})
	}
}
