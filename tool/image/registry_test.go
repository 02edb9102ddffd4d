package image

import (
	"context"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker/reference"

	"github.com/mcbake/mcbake/tool/internal/testing/registrytest"
)

// registryCase is a registry holding the base fixture at os/base:latest,
// and options that reach it.
func registryCase(t *testing.T) (*registrytest.Registry, Options, string) {
	t.Helper()
	if _, err := exec.LookPath("skopeo"); err != nil {
		t.Skip("skopeo not installed (make test installs it): skipping the registry test")
	}
	reg := registrytest.Start(t)
	opts := testEnv(t)
	opts.Registry = Registry{Creds: registrytest.User + ":" + registrytest.Password, CertDir: reg.CertDir}
	base, _ := baseFixture(t, t.TempDir())
	return reg, opts, reg.Push(t, base, "os/base:latest")
}

// TestAppendRetriesAcrossRegistryRestart opens the base, stops the
// registry, and pushes while it restarts: the push is retried and
// succeeds; without retries it fails at once.
func TestAppendRetriesAcrossRegistryRestart(t *testing.T) {
	reg, opts, base := registryCase(t)
	im := mustOpen(t, base, opts)
	layer, _ := newLayerFixture(t, t.TempDir())
	reg.Stop()
	dest := "docker://" + reg.Host + "/ci/retried:latest"
	if _, err := Append(context.Background(), im, dest, defaultAppend(layer), opts); err == nil || !retryable(err) {
		t.Fatalf("Append to a stopped registry without retries = %v, want a transient error", err)
	}
	go func() { time.Sleep(1200 * time.Millisecond); reg.Start() }()
	opts.Retry = Retry{MaxRetry: 5, Delay: 500 * time.Millisecond}
	d, err := Append(context.Background(), im, dest, defaultAppend(layer), opts)
	if err != nil {
		t.Fatalf("Append across a registry restart: %v", err)
	}
	pushed := mustOpen(t, "docker://"+reg.Host+"/ci/retried@"+d.String(), opts)
	if got := pushed.Layers(); len(got) != len(im.Layers())+1 {
		t.Errorf("pushed image has %d layers, want %d", len(got), len(im.Layers())+1)
	}
}

// TestMountIntoAhead: MountInto mounts every layer of a registry base
// into the destination's repository by itself, before any image is
// written there (a build starts it once the base's manifest is read, and
// its copy then finds the layers there), with one request a layer (no
// HEAD: crossMount), and goes on when the context it was started with is
// done: OpenBaseWhile's is, once the base is open.
func TestMountIntoAhead(t *testing.T) {
	reg, opts, base := registryCase(t)
	im := mustOpen(t, base, opts)
	before, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	im.MountInto(ctx, "docker://"+reg.Host+"/ci/ahead:latest", opts)
	cancel()
	im.mountsDone(context.Background())
	after, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	mounted := after.Mounted[len(before.Mounted):]
	for _, l := range im.Layers() {
		if !slices.Contains(mounted, l.Digest.String()) {
			t.Errorf("layer %s was not mounted (mounted %v)", l.Digest, mounted)
		}
	}
	if up := after.Uploaded[len(before.Uploaded):]; len(up) > 0 {
		t.Errorf("uploaded %v, want nothing", up)
	}
	if asked := after.Checked[len(before.Checked):]; len(asked) > 0 {
		t.Errorf("asked about %v, want only the mounts", asked)
	}
	if present := im.mounted.present; len(present) != len(im.Layers()) {
		t.Errorf("%d layers known present, want %d", len(present), len(im.Layers()))
	}
	if tags, _ := reg.Tags("ci/ahead"); len(tags) > 0 {
		t.Errorf("tags %v in the destination, want none", tags)
	}
}

// TestAppendMountsFromRecords: without MountInto, the copy itself mounts
// the base's layers into another repository of the registry, from the
// blob-info cache's records of where they live and how they are
// compressed, which Open makes (recordLocations; the compression record
// is set by reflection, recordCompressor): nothing of the base is
// uploaded.
func TestAppendMountsFromRecords(t *testing.T) {
	reg, opts, base := registryCase(t)
	im := mustOpen(t, base, opts)
	layer, _ := newLayerFixture(t, t.TempDir())
	before, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Append(context.Background(), im, "docker://"+reg.Host+"/ci/recorded:latest", defaultAppend(layer), opts); err != nil {
		t.Fatal(err)
	}
	after, err := reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range im.Layers() {
		if !slices.Contains(after.Mounted[len(before.Mounted):], l.Digest.String()) {
			t.Errorf("base layer %s was not mounted", l.Digest)
		}
		if slices.Contains(after.Uploaded[len(before.Uploaded):], l.Digest.String()) {
			t.Errorf("base layer %s was uploaded", l.Digest)
		}
	}
}

// TestPullArtifactThroughContainersImage: without the registry client,
// the artifact is read through containers/image, and its errors are its
// own: a missing artifact is the registry's "manifest unknown", not a
// digest mismatch.
func TestPullArtifactThroughContainersImage(t *testing.T) {
	reg, opts, _ := registryCase(t)
	sys, err := opts.destinationContext()
	if err != nil {
		t.Fatal(err)
	}
	pc, err := opts.policyContext()
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Destroy()
	named, err := reference.ParseNormalizedNamed(reg.Host + "/ci/index")
	if err != nil {
		t.Fatal(err)
	}
	d := imgspecv1.Descriptor{MediaType: imgspecv1.MediaTypeImageManifest, Digest: digest.FromString("no such artifact"), Size: 100}
	_, err = pullArtifact(context.Background(), nil, sys, pc, named, d, &Image{}, nil, func([]byte) error { return nil })
	if err == nil || !isNotFound(err) || strings.Contains(err.Error(), "does not match") {
		t.Errorf("pullArtifact(a missing artifact) = %v, want the registry's not found", err)
	}
}

// TestOpenFailuresDoNotPanic opens registry images in every failing way:
// each is an error naming the reference, none a panic, and none is
// retried into success.
func TestOpenFailuresDoNotPanic(t *testing.T) {
	reg, opts, base := registryCase(t)
	wrong := opts
	wrong.Creds = registrytest.User + ":wrong"
	untrusted := opts
	untrusted.CertDir = t.TempDir()
	stopped := opts
	tests := []struct {
		name string
		ref  string
		opts Options
		want string
	}{
		{"wrong password", base, wrong, "authentication required"},
		{"missing tag", "docker://" + reg.Host + "/os/base:nope", opts, "manifest unknown"},
		{"missing repository", "docker://" + reg.Host + "/os/nothing:latest", opts, "manifest unknown"},
		{"untrusted CA", base, untrusted, "x509: certificate signed by unknown authority"},
		{"no such auth file", base, Options{Registry: Registry{AuthFile: "/nonexistent/auth.json"}, InsecurePolicy: true, CacheDir: opts.CacheDir}, "/nonexistent/auth.json"},
		{"registry down", base, stopped, "connection refused"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "registry down" {
				reg.Stop()
			}
			tt.opts.Retry = Retry{MaxRetry: 1, Delay: 10 * time.Millisecond}
			im, err := Open(context.Background(), tt.ref, tt.opts)
			if err == nil {
				im.Close()
				t.Fatalf("Open succeeded")
			}
			if msg := err.Error(); !strings.Contains(msg, "opening "+tt.ref) && tt.name != "no such auth file" || !strings.Contains(msg, tt.want) {
				t.Errorf("Open error %q, want it to name %s and say %q", msg, tt.ref, tt.want)
			}
		})
	}
}

// TestOpenWithoutTLSVerification: --tls-verify=false reaches a registry
// whose CA is not trusted.
func TestOpenWithoutTLSVerification(t *testing.T) {
	_, opts, base := registryCase(t)
	opts.CertDir = t.TempDir()
	opts.TLSVerify = new(bool)
	mustOpen(t, base, opts)
}

// TestUploadAhead: a layer uploaded ahead (UploadAhead) goes into the
// destination's repository once; uploaded ahead again, it is only asked
// about. Append, given that upload, does not upload the layer again, and
// puts its other new layer and the config once each (uploadRest); the
// image reads back. An upload ahead that fails (no credentials) leaves the
// layer to the copy.
func TestUploadAhead(t *testing.T) {
	reg, opts, base := registryCase(t)
	ctx := context.Background()
	im := mustOpen(t, base, opts)
	dir := t.TempDir()
	lower := gzipLayer(t, map[string]string{"usr/libexec/mcbake/x": "guard\n"})
	p := filepath.Join(dir, "lower.tar.gz")
	writeFile(t, p, lower.blob)
	gl := NewLayer{Path: p, Digest: lower.digest, DiffID: lower.diffID, Size: int64(len(lower.blob)),
		MediaType: imgspecv1.MediaTypeImageLayerGzip, History: "guard"}
	count := func(ds []string, d digest.Digest) (n int) {
		for _, x := range ds {
			if strings.HasSuffix(x, d.String()) {
				n++
			}
		}
		return n
	}
	requests := func() registrytest.Requests {
		t.Helper()
		r, err := reg.Requests()
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	before := requests()

	noCreds := opts
	noCreds.Registry.Creds = ""
	if u := UploadAhead(ctx, "docker://"+reg.Host+"/ci/refused:latest", gl, noCreds); u == nil {
		t.Fatal("UploadAhead(docker://) = nil")
	} else if u.wait(ctx); u.ok {
		t.Error("UploadAhead without credentials succeeded")
	}

	dest := "docker://" + reg.Host + "/ci/ahead-upload:latest"
	for i := range 2 {
		u := UploadAhead(ctx, dest, gl, opts)
		u.wait(ctx)
		if !u.ok {
			t.Fatalf("UploadAhead #%d failed", i+1)
		}
	}
	r := requests()
	if n := count(r.Uploaded[len(before.Uploaded):], gl.Digest); n != 1 {
		t.Errorf("the layer was uploaded %d times, want once (the second upload ahead only asks)", n)
	}
	if n := count(r.Checked[len(before.Checked):], gl.Digest); n != 3 {
		t.Errorf("the layer was asked about %d times, want 3 (one refused upload, two uploads ahead)", n)
	}

	nl, _ := newLayerFixture(t, dir)
	ao := defaultAppend(nl)
	ao.Layers = []NewLayer{gl, nl}
	ao.Ahead = []*Upload{UploadAhead(ctx, dest, gl, opts)}
	tr := &Transfer{}
	ao.Progress = tr.Add
	d, err := Append(ctx, im, dest, ao, opts)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	pushed := mustOpen(t, "docker://"+reg.Host+"/ci/ahead-upload@"+d.String(), opts)
	var got []digest.Digest
	for _, l := range pushed.Layers() {
		got = append(got, l.Digest)
	}
	var want []digest.Digest
	for _, l := range im.Layers() {
		want = append(want, l.Digest)
	}
	if want = append(want, gl.Digest, nl.Digest); !slices.Equal(got, want) {
		t.Errorf("pushed layers %v, want %v", got, want)
	}
	after := requests()
	uploaded := after.Uploaded[len(r.Uploaded):]
	if count(uploaded, gl.Digest) != 0 || count(uploaded, nl.Digest) != 1 || len(uploaded) != 2 {
		t.Errorf("Append uploaded %v; want the new layer and the config once each, not the layer uploaded ahead", uploaded)
	}
	// The copy asked about neither new layer: the upload ahead asked about
	// the first once, uploadRest about the second once.
	checked := after.Checked[len(r.Checked):]
	if g, n := count(checked, gl.Digest), count(checked, nl.Digest); g != 1 || n != 1 {
		t.Errorf("asked about the layer uploaded ahead %d times, the other new layer %d times; want once each (not by the copy)", g, n)
	}
	// The report: the new layer and the config written (by uploadRest),
	// the layer uploaded ahead found there, the base layers mounted or there.
	if up, written, skipped := tr.Totals(); written != 2 || skipped != len(im.Layers())+1 || up <= nl.Size {
		t.Errorf("report: %d bytes in %d blobs, %d skipped; want more than %d bytes in 2, %d skipped", up, written, skipped, nl.Size, len(im.Layers())+1)
	}
	// A signing copy uploads everything itself.
	if ups := uploadRest(ctx, pushed.src.Reference(), &copy.Options{SignBySigstorePrivateKeyFile: "key"}, nil, nil, opts); ups != nil {
		t.Errorf("uploadRest(a signing copy) = %v, want nothing", ups)
	}

	// An upload ahead that failed: the copy puts the layer there (it
	// mounts it from ci/ahead-upload, which its blob-info cache knows).
	refused := UploadAhead(ctx, "docker://"+reg.Host+"/ci/refused2:latest", gl, noCreds)
	ao.Ahead = []*Upload{refused}
	if _, err := Append(ctx, im, "docker://"+reg.Host+"/ci/refused2:latest", ao, opts); err != nil {
		t.Fatalf("Append after a failed upload ahead: %v", err)
	}
	last := requests()
	if n := count(last.Uploaded[len(after.Uploaded):], gl.Digest) + count(last.Mounted[len(after.Mounted):], gl.Digest); n != 1 {
		t.Errorf("after a failed upload ahead, the copy uploaded or mounted the layer %d times, want once", n)
	}
}
