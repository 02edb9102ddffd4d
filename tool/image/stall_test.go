package image

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"

	digest "github.com/opencontainers/go-digest"
)

// stallingRegistry serves ti, at any repository and tag, over plain HTTP
// on 127.0.0.1. The blob stalled sends half of itself, then nothing until
// the request ends.
func stallingRegistry(t *testing.T, ti testImage, stalled digest.Digest) *httptest.Server {
	t.Helper()
	blobs := map[digest.Digest][]byte{digest.FromBytes(ti.config): ti.config}
	for _, l := range ti.layers {
		blobs[l.digest] = l.blob
	}
	done := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		parts := strings.Split(r.URL.Path, "/")
		switch {
		case r.URL.Path == "/v2/":
			w.WriteHeader(http.StatusOK)
		case len(parts) > 3 && parts[len(parts)-2] == "manifests":
			w.Header().Set("Content-Type", ti.mimeType)
			w.Header().Set("Docker-Content-Digest", ti.digest().String())
			_, _ = w.Write(ti.manifest)
		case len(parts) > 3 && parts[len(parts)-2] == "blobs":
			d := digest.Digest(parts[len(parts)-1])
			b, ok := blobs[d]
			if !ok {
				http.NotFound(w, r)
				return
			}
			if d != stalled {
				_, _ = w.Write(b)
				return
			}
			w.Header().Set("Content-Length", strconv.Itoa(len(b)))
			_, _ = w.Write(b[:len(b)/2])
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
			case <-done:
			}
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(done) }) // before Close, which waits for the handlers
	return srv
}

// TestRegistryStall: a layer blob read from a registry that stalls
// mid-blob fails with a StallError naming the blob and the registry, once
// no data came for the stall timeout. A deadline far beyond it bounds the
// test if the timeout is not honoured, and then the error is the
// context's. A caller that waits between reads is not a stall.
func TestRegistryStall(t *testing.T) {
	opts := testEnv(t)
	noTLS := false
	opts.TLSVerify = &noTLS
	opts.StallTimeout = 300 * time.Millisecond
	ti := newImage(t, "amd64", "", false, baseLayers(t))
	stalled := ti.layers[1].digest
	srv := stallingRegistry(t, ti, stalled)
	host := strings.TrimPrefix(srv.URL, "http://")
	im := mustOpen(t, "docker://"+host+"/os/base:latest", opts)

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rc, err := im.OpenLayer(ctx, stalled)
	if err == nil {
		_, err = io.ReadAll(rc)
		rc.Close()
	}
	var se *StallError
	if !errors.As(err, &se) || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("reading a stalled blob = %v, want a *StallError", err)
	}
	if se.Blob != stalled || se.Registry != host || se.After != opts.StallTimeout {
		t.Errorf("StallError = %+v, want blob %s, registry %s, after %v", se, stalled, host, opts.StallTimeout)
	}
	want := "reading blob " + stalled.String() + " from registry " + host + ": no data for 300ms: the registry stalled"
	if !strings.Contains(err.Error(), want) {
		t.Errorf("error %q, want it to say %q", err, want)
	}

	rc, err = im.OpenLayer(ctx, ti.layers[0].digest)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	time.Sleep(3 * opts.StallTimeout) // the caller's time: not a stall
	if b, err := io.ReadAll(rc); err != nil || len(b) != len(ti.layers[0].blob) {
		t.Errorf("reading a blob after waiting = %d bytes, %v; want %d bytes", len(b), err, len(ti.layers[0].blob))
	}
}

// TestStallTimeoutOption: 0 is the default, a negative one no limit.
func TestStallTimeoutOption(t *testing.T) {
	for _, tt := range []struct{ in, want time.Duration }{{0, DefaultStallTimeout}, {-1, 0}, {time.Second, time.Second}} {
		if got := (Options{StallTimeout: tt.in}).stallTimeout(); got != tt.want {
			t.Errorf("Options{StallTimeout: %v}.stallTimeout() = %v, want %v", tt.in, got, tt.want)
		}
	}
}
