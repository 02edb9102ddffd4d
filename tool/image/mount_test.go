package image

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"
)

// TestMountsStopped: Close stops MountInto's mounts rather than wait for
// them (a build that failed has no use for them), and so does mountsDone
// once its context is done; else mountsDone, before a copy, waits for
// them.
func TestMountsStopped(t *testing.T) {
	start := func() (*Image, chan struct{}) {
		ctx, cancel := context.WithCancel(context.Background())
		m := &mounting{done: make(chan struct{}), cancel: cancel}
		finish := make(chan struct{})
		go func() {
			defer close(m.done)
			select {
			case <-ctx.Done():
			case <-finish:
			}
		}()
		return &Image{mounted: m}, finish
	}
	returned := func(f func()) <-chan struct{} {
		c := make(chan struct{})
		go func() { f(); close(c) }()
		return c
	}

	im, _ := start()
	select {
	case <-returned(func() { im.Close() }):
	case <-time.After(time.Minute):
		t.Fatal("Close did not stop the mounts")
	}

	im, _ = start()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	select {
	case <-returned(func() { im.mountsDone(ctx) }):
	case <-time.After(time.Minute):
		t.Fatal("mountsDone with its context done did not stop the mounts")
	}

	im, finish := start()
	waited := returned(func() { im.mountsDone(context.Background()) })
	select {
	case <-waited:
		t.Fatal("mountsDone returned while the mounts were going on")
	case <-time.After(50 * time.Millisecond):
	}
	close(finish)
	select {
	case <-waited:
	case <-time.After(time.Minute):
		t.Fatal("mountsDone did not return once the mounts were done")
	}
}

// mountServer is a registry over TLS (or plain HTTP) that demands a
// bearer token for both repositories of a mount, and mounts into
// ci/dest the blobs of os/base in have: 201 Created, else 202 Accepted
// with an upload it expects to be deleted. It counts what it was asked.
type mountServer struct {
	srv                    *httptest.Server
	have                   map[string]bool
	anonymous              bool // it asks for no credentials
	mu                     sync.Mutex
	posts, deletes, others int
	plain                  int // requests that came in without TLS
	credentials            int // requests that carried credentials
}

func newMountServer(t *testing.T, tls, anonymous bool, have ...digest.Digest) (*mountServer, *types.SystemContext) {
	t.Helper()
	m := &mountServer{have: map[string]bool{}, anonymous: anonymous}
	for _, d := range have {
		m.have[d.String()] = true
	}
	const wantScope = "repository:ci/dest:push,pull repository:os/base:pull"
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		m.mu.Lock()
		defer m.mu.Unlock()
		if r.TLS == nil {
			m.plain++
		}
		if r.URL.Path == "/token" {
			scopes := r.URL.Query()["scope"]
			slices.Sort(scopes)
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" || strings.Join(scopes, " ") != wantScope {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"token": "T0KEN"})
			return
		}
		if r.Header.Get("Authorization") != "" {
			m.credentials++
		}
		if !m.anonymous && r.Header.Get("Authorization") != "Bearer T0KEN" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="`+m.srv.URL+`/token",service="test"`)
			w.WriteHeader(http.StatusUnauthorized)
			return
		}
		switch {
		case r.URL.Path == "/v2/":
		case r.Method == http.MethodPost && r.URL.Path == "/v2/ci/dest/blobs/uploads/" && r.URL.Query().Get("from") == "os/base":
			m.posts++
			if m.have[r.URL.Query().Get("mount")] {
				w.WriteHeader(http.StatusCreated)
				return
			}
			w.Header().Set("Location", "/v2/ci/dest/blobs/uploads/u1")
			w.WriteHeader(http.StatusAccepted)
		case r.Method == http.MethodDelete && r.URL.Path == "/v2/ci/dest/blobs/uploads/u1":
			m.deletes++
			w.WriteHeader(http.StatusNoContent)
		default:
			m.others++
			http.NotFound(w, r)
		}
	})
	if tls {
		m.srv = httptest.NewTLSServer(handler)
	} else {
		m.srv = httptest.NewServer(handler)
	}
	t.Cleanup(m.srv.Close)
	certDir := t.TempDir()
	if tls {
		ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: m.srv.Certificate().Raw})
		if err := os.WriteFile(filepath.Join(certDir, "ca.crt"), ca, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	conf := filepath.Join(t.TempDir(), "registries.conf")
	if err := os.WriteFile(conf, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	sys := &types.SystemContext{DockerCertPath: certDir, AuthFilePath: filepath.Join(t.TempDir(), "none.json"),
		SystemRegistriesConfPath: conf, SystemRegistriesConfDirPath: t.TempDir(),
		DockerAuthConfig: &types.DockerAuthConfig{Username: "user", Password: "pass"}}
	return m, sys
}

func (m *mountServer) named(t *testing.T, repo string) reference.Named {
	t.Helper()
	host := strings.TrimPrefix(strings.TrimPrefix(m.srv.URL, "https://"), "http://")
	named, err := reference.ParseNormalizedNamed(host + "/" + repo)
	if err != nil {
		t.Fatal(err)
	}
	return named
}

func mountLayersOf(ds ...digest.Digest) []LayerInfo {
	var out []LayerInfo
	for _, d := range ds {
		out = append(out, LayerInfo{Digest: d, Size: 1})
	}
	return out
}

// TestCrossMount: each layer is mounted with one request, with a bearer
// token for both repositories got with the credentials, over TLS with the
// registry's CA; a layer the registry will not mount (202, an upload
// started instead) is errNotMounted, and its upload is deleted. A
// registry that asks for no credentials is sent none.
func TestCrossMount(t *testing.T) {
	a, b, c := digest.FromString("a"), digest.FromString("b"), digest.FromString("c")
	m, sys := newMountServer(t, true, false, a, b, c)
	ok := make([]bool, 3)
	if err := crossMount(context.Background(), sys, m.named(t, "os/base"), m.named(t, "ci/dest"), mountLayersOf(a, b, c), ok); err != nil {
		t.Fatalf("crossMount() = %v", err)
	}
	if !slices.Equal(ok, []bool{true, true, true}) || m.posts != 3 || m.others != 0 || m.plain != 0 {
		t.Errorf("mounted %v with %d POSTs, %d other requests, %d without TLS; want all three with one POST each", ok, m.posts, m.others, m.plain)
	}

	ok = make([]bool, 1)
	err := crossMount(context.Background(), sys, m.named(t, "os/base"), m.named(t, "ci/dest"), mountLayersOf(digest.FromString("missing")), ok)
	if !errors.Is(err, errNotMounted) || ok[0] || m.deletes != 1 {
		t.Errorf("crossMount(a missing blob) = %v, mounted %v, %d uploads deleted; want errNotMounted, nothing mounted, the upload deleted", err, ok, m.deletes)
	}

	m, sys = newMountServer(t, true, true, a)
	ok = make([]bool, 1)
	if err := crossMount(context.Background(), sys, m.named(t, "os/base"), m.named(t, "ci/dest"), mountLayersOf(a), ok); err != nil || !ok[0] || m.credentials != 0 {
		t.Errorf("crossMount(a registry that asks for no credentials) = %v, mounted %v, %d requests with credentials; want it mounted with none", err, ok, m.credentials)
	}
}

// TestCrossMountTLS: without the registry's CA, or with it but over plain
// HTTP, crossMount has no client (errNoMountClient: containers/image
// mounts) and sends nothing over plain HTTP, as containers/image would not;
// with --tls-verify=false, or insecure in registries.conf, it mounts over
// plain HTTP; a namespace blocked in registries.conf is not asked.
func TestCrossMountTLS(t *testing.T) {
	a := digest.FromString("a")
	m, sys := newMountServer(t, true, false, a)
	sys.DockerCertPath = t.TempDir()
	if err := crossMount(context.Background(), sys, m.named(t, "os/base"), m.named(t, "ci/dest"), mountLayersOf(a), make([]bool, 1)); !errors.Is(err, errNoMountClient) || m.posts != 0 {
		t.Errorf("crossMount(untrusted CA) = %v after %d POSTs, want errNoMountClient and none", err, m.posts)
	}

	m, sys = newMountServer(t, false, false, a)
	if err := crossMount(context.Background(), sys, m.named(t, "os/base"), m.named(t, "ci/dest"), mountLayersOf(a), make([]bool, 1)); !errors.Is(err, errNoMountClient) || m.plain != 0 {
		t.Errorf("crossMount(plain HTTP) = %v after %d requests over plain HTTP, want errNoMountClient and none", err, m.plain)
	}
	insecure := *sys
	insecure.DockerInsecureSkipTLSVerify = types.OptionalBoolTrue
	ok := make([]bool, 1)
	if err := crossMount(context.Background(), &insecure, m.named(t, "os/base"), m.named(t, "ci/dest"), mountLayersOf(a), ok); err != nil || !ok[0] {
		t.Errorf("crossMount(plain HTTP, --tls-verify=false) = %v, mounted %v; want it mounted", err, ok)
	}

	host := m.named(t, "ci/dest")
	for _, tt := range []struct {
		name, conf string
		sys        *types.SystemContext
		mounted    bool
	}{
		{"insecure registry", "[[registry]]\nlocation = \"" + reference.Domain(host) + "\"\ninsecure = true\n", sys, true},
		{"blocked namespace", "[[registry]]\nlocation = \"" + reference.Domain(host) + "/ci\"\nblocked = true\n", &insecure, false},
	} {
		conf := *tt.sys
		conf.SystemRegistriesConfPath = filepath.Join(t.TempDir(), "registries.conf")
		if err := os.WriteFile(conf.SystemRegistriesConfPath, []byte(tt.conf), 0o600); err != nil {
			t.Fatal(err)
		}
		posts := m.posts
		ok := make([]bool, 1)
		err := crossMount(context.Background(), &conf, m.named(t, "os/base"), host, mountLayersOf(a), ok)
		if tt.mounted && (err != nil || !ok[0]) || !tt.mounted && (!errors.Is(err, errNoMountClient) || m.posts != posts) {
			t.Errorf("%s: crossMount() = %v, mounted %v, %d POSTs", tt.name, err, ok, m.posts-posts)
		}
	}
}

// TestHTTPSFirst: plain HTTP goes out only to an insecure registry, and
// only to a host HTTPS did not reach.
func TestHTTPSFirst(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	t.Cleanup(srv.Close)
	host := strings.TrimPrefix(srv.URL, "http://")
	get := func(rt http.RoundTripper, scheme string) error {
		req, _ := http.NewRequest(http.MethodGet, scheme+"://"+host+"/v2/", nil)
		resp, err := rt.RoundTrip(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}
	for _, insecure := range []bool{false, true} {
		rt := &httpsFirst{RoundTripper: http.DefaultTransport, insecure: insecure}
		if get(rt, "http") == nil {
			t.Errorf("insecure %v: plain HTTP before HTTPS failed", insecure)
		}
		if get(rt, "https") == nil {
			t.Fatalf("HTTPS to a plain HTTP server succeeded")
		}
		if err := get(rt, "http"); (err == nil) != insecure {
			t.Errorf("insecure %v: plain HTTP after HTTPS failed = %v", insecure, err)
		}
	}
}

// TestWithPresent: the layers MountInto made present in the destination
// are answered as present without a request, others are asked of the
// destination, and a signing copy, one into another repository, or one
// before the mounts are done, gets the destination itself.
func TestWithPresent(t *testing.T) {
	dest, err := docker.ParseReference("//registry.example/ci/dest:latest")
	if err != nil {
		t.Fatal(err)
	}
	a := digest.FromString("a")
	done := make(chan struct{})
	close(done)
	base := &Image{mounted: &mounting{done: done, repo: "registry.example/ci/dest", present: map[digest.Digest]int64{a: 7}}}
	ref, ok := withPresent(dest, &copy.Options{}, nil, base).(presentRef)
	if !ok {
		t.Fatalf("withPresent() = %T, want a presentRef", ref)
	}
	d := presentDest{ImageDestination: failingDest{}, present: ref.present}
	if reused, info, err := d.TryReusingBlob(context.Background(), types.BlobInfo{Digest: a}, nil, false); !reused || err != nil || info.Digest != a || info.Size != 7 {
		t.Errorf("TryReusingBlob(a present layer) = %v, %+v, %v", reused, info, err)
	}
	if _, _, err := d.TryReusingBlob(context.Background(), types.BlobInfo{Digest: digest.FromString("b")}, nil, false); err == nil {
		t.Error("TryReusingBlob(another blob) was not asked of the destination")
	}
	if got := withPresent(dest, &copy.Options{SignBySigstorePrivateKeyFile: "key"}, nil, base); got != dest {
		t.Errorf("withPresent(signing) = %T, want the destination itself", got)
	}
	mounting := &Image{mounted: &mounting{done: make(chan struct{}), repo: "registry.example/ci/dest", present: map[digest.Digest]int64{a: 7}}}
	if got := withPresent(dest, &copy.Options{}, nil, mounting); got != dest {
		t.Errorf("withPresent(mounts under way) = %T, want the destination itself", got)
	}
	other, _ := docker.ParseReference("//registry.example/ci/other:latest")
	if got := withPresent(other, &copy.Options{}, nil, base); got != other {
		t.Errorf("withPresent(another repository) = %T, want the destination itself", got)
	}
}

// failingDest is a destination whose TryReusingBlob fails.
type failingDest struct{ types.ImageDestination }

func (failingDest) TryReusingBlob(context.Context, types.BlobInfo, types.BlobInfoCache, bool) (bool, types.BlobInfo, error) {
	return false, types.BlobInfo{}, errors.New("asked the destination")
}

// TestRecordUnmounted: an image whose Open left its records to the
// mounts' outcome records its layers' locations in the blob-info cache
// only before a copy that may have to mount a layer: into another
// repository of its registry, where MountInto did not mount them all.
func TestRecordUnmounted(t *testing.T) {
	parse := func(s string) types.ImageReference {
		ref, err := docker.ParseReference("//" + s)
		if err != nil {
			t.Fatal(err)
		}
		return ref
	}
	base := parse("registry.example/os/base:latest")
	a, b := LayerInfo{Digest: digest.FromString("a"), DiffID: digest.FromString("A")}, LayerInfo{Digest: digest.FromString("b"), DiffID: digest.FromString("B")}
	done := make(chan struct{})
	close(done)
	mounted := func(ds ...digest.Digest) *mounting {
		m := &mounting{done: done, repo: "registry.example/ci/dest", present: map[digest.Digest]int64{}}
		for _, d := range ds {
			m.present[d] = 1
		}
		return m
	}
	for _, tt := range []struct {
		name    string
		mounted *mounting
		dest    string
		records bool
	}{
		{"all mounted", mounted(a.Digest, b.Digest), "registry.example/ci/dest:latest", false},
		{"one not mounted", mounted(a.Digest), "registry.example/ci/dest:latest", true},
		{"mounted into another repository", mounted(a.Digest, b.Digest), "registry.example/ci/other:latest", true},
		{"no mounts", nil, "registry.example/ci/dest:latest", true},
		{"another registry", nil, "elsewhere.example/ci/dest:latest", false},
		{"the base's repository", nil, "registry.example/os/base:v2", false},
	} {
		sys := &types.SystemContext{BlobInfoCacheDir: t.TempDir()}
		im := &Image{src: &policyProbe{ref: base}, layers: []LayerInfo{a, b}, recordSys: sys, mounted: tt.mounted}
		im.recordUnmounted(context.Background(), parse(tt.dest))
		im.locationsRecorded()
		got := blobInfoCache(sys).UncompressedDigest(b.Digest)
		if (got == b.DiffID) != tt.records {
			t.Errorf("%s: the cache knows %s's diff ID as %q; want it recorded: %v", tt.name, b.Digest, got, tt.records)
		}
	}
}

// TestRegistryClientStall: a registry that sends a response's headers and
// then no data fails the client's read with a *StallError once the limit
// passes, which is not errClientRead (no second read through
// containers/image).
func TestRegistryClientStall(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", "100")
		w.WriteHeader(http.StatusOK)
		_, _ = w.Write([]byte("part"))
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}))
	t.Cleanup(srv.Close)
	reg, err := name.NewRegistry(strings.TrimPrefix(srv.URL, "http://"), name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	c := registryClient{Client: srv.Client(), reg: reg, scheme: "http", stall: 50 * time.Millisecond}
	d := digest.FromString("blob")
	_, _, err = c.get(context.Background(), "/v2/ci/index/blobs/"+d.String(), d, 100)
	var stall *StallError
	if !errors.As(err, &stall) || stall.Blob != d || errors.Is(clientReadError(err), errClientRead) {
		t.Errorf("get() = %v, want a StallError for %s that is not errClientRead", err, d)
	}
}
