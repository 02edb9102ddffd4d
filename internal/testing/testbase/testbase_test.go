package testbase

import (
	"archive/tar"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

var update = flag.Bool("update", false, "rewrite testdata/golden-digests.json")

const goldenFile = "testdata/golden-digests.json"

// cases are the option sets the golden, validity and tool tests share.
func cases() []struct {
	name string
	opts Options
} {
	return []struct {
		name string
		opts Options
	}{
		{"default", Options{}},
		{"docker", Options{Format: "docker"}},
		{"multiarch", Options{Platforms: []string{"linux/amd64", "linux/arm64"}}},
		{"docker-multiarch", Options{Format: "docker", Platforms: []string{"linux/amd64", "linux/arm64/v8"}}},
		{"sized", Options{Size: &SizeOptions{TotalBytes: 2 << 20, Files: 200, Layers: 3}}},
		{"extra", Options{Tag: "extra", ExtraLayers: []Layer{extraLayer()}}},
	}
}

// extraLayer adds a file under a 0700 directory of the defaults, removes a
// default file and is uncompressed.
func extraLayer() Layer {
	return Layer{
		Files: []File{
			file("var/roothome/.bashrc", 0o644, "# root's bashrc\n"),
			owned(file("/etc/containers/registries.conf.d/99-test.conf", 0o600, "[[registry]]\nlocation = \"quay.io\"\n"), 0, 10),
		},
		Whiteouts:   []string{"etc/containers/policy.json"},
		Compression: "none",
	}
}

func write(t *testing.T, opts Options) (string, digest.Digest) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "layout")
	d, err := Write(dir, opts)
	if err != nil {
		t.Fatalf("Write(%s) = %v", dir, err)
	}
	return dir, d
}

func TestWriteIsDeterministic(t *testing.T) {
	golden := map[string]digest.Digest{}
	b, err := os.ReadFile(goldenFile)
	if err != nil && !*update {
		t.Fatal(err)
	}
	if err == nil {
		if err := json.Unmarshal(b, &golden); err != nil {
			t.Fatal(err)
		}
	}
	got := map[string]digest.Digest{}
	for _, c := range cases() {
		_, d1 := write(t, c.opts)
		_, d2 := write(t, c.opts)
		if d1 != d2 {
			t.Errorf("%s: two Write runs gave %s and %s", c.name, d1, d2)
		}
		got[c.name] = d1
	}
	if *update {
		b, err := json.MarshalIndent(got, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(goldenFile, append(b, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	if diff := cmp.Diff(golden, got); diff != "" {
		t.Errorf("top digests differ from %s (-want +got), run with -update if the change is intended:\n%s", goldenFile, diff)
	}
}

func TestLayoutIsValid(t *testing.T) {
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			dir, top := write(t, c.opts)
			v := &validator{t: t, dir: dir, docker: c.opts.Format == "docker", seen: map[digest.Digest]bool{}}
			v.layout(top, tagOf(c.opts))
			v.unreferenced()
		})
	}
}

func tagOf(o Options) string {
	if o.Tag == "" {
		return "latest"
	}
	return o.Tag
}

// validator checks a layout and reports every problem it finds.
type validator struct {
	t      *testing.T
	dir    string
	docker bool
	seen   map[digest.Digest]bool
}

func (v *validator) layout(top digest.Digest, tag string) {
	b, err := os.ReadFile(filepath.Join(v.dir, v1.ImageLayoutFile))
	if err != nil || string(b) != `{"imageLayoutVersion":"1.0.0"}` {
		v.t.Errorf("oci-layout = %q, %v", b, err)
	}
	var idx v1.Index
	if err := readJSON(filepath.Join(v.dir, "index.json"), &idx); err != nil {
		v.t.Fatal(err)
	}
	if idx.SchemaVersion != 2 || idx.MediaType != v1.MediaTypeImageIndex || len(idx.Manifests) != 1 {
		v.t.Fatalf("index.json = %+v, want one entry in a schema 2 OCI index", idx)
	}
	d := idx.Manifests[0]
	if d.Digest != top || d.Annotations[v1.AnnotationRefName] != tag {
		v.t.Errorf("index.json entry = %s tagged %q, want %s tagged %q", d.Digest, d.Annotations[v1.AnnotationRefName], top, tag)
	}
	v.descriptor(d)
}

// blob reads a blob, checking its digest and size against the descriptor.
func (v *validator) blob(d v1.Descriptor) []byte {
	v.seen[d.Digest] = true
	b, err := os.ReadFile(blobPath(v.dir, d.Digest))
	if err != nil {
		v.t.Errorf("blob %s: %v", d.Digest, err)
		return nil
	}
	if got := digest.FromBytes(b); got != d.Digest || int64(len(b)) != d.Size {
		v.t.Errorf("blob %s: digest %s size %d, descriptor says size %d", d.Digest, got, len(b), d.Size)
	}
	return b
}

func (v *validator) descriptor(d v1.Descriptor) {
	switch d.MediaType {
	case v1.MediaTypeImageIndex, mediaTypeDockerManifestList:
		v.index(d)
	case v1.MediaTypeImageManifest, mediaTypeDockerManifest:
		v.manifest(d)
	default:
		v.t.Errorf("descriptor %s: unexpected media type %q", d.Digest, d.MediaType)
	}
}

func (v *validator) index(d v1.Descriptor) {
	want := map[bool]string{false: v1.MediaTypeImageIndex, true: mediaTypeDockerManifestList}[v.docker]
	var idx v1.Index
	if err := json.Unmarshal(v.blob(d), &idx); err != nil || idx.MediaType != want || len(idx.Manifests) < 2 {
		v.t.Errorf("index %s: %v, media type %q (want %q), %d manifests", d.Digest, err, idx.MediaType, want, len(idx.Manifests))
		return
	}
	for _, m := range idx.Manifests {
		if m.Platform == nil {
			v.t.Errorf("index %s: manifest %s has no platform", d.Digest, m.Digest)
		}
		v.manifest(m)
	}
}

func (v *validator) manifest(d v1.Descriptor) {
	wantType, wantConfig := v1.MediaTypeImageManifest, v1.MediaTypeImageConfig
	if v.docker {
		wantType, wantConfig = mediaTypeDockerManifest, mediaTypeDockerConfig
	}
	var m v1.Manifest
	if err := json.Unmarshal(v.blob(d), &m); err != nil {
		v.t.Errorf("manifest %s: %v", d.Digest, err)
		return
	}
	if m.SchemaVersion != 2 || m.MediaType != wantType || d.MediaType != wantType || m.Config.MediaType != wantConfig {
		v.t.Errorf("manifest %s: schema %d, media type %q (descriptor %q), config %q; want 2, %q, %q",
			d.Digest, m.SchemaVersion, m.MediaType, d.MediaType, m.Config.MediaType, wantType, wantConfig)
	}
	var cfg v1.Image
	if err := json.Unmarshal(v.blob(m.Config), &cfg); err != nil {
		v.t.Errorf("config %s: %v", m.Config.Digest, err)
		return
	}
	v.config(cfg, d.Platform, len(m.Layers))
	for i, l := range m.Layers {
		if i < len(cfg.RootFS.DiffIDs) {
			v.layer(l, cfg.RootFS.DiffIDs[i])
		}
	}
}

func (v *validator) config(cfg v1.Image, p *v1.Platform, layers int) {
	if p != nil && (cfg.OS != p.OS || cfg.Architecture != p.Architecture || cfg.Variant != p.Variant) {
		v.t.Errorf("config platform %s/%s/%s, descriptor says %+v", cfg.OS, cfg.Architecture, cfg.Variant, *p)
	}
	if cfg.Config.Labels[v1.AnnotationTitle] != Title {
		v.t.Errorf("config labels = %v, want %s=%s", cfg.Config.Labels, v1.AnnotationTitle, Title)
	}
	if cfg.Created == nil || !cfg.Created.Equal(created) || cfg.RootFS.Type != "layers" {
		v.t.Errorf("config created %v, rootfs type %q", cfg.Created, cfg.RootFS.Type)
	}
	if len(cfg.RootFS.DiffIDs) != layers || len(cfg.History) != layers {
		v.t.Errorf("config has %d diff IDs and %d history entries for %d layers", len(cfg.RootFS.DiffIDs), len(cfg.History), layers)
	}
}

func (v *validator) layer(d v1.Descriptor, diffID digest.Digest) {
	allowed := map[string]bool{v1.MediaTypeImageLayer: true, v1.MediaTypeImageLayerGzip: true, v1.MediaTypeImageLayerZstd: true}
	if v.docker {
		allowed = map[string]bool{mediaTypeDockerLayer: true, mediaTypeDockerLayerGzip: true}
	}
	if !allowed[d.MediaType] {
		v.t.Errorf("layer %s: media type %q not allowed here", d.Digest, d.MediaType)
	}
	b := v.blob(d)
	r, err := decompressor(bytes.NewReader(b), d.MediaType)
	if err != nil {
		v.t.Errorf("layer %s: %v", d.Digest, err)
		return
	}
	raw, err := io.ReadAll(r)
	if err != nil {
		v.t.Errorf("layer %s: decompressing: %v", d.Digest, err)
		return
	}
	if got := digest.FromBytes(raw); got != diffID {
		v.t.Errorf("layer %s: uncompressed digest %s, diff ID %s", d.Digest, got, diffID)
	}
	for _, problem := range tarProblems(raw) {
		v.t.Errorf("layer %s: %s", d.Digest, problem)
	}
}

// tarProblems lists what is not deterministic or not ordered in a layer
// tar: owners by name, mtimes, order, missing parents, late hard link
// targets.
func tarProblems(raw []byte) []string {
	var problems []string
	seen := map[string]byte{}
	prev, inLinks := "", false
	tr := tar.NewReader(bytes.NewReader(raw))
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return problems
		}
		if err != nil {
			return append(problems, err.Error())
		}
		name := strings.TrimSuffix(h.Name, "/")
		if h.Uname != "" || h.Gname != "" || h.ModTime.Unix() != 0 || (h.Typeflag == tar.TypeDir) != strings.HasSuffix(h.Name, "/") {
			problems = append(problems, "entry "+h.Name+": names, mtime or trailing slash")
		}
		isLink := h.Typeflag == tar.TypeLink
		if (isLink == inLinks && name <= prev) || (inLinks && !isLink) {
			problems = append(problems, "entry "+h.Name+" out of order after "+prev)
		}
		prev, inLinks = name, isLink
		if parent := path.Dir(name); parent != "." && seen[parent] != tar.TypeDir {
			problems = append(problems, "entry "+h.Name+" before its parent directory")
		}
		if isLink && seen[h.Linkname] != tar.TypeReg {
			problems = append(problems, "hard link "+h.Name+" before its target "+h.Linkname)
		}
		seen[name] = h.Typeflag
	}
}

// unreferenced checks every blob file was reached from index.json and is
// named by its sha256.
func (v *validator) unreferenced() {
	blobDir := filepath.Join(v.dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobDir)
	if err != nil {
		v.t.Fatal(err)
	}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(blobDir, e.Name()))
		if err != nil {
			v.t.Error(err)
			continue
		}
		sum := sha256.Sum256(b)
		if hex.EncodeToString(sum[:]) != e.Name() {
			v.t.Errorf("blob %s: content hashes to %x", e.Name(), sum)
		}
		if !v.seen[digest.NewDigestFromEncoded(digest.SHA256, e.Name())] {
			v.t.Errorf("blob %s is not referenced", e.Name())
		}
	}
}

func TestUnpackDefault(t *testing.T) {
	dir, _ := write(t, Options{})
	files, err := Unpack(dir)
	if err != nil {
		t.Fatal(err)
	}
	git := files["usr/bin/git"]
	tests := []struct {
		path string
		want *File // nil: absent
	}{
		{"etc/issue.d/50-legacy.issue", nil},
		{"etc/yum.repos.d/fedora.repo", nil},
		{"etc/yum.repos.d/fedora-updates.repo", nil},
		{"etc/issue.d/21-coreos.issue", &File{Path: "etc/issue.d/21-coreos.issue", Type: tar.TypeReg, Mode: 0o644, Content: []byte("Red Hat Enterprise Linux CoreOS \\r\n")}},
		{"etc/sudoers.d", &File{Path: "etc/sudoers.d", Type: tar.TypeDir, Mode: 0o750}},
		{"etc/sudoers.d/coreos-sudo-group", &File{Path: "etc/sudoers.d/coreos-sudo-group", Type: tar.TypeReg, Mode: 0o440, Content: []byte("# CoreOS: core may sudo without a password\ncore ALL=(ALL) NOPASSWD: ALL\n")}},
		{"usr/lib/os-release", &File{Path: "usr/lib/os-release", Type: tar.TypeReg, Mode: 0o644, Content: []byte(osRelease(baseVersion))}},
		{"usr/libexec/git-core/git", &File{Path: "usr/libexec/git-core/git", Type: tar.TypeLink, Mode: 0o755, Target: "usr/bin/git", Content: git.Content}},
		{"usr/libexec/git-core", &File{Path: "usr/libexec/git-core", Type: tar.TypeDir, Mode: 0o755}},
		{"usr/local", &File{Path: "usr/local", Type: tar.TypeSymlink, Mode: 0o777, Target: "../var/usrlocal"}},
		{"root", &File{Path: "root", Type: tar.TypeSymlink, Mode: 0o777, Target: "var/roothome"}},
		{"var/roothome", &File{Path: "var/roothome", Type: tar.TypeDir, Mode: 0o700}},
		{"etc/os-release", &File{Path: "etc/os-release", Type: tar.TypeSymlink, Mode: 0o777, Target: "../usr/lib/os-release"}},
		{"etc/passwd", &File{Path: "etc/passwd", Type: tar.TypeReg, Mode: 0o644, Content: []byte("root:x:0:0:root:/root:/bin/bash\n")}},
		{"etc/shadow", &File{Path: "etc/shadow", Type: tar.TypeReg, Mode: 0, Content: []byte("root:*::0:99999:7:::\n")}},
		{"etc/openvswitch", &File{Path: "etc/openvswitch", Type: tar.TypeDir, Mode: 0o775, UID: 800, GID: 801}},
		{"etc/kubernetes", &File{Path: "etc/kubernetes", Type: tar.TypeDir, Mode: 0o755}},
		{"etc/systemd/system/multi-user.target.wants/crio.service", &File{Path: "etc/systemd/system/multi-user.target.wants/crio.service", Type: tar.TypeSymlink, Mode: 0o777, Target: "/usr/lib/systemd/system/crio.service"}},
		{"etc/systemd/system/sockets.target.wants/docker.socket", nil},
	}
	for _, tt := range tests {
		got, ok := files[tt.path]
		switch {
		case tt.want == nil && ok:
			t.Errorf("Unpack()[%q] = %+v, want absent", tt.path, got)
		case tt.want != nil && !ok:
			t.Errorf("Unpack()[%q] absent, want %+v", tt.path, *tt.want)
		case tt.want != nil:
			if diff := cmp.Diff(*tt.want, got); diff != "" {
				t.Errorf("Unpack()[%q] mismatch (-want +got):\n%s", tt.path, diff)
			}
		}
	}
	if got, want := children(files, "etc/yum.repos.d"), []string{"rhel-9.6-baseos.repo"}; !cmp.Equal(got, want) {
		t.Errorf("etc/yum.repos.d holds %v, want %v", got, want)
	}
	if !strings.Contains(string(files["usr/bin/bash"].Content), "x86_64") {
		t.Errorf("usr/bin/bash = %q, want the amd64 fake binary", files["usr/bin/bash"].Content)
	}
}

func children(files map[string]File, dir string) []string {
	var out []string
	for p := range files {
		if path.Dir(p) == dir {
			out = append(out, path.Base(p))
		}
	}
	sort.Strings(out)
	return out
}

// TestDefaultEnablement checks the enablement symlinks are exactly what
// systemctl preset would create from the presets and [Install] sections.
func TestDefaultEnablement(t *testing.T) {
	dir, _ := write(t, Options{})
	files, err := Unpack(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, p := range []string{"40-coreos.preset", "90-default.preset"} {
		for _, line := range strings.Split(string(files[presetDir+"/"+p].Content), "\n") {
			name, ok := strings.CutPrefix(line, "enable ")
			if !ok {
				continue
			}
			unit, ok := files[unitDir+"/"+name]
			if !ok {
				t.Errorf("preset %s enables %s, which the image lacks", p, name)
				continue
			}
			for link, target := range installLinks(name, string(unit.Content)) {
				want[link] = target
			}
		}
	}
	got := map[string]string{}
	for p, f := range files {
		if strings.HasPrefix(p, etcUnits+"/") && f.Type == tar.TypeSymlink {
			got[p] = f.Target
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("enablement symlinks mismatch (-want +got):\n%s", diff)
	}
}

// installLinks is what systemctl enable creates for a unit: WantedBy= and
// Alias= links, templates instantiated with DefaultInstance=.
func installLinks(name, content string) map[string]string {
	links := map[string]string{}
	_, install, ok := strings.Cut(content, "[Install]\n")
	if !ok {
		return links
	}
	keys := map[string][]string{}
	for _, line := range strings.Split(install, "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			keys[k] = append(keys[k], strings.Fields(v)...)
		}
	}
	target, instance := "/"+unitDir+"/"+name, name
	if d := keys["DefaultInstance"]; len(d) == 1 {
		instance = strings.Replace(name, "@.", "@"+d[0]+".", 1)
	}
	for _, w := range keys["WantedBy"] {
		links[etcUnits+"/"+w+".wants/"+instance] = target
	}
	for _, a := range keys["Alias"] {
		links[etcUnits+"/"+a] = target
	}
	return links
}

func TestUnitsHaveSections(t *testing.T) {
	for name, content := range units {
		kind := path.Ext(name)
		want := map[string][]string{
			".service": {"[Unit]", "[Service]"},
			".socket":  {"[Unit]", "[Socket]", "[Install]"},
			".target":  {"[Unit]"},
		}[kind]
		for _, section := range want {
			if !strings.Contains(content, section+"\n") {
				t.Errorf("unit %s lacks %s", name, section)
			}
		}
		if strings.HasSuffix(name, ".target") && strings.Contains(content, "[Install]") {
			t.Errorf("target %s has an [Install] section", name)
		}
	}
	if strings.Contains(units["rpm-ostreed.service"], "[Install]") {
		t.Error("rpm-ostreed.service has an [Install] section, want none")
	}
}

func TestExtraLayers(t *testing.T) {
	dir, _ := write(t, Options{ExtraLayers: []Layer{extraLayer()}})
	files, err := Unpack(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]File{
		"var/roothome":         {Path: "var/roothome", Type: tar.TypeDir, Mode: 0o700},
		"var/roothome/.bashrc": {Path: "var/roothome/.bashrc", Type: tar.TypeReg, Mode: 0o644, Content: []byte("# root's bashrc\n")},
		"etc/containers/registries.conf.d/99-test.conf": {Path: "etc/containers/registries.conf.d/99-test.conf", Type: tar.TypeReg,
			Mode: 0o600, GID: 10, Content: []byte("[[registry]]\nlocation = \"quay.io\"\n")},
		"etc/containers/registries.conf.d": {Path: "etc/containers/registries.conf.d", Type: tar.TypeDir, Mode: 0o755},
	}
	got := map[string]File{}
	for p := range want {
		got[p] = files[p]
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Unpack() mismatch (-want +got):\n%s", diff)
	}
	if _, ok := files["etc/containers/policy.json"]; ok {
		t.Error("etc/containers/policy.json survived its whiteout")
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if n, last := len(m.Layers), m.Layers[len(m.Layers)-1].MediaType; n != 5 || last != v1.MediaTypeImageLayer {
		t.Errorf("manifest has %d layers, the last %q; want 5, %q", n, last, v1.MediaTypeImageLayer)
	}
}

func TestWriteErrors(t *testing.T) {
	extra := func(ls ...Layer) Options { return Options{ExtraLayers: ls} }
	one := func(fs ...File) Options { return extra(Layer{Files: fs}) }
	tests := []struct {
		name    string
		opts    Options
		wantErr string
	}{
		{"unclean path", one(file("etc/../x", 0o644, "")), "not a clean path"},
		{"escaping path", one(file("../x", 0o644, "")), "not a clean path"},
		{"duplicate path", one(file("etc/x", 0o644, ""), file("/etc/x", 0o644, "")), "declared twice"},
		{"zstd in docker", Options{Format: "docker", ExtraLayers: []Layer{{Compression: "zstd"}}}, "docker schema2 has no zstd"},
		{"unknown compression", extra(Layer{Compression: "xz"}), "unknown compression"},
		{"child of a lower symlink", one(file("usr/local/bin/tool", 0o755, "")), "not a directory in the layers below"},
		{"child of a file in the layer", one(file("etc/a", 0o644, ""), file("etc/a/b", 0o644, "")), "not a directory in this layer"},
		{"hard link to a lower file", one(File{Path: "usr/bin/bash2", Type: tar.TypeLink, Target: "usr/bin/bash"}), "not a regular file of the same layer"},
		{"symlink without target", one(File{Path: "etc/l", Type: tar.TypeSymlink}), "need a target"},
		{"directory with content", one(File{Path: "etc/d", Type: tar.TypeDir, Content: []byte("x")}), "only regular files"},
		{"fifo", one(File{Path: "etc/fifo", Type: tar.TypeFifo}), "unsupported type"},
		{"mode too large", one(file("etc/x", 0o10000, "")), "not within 07777"},
		{"whiteout name as a file", one(file("etc/.wh.x", 0o644, "")), "whiteout names are reserved"},
		{"bad whiteout", extra(Layer{Whiteouts: []string{"/"}}), "whiteout"},
		{"unknown format", Options{Format: "v2s1"}, "unknown format"},
		{"bad platform", Options{Platforms: []string{"amd64"}}, "want os/arch"},
		{"duplicate platform", Options{Platforms: []string{"linux/amd64", "linux/amd64"}}, "listed twice"},
		{"no layers", Options{Layers: []Layer{}}, "no layers"},
		{"more bulk layers than files", Options{Size: &SizeOptions{TotalBytes: 10, Files: 2, Layers: 3}}, "layers must be between"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Write(filepath.Join(t.TempDir(), "layout"), tt.opts)
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("Write() = %v, want an error containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestWriteRefusesNonEmptyDir(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "x"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Write(dir, Options{}); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("Write(non-empty dir) = %v, want a not empty error", err)
	}
}

func TestSize(t *testing.T) {
	size := SizeOptions{TotalBytes: 2 << 20, Files: 200, Layers: 3}
	dir, _ := write(t, Options{Size: &size})
	files, err := Unpack(dir)
	if err != nil {
		t.Fatal(err)
	}
	var n, total int64
	for p, f := range files {
		if strings.Contains(p, "testbase-bulk/") && f.Type == tar.TypeReg {
			n++
			total += int64(len(f.Content))
		}
	}
	if n != int64(size.Files) || total != size.TotalBytes {
		t.Errorf("bulk content: %d files, %d bytes; want %d, %d", n, total, size.Files, size.TotalBytes)
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(m.Layers) != 4+size.Layers {
		t.Fatalf("manifest has %d layers, want %d", len(m.Layers), 4+size.Layers)
	}
	var compressed int64
	for _, l := range m.Layers[4:] {
		compressed += l.Size
	}
	if ratio := float64(total) / float64(compressed); ratio < 2 || ratio > 3.5 {
		t.Errorf("bulk gzip ratio = %.2f, want between 2 and 3.5", ratio)
	}
}

func TestMultiArch(t *testing.T) {
	dir, _ := write(t, Options{Platforms: []string{"linux/amd64", "linux/arm64"}})
	var top v1.Index
	if err := readJSON(filepath.Join(dir, "index.json"), &top); err != nil {
		t.Fatal(err)
	}
	var idx v1.Index
	if err := readJSON(blobPath(dir, top.Manifests[0].Digest), &idx); err != nil {
		t.Fatal(err)
	}
	var layers [2][]v1.Descriptor
	for i, d := range idx.Manifests {
		var m v1.Manifest
		if err := readJSON(blobPath(dir, d.Digest), &m); err != nil {
			t.Fatal(err)
		}
		layers[i] = m.Layers
	}
	if layers[0][0].Digest == layers[1][0].Digest {
		t.Error("the first layer is the same for amd64 and arm64, want per-architecture fake binaries")
	}
	if diff := cmp.Diff(layers[0][1:], layers[1][1:]); diff != "" {
		t.Errorf("later layers differ between platforms (-amd64 +arm64):\n%s", diff)
	}
}

func TestDockerFormatHasNoZstd(t *testing.T) {
	dir, _ := write(t, Options{Format: "docker"})
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range m.Layers {
		if l.MediaType != mediaTypeDockerLayerGzip {
			t.Errorf("layer %d media type = %q, want %q", i, l.MediaType, mediaTypeDockerLayerGzip)
		}
	}
}

func TestDefaultBaseIsSmall(t *testing.T) {
	dir, _ := write(t, Options{})
	var total int64
	err := filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		fi, err := d.Info()
		total += fi.Size()
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if total > 1<<20 {
		t.Errorf("default layout is %d bytes, want under 1 MiB", total)
	}
}

// TestOstreeShape: an ostree-shaped base unpacks to the same tree as the
// plain one, with each regular file a hard link to an object written
// right before it, and the objects under sysroot/ostree/repo/objects.
func TestOstreeShape(t *testing.T) {
	size := &SizeOptions{TotalBytes: 1 << 20, Files: 300, Layers: 3}
	plainDir, _ := write(t, Options{Size: size})
	dir, d := write(t, Options{Size: size, Ostree: true})
	if _, again := write(t, Options{Size: size, Ostree: true}); again != d {
		t.Errorf("second ostree-shaped Write() = %s, want %s", again, d)
	}
	plain, err := Unpack(plainDir)
	if err != nil {
		t.Fatal(err)
	}
	shaped, err := Unpack(dir)
	if err != nil {
		t.Fatal(err)
	}
	for p, want := range plain {
		got, ok := shaped[p]
		if !ok {
			t.Errorf("%s missing from the ostree-shaped tree", p)
			continue
		}
		if want.Type == tar.TypeReg || want.Type == tar.TypeLink {
			if got.Type != tar.TypeLink || !strings.HasPrefix(got.Target, objectsDir+"/") {
				t.Errorf("%s = type %q target %q, want a hard link to an object", p, got.Type, got.Target)
			}
			want.Type, want.Target = got.Type, got.Target
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("%s mismatch (-plain +ostree):\n%s", p, diff)
		}
	}
	for p := range shaped {
		if _, ok := plain[p]; !ok && !strings.HasPrefix(p+"/", "sysroot/ostree/") {
			t.Errorf("%s is only in the ostree-shaped tree", p)
		}
	}
	m, err := readManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range m.Layers {
		entries, err := readLayer(blobPath(dir, l.Digest), l.MediaType)
		if err != nil {
			t.Fatal(err)
		}
		for _, problem := range ostreeProblems(entries) {
			t.Errorf("layer %s: %s", l.Digest, problem)
		}
	}
}

// ostreeProblems lists the entries of an ostree-shaped layer that are not
// where ostree-ext would write them: directories first, every regular
// file an object followed by its hard links.
func ostreeProblems(entries []entry) []string {
	var problems []string
	seen := map[string]byte{}
	dirsDone := false
	for _, e := range entries {
		if e.typ == tar.TypeDir && dirsDone {
			problems = append(problems, "directory "+e.name+" after other entries")
		}
		dirsDone = dirsDone || e.typ != tar.TypeDir
		isMarker := strings.HasPrefix(path.Base(e.name), whiteoutPrefix)
		switch {
		case e.typ == tar.TypeReg && !isMarker && !strings.HasPrefix(e.name, objectsDir+"/"):
			problems = append(problems, "regular file "+e.name+" outside the objects")
		case e.typ == tar.TypeLink && seen[e.target] != tar.TypeReg:
			problems = append(problems, "hard link "+e.name+" before its object "+e.target)
		}
		if parent := path.Dir(e.name); parent != "." && seen[parent] != tar.TypeDir {
			problems = append(problems, e.name+" before its parent directory")
		}
		seen[e.name] = e.typ
	}
	return problems
}
