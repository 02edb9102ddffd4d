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
	"strings"
	"testing"

	digest "github.com/opencontainers/go-digest"
	"github.com/opencontainers/image-spec/specs-go"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"
)

// referrersServer is a registry with the OCI referrers API (which
// Debian's docker-registry lacks), over TLS, that answers for subject
// only, after the authentication auth demands ("basic" or "bearer").
func referrersServer(t *testing.T, subject digest.Digest, auth string) (*httptest.Server, *types.SystemContext, imgspecv1.Descriptor) {
	t.Helper()
	desc := imgspecv1.Descriptor{MediaType: imgspecv1.MediaTypeImageManifest, ArtifactType: IndexArtifactType,
		Digest: digest.FromString("artifact"), Size: 8}
	other := imgspecv1.Descriptor{MediaType: imgspecv1.MediaTypeImageManifest, ArtifactType: "application/x-other",
		Digest: digest.FromString("other"), Size: 5}
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/token" {
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" || r.URL.Query().Get("scope") != "repository:ci/index:pull" {
				http.Error(w, "no", http.StatusUnauthorized)
				return
			}
			_ = json.NewEncoder(w).Encode(map[string]string{"token": "T0KEN"})
			return
		}
		switch auth {
		case "basic":
			if u, p, ok := r.BasicAuth(); !ok || u != "user" || p != "pass" {
				w.Header().Set("WWW-Authenticate", `Basic realm="test"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		case "bearer":
			if r.Header.Get("Authorization") != "Bearer T0KEN" {
				w.Header().Set("WWW-Authenticate", `Bearer realm="`+srv.URL+`/token",service="test",scope="repository:ci/index:pull"`)
				w.WriteHeader(http.StatusUnauthorized)
				return
			}
		}
		if r.URL.Path == "/v2/" {
			return // the API's base, which every registry answers
		}
		if r.URL.Path != "/v2/ci/index/referrers/"+subject.String() {
			http.NotFound(w, r)
			return
		}
		idx := imgspecv1.Index{Versioned: specs.Versioned{SchemaVersion: 2}, MediaType: imgspecv1.MediaTypeImageIndex,
			Manifests: []imgspecv1.Descriptor{other, desc}}
		w.Header().Set("Content-Type", imgspecv1.MediaTypeImageIndex)
		_ = json.NewEncoder(w).Encode(idx)
	}))
	t.Cleanup(srv.Close)
	certDir := t.TempDir()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	if err := os.WriteFile(filepath.Join(certDir, "ca.crt"), ca, 0o600); err != nil {
		t.Fatal(err)
	}
	sys := &types.SystemContext{DockerCertPath: certDir, AuthFilePath: filepath.Join(t.TempDir(), "none.json"),
		DockerAuthConfig: &types.DockerAuthConfig{Username: "user", Password: "pass"}}
	return srv, sys, desc
}

// TestListReferrers: the referrers API is asked with basic and bearer
// authentication and the registry's CA, and its answer is the index it
// returns; a registry without it (404) is errNoReferrersAPI.
func TestListReferrers(t *testing.T) {
	subject := digest.FromString("base manifest")
	for _, auth := range []string{"none", "basic", "bearer"} {
		t.Run(auth, func(t *testing.T) {
			srv, sys, want := referrersServer(t, subject, auth)
			named, err := reference.ParseNormalizedNamed(strings.TrimPrefix(srv.URL, "https://") + "/ci/index")
			if err != nil {
				t.Fatal(err)
			}
			client, err := registryHTTP(context.Background(), sys, named, []string{"repository:ci/index:pull"})
			if err != nil {
				t.Fatalf("registryHTTP() = %v", err)
			}
			idx, n, err := listReferrers(context.Background(), client, named, subject)
			if err != nil {
				t.Fatalf("listReferrers() = %v", err)
			}
			if n == 0 || len(idx.Manifests) != 2 || idx.Manifests[1].Digest != want.Digest {
				t.Errorf("listReferrers() = %+v (%d bytes), want the server's two referrers", idx, n)
			}
			_, _, err = listReferrers(context.Background(), client, named, digest.FromString("another base"))
			if !errors.Is(err, errNoReferrersAPI) {
				t.Errorf("listReferrers(another subject) = %v, want errNoReferrersAPI", err)
			}
		})
	}
}

// TestListReferrersUntrusted: without the registry's CA there is no
// client (containers/image's requests would fail as well).
func TestListReferrersUntrusted(t *testing.T) {
	subject := digest.FromString("base manifest")
	srv, sys, _ := referrersServer(t, subject, "none")
	sys.DockerCertPath = t.TempDir()
	named, err := reference.ParseNormalizedNamed(strings.TrimPrefix(srv.URL, "https://") + "/ci/index")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := registryHTTP(context.Background(), sys, named, []string{"repository:ci/index:pull"}); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Errorf("registryHTTP(untrusted CA) = %v, want a TLS error", err)
	}
}
