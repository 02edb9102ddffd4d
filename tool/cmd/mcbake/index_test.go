package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/registrytest"
)

// indexEnv is a registry holding a base of a few megabytes, and the
// digest of its manifest and config.
type indexEnv struct {
	*regEnv
	manifest, config string
}

func newIndexEnv(t *testing.T) *indexEnv {
	t.Helper()
	r := newRegEnv(t, testbase.Options{Size: &testbase.SizeOptions{TotalBytes: 8 << 20, Files: 400, Layers: 2}})
	raw := r.skopeo(t, "inspect", "--raw", "--cert-dir", r.reg.CertDir, "--creds", registrytest.User+":"+registrytest.Password, r.base)
	m := readRegistryManifest(t, r, "os/base:latest")
	return &indexEnv{regEnv: r, manifest: digest.FromBytes(raw).String(), config: m.Config.Digest}
}

// repo is HOST/name.
func (e *indexEnv) repo(name string) string { return e.reg.Host + "/" + name }

// coldBuild builds into out with a new, empty cache and flags, and
// returns the digest, stderr and the blobs it downloaded from the base's
// repository.
func (e *indexEnv) coldBuild(t *testing.T, out string, flags ...string) (string, string, []string) {
	t.Helper()
	before, err := e.reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	args := append(append(e.creds(), "--cache-dir", t.TempDir()), flags...)
	code, stdout, stderr := e.buildWith(out, args...)
	if code != 0 {
		t.Fatalf("build %s: exit %d\n%s", out, code, stderr)
	}
	after, err := e.reg.Requests()
	if err != nil {
		t.Fatal(err)
	}
	var base []string
	for _, d := range after.Downloaded[len(before.Downloaded):] {
		if strings.HasPrefix(d, "os/base@") {
			base = append(base, strings.TrimPrefix(d, "os/base@"))
		}
	}
	return strings.TrimSpace(stdout), stderr, base
}

// options are the image options that reach the test registry.
func (e *indexEnv) options(t *testing.T) image.Options {
	return image.Options{SignaturePolicy: "testdata/registry-policy.json", RegistriesConf: e.reg.EmptyRegistriesConf(),
		Registry: image.Registry{CertDir: e.reg.CertDir, Creds: registrytest.User + ":" + registrytest.Password}, CacheDir: t.TempDir()}
}

// openBase opens the registry's base.
func (e *indexEnv) openBase(t *testing.T) *image.Image {
	t.Helper()
	im, err := image.Open(context.Background(), e.base, e.options(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { im.Close() })
	return im
}

// view indexes the base into a new cache and returns its view.
func (e *indexEnv) view(t *testing.T, im *image.Image) []byte {
	t.Helper()
	dir := t.TempDir()
	if _, err := image.IndexLayers(context.Background(), im, image.BaseOptions{Images: e.options(t), CacheDir: dir}); err != nil {
		t.Fatal(err)
	}
	b, err := baseindex.PublishableView(dir, image.IndexChain(im))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestPublishedIndexColdBuild: a scanning build publishes the base's
// index in its destination repository under the referrers tag; a cold
// build that reads it from there (--index-repo) downloads the base's
// config and none of its layers, and writes the same image, as does a
// cold diff, a cold verify and a build into the same repository again.
func TestPublishedIndexColdBuild(t *testing.T) {
	e := newIndexEnv(t)
	scanned, stderr, got := e.coldBuild(t, e.ref("ci/a:latest"))
	t.Logf("scanning build: downloaded %v from the base\n%s", got, stderr)
	if !strings.Contains(stderr, "base index: scanned") || !strings.Contains(stderr, "base index: published to "+e.repo("ci/a")+"@") {
		t.Errorf("scanning build: stderr does not say it scanned and published\n%s", stderr)
	}
	if len(got) < 3 {
		t.Errorf("scanning build downloaded %v from the base, want its config and 2 layers", got)
	}
	tag := "sha256-" + strings.TrimPrefix(e.manifest, "sha256:")
	tags, err := e.reg.Tags("ci/a")
	if err != nil || !slices.Contains(tags, tag) {
		t.Fatalf("tags of ci/a = %v (%v), want the referrers tag %s", tags, err, tag)
	}

	published, stderr, got := e.coldBuild(t, e.ref("ci/b:latest"), "--index-repo", e.repo("ci/a"))
	t.Logf("cold build with the published index: downloaded %v from the base\n%s", got, stderr)
	if published != scanned {
		t.Errorf("build with the published index wrote %s, want %s as the scanning build", published, scanned)
	}
	if !slices.Equal(got, []string{e.config}) {
		t.Errorf("build with the published index downloaded %v from the base, want only its config %s", got, e.config)
	}
	if !strings.Contains(stderr, "base index: from the registry, "+e.repo("ci/a")+"@") || strings.Contains(stderr, "published to") {
		t.Errorf("build with the published index: stderr does not say where it came from, or it published again\n%s", stderr)
	}

	again, stderr, _ := e.coldBuild(t, e.ref("ci/a:again"))
	if again != scanned || !strings.Contains(stderr, "from the registry") {
		t.Errorf("build into the index repository: %s, want %s, from the registry\n%s", again, scanned, stderr)
	}

	for _, cmd := range [][]string{
		{"verify", "-f", workerMC, "--base", e.base},
		{"diff", "--base", e.base, "--image", e.ref("ci/a@" + scanned)},
	} {
		before, _ := e.reg.Requests()
		args := append(append(cmd, e.imageArgs()...), append(e.creds(), "--cache-dir", t.TempDir(), "--index-repo", e.repo("ci/a"))...)
		code, _, stderr := e.run(args...)
		after, _ := e.reg.Requests()
		if code != 0 {
			t.Fatalf("%s: exit %d\n%s", cmd[0], code, stderr)
		}
		if !strings.Contains(stderr, "base index: from the registry") {
			t.Errorf("%s: the index did not come from the registry\n%s", cmd[0], stderr)
		}
		for _, d := range after.Downloaded[len(before.Downloaded):] {
			if strings.HasPrefix(d, "os/base@") && d != "os/base@"+e.config {
				t.Errorf("%s downloaded %s, want only the base's config", cmd[0], d)
			}
		}
	}
}

// TestPublishedIndexFallbacks: a missing index, a damaged one and the
// index of another base each leave a scan (a warning for the last two),
// and the same image.
func TestPublishedIndexFallbacks(t *testing.T) {
	e := newIndexEnv(t)
	want, _, _ := e.coldBuild(t, e.ref("ci/scan:latest"), "--no-publish-index")
	if tags, _ := e.reg.Tags("ci/scan"); slices.ContainsFunc(tags, func(s string) bool { return strings.HasPrefix(s, "sha256-") }) {
		t.Errorf("--no-publish-index published: tags %v", tags)
	}
	im := e.openBase(t)
	view := e.view(t, im)
	damaged := damagedView(t, view)
	other := newEnv(t)
	otherBase, err := image.Open(context.Background(), other.base, e.options(t))
	if err != nil {
		t.Fatal(err)
	}
	defer otherBase.Close()
	for _, tc := range []struct {
		name, repo string
		view       []byte
		warn       bool
	}{
		{"missing", "ci/none", nil, false},
		{"damaged", "ci/damaged", damaged, true},
		{"another base", "ci/other", e.view(t, otherBase), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.view != nil {
				if _, err := image.PushIndex(context.Background(), e.repo(tc.repo), im, baseindex.ViewVersion, tc.view, e.options(t)); err != nil {
					t.Fatal(err)
				}
			}
			got, stderr, _ := e.coldBuild(t, e.ref("ci/out-"+strings.ReplaceAll(tc.name, " ", "-")+":latest"), "--index-repo", e.repo(tc.repo), "--no-publish-index")
			if got != want {
				t.Errorf("build = %s, want %s", got, want)
			}
			if !strings.Contains(stderr, "base index: scanned") {
				t.Errorf("the base was not scanned\n%s", stderr)
			}
			if warned := strings.Contains(stderr, "level=WARN") && strings.Contains(stderr, "published index"); warned != tc.warn {
				t.Errorf("warned = %v, want %v\n%s", warned, tc.warn, stderr)
			}
		})
	}
}

// TestPublishedIndexReplacesDamagedCache: a runner whose cached view of
// the base is damaged (a CI cache restored from a bad archive) pulls the
// published index in its place rather than scanning, and says so.
func TestPublishedIndexReplacesDamagedCache(t *testing.T) {
	e := newIndexEnv(t)
	want, _, _ := e.coldBuild(t, e.ref("ci/dscan:latest"), "--no-publish-index")
	im := e.openBase(t)
	view := e.view(t, im)
	if _, err := image.PushIndex(context.Background(), e.repo("ci/d"), im, baseindex.ViewVersion, view, e.options(t)); err != nil {
		t.Fatal(err)
	}
	cache := t.TempDir()
	if err := baseindex.ImportView(cache, image.IndexChain(im), view); err != nil {
		t.Fatal(err)
	}
	files, err := filepath.Glob(filepath.Join(cache, "views", "sha256", "*"))
	if err != nil || len(files) != 1 {
		t.Fatalf("cached views %v (%v), want one", files, err)
	}
	damaged := slices.Clone(view)
	damaged[len(damaged)-1] ^= 1
	if err := os.WriteFile(files[0], damaged, 0o644); err != nil {
		t.Fatal(err)
	}
	code, stdout, stderr := e.buildWith(e.ref("ci/dout:latest"), append(e.creds(), "--cache-dir", cache, "--index-repo", e.repo("ci/d"), "--no-publish-index")...)
	if code != 0 {
		t.Fatalf("build: exit %d\n%s", code, stderr)
	}
	if got := strings.TrimSpace(stdout); got != want {
		t.Errorf("build = %s, want %s", got, want)
	}
	if !strings.Contains(stderr, "the cached index of the base is damaged") || !strings.Contains(stderr, "base index: from the registry") {
		t.Errorf("want the damage warned of and the index from the registry\n%s", stderr)
	}
}

// damagedView returns view with its last byte changed that packing keeps
// (a byte of a directory's path is not: PackView refuses a view whose
// strings are not where their records say), so that the published index
// then fails its checksums.
func damagedView(t *testing.T, view []byte) []byte {
	t.Helper()
	for off := len(view) - 1; off > 0; off-- {
		d := slices.Clone(view)
		d[off] ^= 1
		if _, err := baseindex.PackView(d); err == nil {
			return d
		}
	}
	t.Fatal("no byte of the view can be changed and packed")
	return nil
}

// TestPublishedIndexRace: two runners publishing the same index at once
// both succeed, and the referrers tag lists it once; a third push finds
// it there and pushes nothing.
func TestPublishedIndexRace(t *testing.T) {
	e := newIndexEnv(t)
	im := e.openBase(t)
	view := e.view(t, im)
	var wg sync.WaitGroup
	results := make([]image.IndexTransfer, 2)
	errs := make([]error, 2)
	for i := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], errs[i] = image.PushIndex(context.Background(), e.repo("ci/race"), im, baseindex.ViewVersion, view, e.options(t))
		}()
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("push %d: %v", i, err)
		}
	}
	if results[0].Manifest != results[1].Manifest {
		t.Errorf("the runners pushed %s and %s, want the same artifact", results[0].Manifest, results[1].Manifest)
	}
	third, err := image.PushIndex(context.Background(), e.repo("ci/race"), im, baseindex.ViewVersion, view, e.options(t))
	if err != nil || third.Pushed || third.Bytes != 0 {
		t.Errorf("third push = %+v, %v; want nothing pushed", third, err)
	}
	raw := e.skopeo(t, "inspect", "--raw", "--cert-dir", e.reg.CertDir, "--creds", registrytest.User+":"+registrytest.Password,
		e.ref("ci/race:sha256-"+strings.TrimPrefix(e.manifest, "sha256:")))
	if n := strings.Count(string(raw), string(results[0].Manifest)); n != 1 {
		t.Errorf("the referrers tag lists the index %d times, want once:\n%s", n, raw)
	}
}

// TestIndexCommands: index push publishes once, index pull fetches it
// into an empty cache, verified, and a build then finds it in the local
// cache and downloads only the base's config.
func TestIndexCommands(t *testing.T) {
	e := newIndexEnv(t)
	flags := append(e.imageArgs(), e.creds()...)
	push := append([]string{"index", "push", "--base", e.base, "--index-repo", e.repo("ci/idx")}, flags...)
	code, stdout, stderr := e.run(push...)
	if code != 0 || !strings.HasPrefix(stdout, e.repo("ci/idx")+"@sha256:") || !strings.Contains(stderr, "published") {
		t.Fatalf("index push: exit %d, %q\n%s", code, stdout, stderr)
	}
	code, again, stderr := e.run(push...)
	if code != 0 || again != stdout || !strings.Contains(stderr, "nothing pushed") {
		t.Errorf("index push again: exit %d, %q, want %q and nothing pushed\n%s", code, again, stdout, stderr)
	}
	cache := t.TempDir()
	code, pulled, stderr := e.run(append([]string{"index", "pull", "--base", e.base, "--index-repo", e.repo("ci/idx")}, append(flags, "--cache-dir", cache)...)...)
	if code != 0 || pulled != stdout {
		t.Fatalf("index pull: exit %d, %q, want %q\n%s", code, pulled, stdout, stderr)
	}
	code, _, stderr = e.run(append([]string{"index", "pull", "--base", e.base, "--index-repo", e.repo("ci/none")}, append(flags, "--cache-dir", t.TempDir())...)...)
	if code == 0 || !strings.Contains(stderr, "no published index") {
		t.Errorf("index pull of a missing index: exit %d\n%s", code, stderr)
	}
	before, _ := e.reg.Requests()
	code, _, stderr = e.buildWith(e.ref("ci/pulled:latest"), append(e.creds(), "--cache-dir", cache)...)
	after, _ := e.reg.Requests()
	if code != 0 || !strings.Contains(stderr, "base index: from the local cache") {
		t.Fatalf("build after pull: exit %d\n%s", code, stderr)
	}
	if got := after.Downloaded[len(before.Downloaded):]; !slices.Equal(got, []string{"os/base@" + e.config}) {
		t.Errorf("build after pull downloaded %v, want only the base's config", got)
	}
	if _, err := os.Stat(filepath.Join(cache, "views")); err != nil {
		t.Error(err)
	}
}

// TestPublishedIndexReferrersAPI: where the registry has the OCI
// referrers API, the index is found through it, not through the
// referrers tag. Debian's docker-registry has no such API: a TLS proxy in
// front of it answers the referrers requests (with what the registry's
// referrers tag lists, as a registry with the API would) and forwards the
// rest.
func TestPublishedIndexReferrersAPI(t *testing.T) {
	e := newIndexEnv(t)
	im := e.openBase(t)
	pushed, err := image.PushIndex(context.Background(), e.repo("ci/ref"), im, baseindex.ViewVersion, e.view(t, im), e.options(t))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := os.ReadFile(filepath.Join(e.reg.CertDir, "ca.crt"))
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(ca)
	upstream := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}
	tag := "sha256-" + strings.TrimPrefix(e.manifest, "sha256:")
	var mu sync.Mutex
	var referrers, tagReads int
	proxy := httputil.NewSingleHostReverseProxy(&url.URL{Scheme: "https", Host: e.reg.Host})
	proxy.Transport = upstream
	srv := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		if strings.HasSuffix(r.URL.Path, "/manifests/"+tag) {
			tagReads++
		}
		isReferrers := r.URL.Path == "/v2/ci/ref/referrers/"+e.manifest
		if isReferrers {
			referrers++
		}
		mu.Unlock()
		if !isReferrers {
			proxy.ServeHTTP(w, r)
			return
		}
		req, _ := http.NewRequest(http.MethodGet, "https://"+e.reg.Host+"/v2/ci/ref/manifests/"+tag, nil)
		req.SetBasicAuth(registrytest.User, registrytest.Password)
		req.Header.Set("Accept", "application/vnd.oci.image.index.v1+json")
		resp, err := upstream.RoundTrip(req)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadGateway)
			return
		}
		defer resp.Body.Close()
		w.Header().Set("Content-Type", "application/vnd.oci.image.index.v1+json")
		_, _ = io.Copy(w, resp.Body)
	}))
	defer srv.Close()
	certs := t.TempDir()
	for name, b := range map[string][]byte{
		"registry.crt": ca,
		"proxy.crt":    pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw}),
	} {
		if err := os.WriteFile(filepath.Join(certs, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	opts := e.options(t)
	opts.CertDir = certs
	cache := t.TempDir()
	chain := image.IndexChain(im)
	got, err := image.PullIndex(context.Background(), strings.TrimPrefix(srv.URL, "https://")+"/ci/ref", im, baseindex.ViewVersion, opts, func(view []byte) error {
		return baseindex.ImportView(cache, chain, view)
	})
	if err != nil {
		t.Fatalf("PullIndex() = %v", err)
	}
	if _, err := baseindex.PublishableView(cache, chain); got.Manifest != pushed.Manifest || err != nil {
		t.Errorf("PullIndex() = %+v, want %s, cached", got, pushed.Manifest)
	}
	if referrers != 1 || tagReads != 0 {
		t.Errorf("the referrers API was asked %d times and the referrers tag read %d times, want 1 and 0", referrers, tagReads)
	}
}

// TestPublishedIndexSigned: under a policy.json that requires a sigstore
// key's signature for the index repositories, an index that index push
// signed with the key (a sigstore attachment) is used by a cold build,
// while an unsigned one is refused with a warning and the base scanned,
// the same image either way. index push with the key onto the unsigned
// index signs it, and it is used from then on; pushing again signs
// nothing, the policy being satisfied.
func TestPublishedIndexSigned(t *testing.T) {
	e := newIndexEnv(t)
	private, public, passphrase, registriesD := sigstoreSetup(t, e.reg.Host)
	e.policy = writeTestFile(t, "policy.json", []byte(`{"default": [{"type": "reject"}], "transports": {
		"docker": {"": [{"type": "insecureAcceptAnything"}],
			"`+e.repo("idx")+`": [{"type": "sigstoreSigned", "keyPath": "`+public+`"}]},
		"oci": {"": [{"type": "insecureAcceptAnything"}]}}}`))
	flags := append(e.creds(), "--registries.d", registriesD)
	sign := []string{"--sign-by-sigstore-private-key", private, "--sign-passphrase-file", passphrase}
	var artifact string
	push := func(repo string, extra ...string) string {
		t.Helper()
		args := append(append([]string{"index", "push", "--base", e.base, "--index-repo", e.repo(repo)}, e.imageArgs()...), flags...)
		code, stdout, stderr := e.run(append(args, extra...)...)
		if code != 0 {
			t.Fatalf("index push %s %v: exit %d\n%s", repo, extra, code, stderr)
		}
		_, artifact, _ = strings.Cut(strings.TrimSpace(stdout), "@")
		return stderr
	}
	if stderr := push("idx/signed", sign...); !strings.Contains(stderr, "published and signed") {
		t.Errorf("index push with a key: stderr does not say it signed\n%s", stderr)
	}
	checkSigstoreAttachmentOf(t, e.regEnv, "idx/signed", digest.Digest(artifact), public)
	if stderr := push("idx/unsigned"); strings.Contains(stderr, "signed") {
		t.Errorf("index push without a key says it signed\n%s", stderr)
	}

	want, _, _ := e.coldBuild(t, e.ref("ci/scan:latest"), "--no-publish-index")
	cold := func(repo string) string {
		t.Helper()
		got, stderr, _ := e.coldBuild(t, e.ref("ci/"+strings.ReplaceAll(repo, "/", "-")+":latest"), "--registries.d", registriesD, "--index-repo", e.repo(repo), "--no-publish-index")
		if got != want {
			t.Errorf("build with --index-repo %s = %s, want %s", repo, got, want)
		}
		return stderr
	}
	if stderr := cold("idx/signed"); !strings.Contains(stderr, "base index: from the registry, "+e.repo("idx/signed")+"@") {
		t.Errorf("the signed index was not used\n%s", stderr)
	}
	if stderr := cold("idx/unsigned"); !strings.Contains(stderr, "base index: scanned") ||
		!strings.Contains(stderr, "level=WARN") || !strings.Contains(stderr, "signature") {
		t.Errorf("the unsigned index: want a warning naming the signature and a scan\n%s", stderr)
	}

	if stderr := push("idx/unsigned", sign...); !strings.Contains(stderr, "nothing pushed, but signed") {
		t.Errorf("index push with a key onto the unsigned index: stderr does not say it signed it\n%s", stderr)
	}
	if stderr := cold("idx/unsigned"); !strings.Contains(stderr, "base index: from the registry") {
		t.Errorf("the index signed afterwards was not used\n%s", stderr)
	}
	if stderr := push("idx/signed", sign...); strings.Contains(stderr, "signed") {
		t.Errorf("index push with a key onto a signed index signed it again\n%s", stderr)
	}
}
