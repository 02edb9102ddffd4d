package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"
)

// Upload is a new layer uploaded to a registry destination ahead of
// Append (UploadAhead).
type Upload struct {
	done   chan struct{}
	cancel context.CancelFunc
	repo   string // the repository it goes to
	digest digest.Digest
	size   int64
	// ok, once done is closed, says the blob is in repo; put, that the
	// upload put it there (else repo had it).
	ok, put bool
	// reported is set once a copy's report of the blob was made its
	// upload's (reportUploaded).
	reported atomic.Bool
}

// UploadAhead starts putting the new layer l into the repository of the
// docker:// destination dest, in the background (docs/design.md,
// "Registries"): a build writes the revert guard's layer, the same in
// every image built with that guard, before it has read the base's index,
// and it goes up while the build reads the index and renders. A
// repository that has the blob already (an earlier build pushed it) is
// only asked (a HEAD); else the blob goes up in one request (POST, then
// PUT with the whole blob). Append, given the upload (AppendOptions.Ahead),
// waits for it, and its copy is then told the blob is there
// (withPresent). What the upload could not do, the copy does as before.
// It returns nil when dest is not a docker:// reference. Stop stops it.
func UploadAhead(ctx context.Context, dest string, l NewLayer, opts Options) *Upload {
	r, err := ParseReference(dest)
	if err != nil || r.transport != transportDocker {
		return nil
	}
	ref, _, err := bind(r, opts)
	if err != nil || ref.DockerReference() == nil {
		return nil
	}
	sys, err := opts.destinationContext()
	if err != nil {
		return nil
	}
	return startUploads(ctx, sys, ref.DockerReference(), opts.stallTimeout(), []blobToPut{fileBlob(l, true)})[0]
}

// blobToPut is a blob startUploads puts.
type blobToPut struct {
	digest digest.Digest
	size   int64
	open   func() (io.ReadCloser, error)
	// ask says to ask the registry first whether it has the blob: for a
	// blob that is the same in many images.
	ask bool
}

func fileBlob(l NewLayer, ask bool) blobToPut {
	return blobToPut{digest: l.Digest, size: l.Size, ask: ask, open: func() (io.ReadCloser, error) { return os.Open(l.Path) }}
}

// startUploads starts putting each of blobs into named's repository, in
// parallel, with one client, and returns their uploads.
func startUploads(ctx context.Context, sys *types.SystemContext, named reference.Named, stall time.Duration, blobs []blobToPut) []*Upload {
	ctx, cancel := context.WithCancel(ctx)
	ups := make([]*Upload, len(blobs))
	for i, b := range blobs {
		ups[i] = &Upload{done: make(chan struct{}), cancel: cancel, repo: named.Name(), digest: b.digest, size: b.size}
	}
	go func() {
		client, err := registryHTTP(ctx, sys, named, []string{repoScope(named, transport.PushScope)})
		var wg sync.WaitGroup
		for i, b := range blobs {
			u := ups[i]
			if err != nil {
				slog.Debug("the blob was not uploaded ahead of the copy", "blob", b.digest, "err", err)
				close(u.done)
				continue
			}
			wg.Go(func() {
				defer close(u.done)
				put, err := putBlob(ctx, client, reference.Path(named), b, stall)
				if err != nil {
					slog.Debug("the blob was not uploaded ahead of the copy", "blob", b.digest, "err", err)
					return
				}
				u.ok, u.put = true, put
			})
		}
		wg.Wait()
		cancel()
	}()
	return ups
}

// reportUploaded is progress, told of each blob an upload of ahead put
// as written, whole, by the copy, which finds it there: once, not again
// on a retry of the copy.
func reportUploaded(progress func(BlobProgress), ahead []*Upload) func(BlobProgress) {
	if progress == nil || len(ahead) == 0 {
		return progress
	}
	return func(p BlobProgress) {
		// The copy reports a layer it finds there skipped, a config it
		// finds there written with no bytes.
		if p.Done {
			for _, u := range ahead {
				select {
				case <-u.done:
					if u.put && u.digest == p.Digest && u.reported.CompareAndSwap(false, true) {
						p.Skipped, p.Written = false, u.size
					}
				default:
				}
			}
		}
		progress(p)
	}
}

// Cancel stops the upload without waiting for it (Stop waits).
func (u *Upload) Cancel() {
	if u != nil {
		u.cancel()
	}
}

// Stop stops the upload and waits for it.
func (u *Upload) Stop() {
	if u != nil {
		u.cancel()
		<-u.done
	}
}

// wait waits for the upload, or stops it once ctx is done.
func (u *Upload) wait(ctx context.Context) {
	select {
	case <-u.done:
	case <-ctx.Done():
		u.Stop()
	}
}

// putBlob puts b into repo: when b.ask, not if repo has it (a HEAD);
// a POST that starts an upload and a PUT of the whole blob that ends it
// (distribution spec, "Pushing a blob monolithically"). It reports
// whether it put the blob. A wait for the registry (an answer, or taking
// the next bytes) longer than stall, when positive, fails it.
func putBlob(ctx context.Context, client registryClient, repo string, b blobToPut, stall time.Duration) (bool, error) {
	w := newWatchdog(ctx, stall)
	defer w.stop()
	ctx = w.ctx
	do := func(method, u string, body io.Reader, size int64) (*http.Response, error) {
		req, err := http.NewRequestWithContext(ctx, method, u, body)
		if err != nil {
			return nil, err
		}
		if body != nil {
			req.ContentLength = size
			req.Header.Set("Content-Type", "application/octet-stream")
		}
		resp, err := client.Do(req)
		w.alive()
		if err != nil {
			return nil, w.err(err)
		}
		resp.Body.Close() // not read: what matters is in the status and headers
		return resp, nil
	}
	if b.ask {
		resp, err := do(http.MethodHead, client.url("/v2/"+repo+"/blobs/"+b.digest.String(), nil), nil, 0)
		if err != nil {
			return false, err
		}
		if resp.StatusCode == http.StatusOK {
			return false, nil
		}
	}
	resp, err := do(http.MethodPost, client.url("/v2/"+repo+"/blobs/uploads/", nil), nil, 0)
	if err != nil {
		return false, err
	}
	if resp.StatusCode != http.StatusAccepted {
		return false, fmt.Errorf("starting the upload: %s", resp.Status)
	}
	loc, err := resp.Location()
	if err != nil {
		return false, fmt.Errorf("starting the upload: %w", err)
	}
	q := loc.Query()
	q.Set("digest", b.digest.String())
	loc.RawQuery = q.Encode()
	rc, err := b.open()
	if err != nil {
		cancelUpload(client, loc)
		return false, err
	}
	defer rc.Close()
	resp, err = do(http.MethodPut, loc.String(), w.reader(rc), b.size)
	if err == nil && resp.StatusCode != http.StatusCreated {
		err = fmt.Errorf("uploading: %s", resp.Status)
	}
	if err != nil {
		cancelUpload(client, loc)
		return false, err
	}
	return true, nil
}

// cancelUpload ends the upload session at loc (deleteUpload) after a
// failed upload, whose context may be done: it does not wait long.
func cancelUpload(client registryClient, loc *url.URL) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	q := loc.Query()
	q.Del("digest")
	loc.RawQuery = q.Encode()
	deleteUpload(ctx, client, loc)
}

// deleteUpload ends the upload session at loc, as containers/image does
// with one it does not finish (a registry may refuse; the session then
// expires by itself).
func deleteUpload(ctx context.Context, client registryClient, loc *url.URL) {
	if req, err := http.NewRequestWithContext(ctx, http.MethodDelete, loc.String(), nil); err == nil {
		if resp, err := client.Do(req); err == nil {
			resp.Body.Close()
		}
	}
}

// watchdog cancels its context when the registry has been waited for
// longer than its limit: alive, and every read of its readers, start the
// wait again.
type watchdog struct {
	ctx    context.Context
	cancel context.CancelFunc
	limit  time.Duration
	mu     sync.Mutex
	timer  *time.Timer
	fired  bool
}

var errUploadStalled = errors.New("the registry stalled")

func newWatchdog(ctx context.Context, limit time.Duration) *watchdog {
	w := &watchdog{limit: limit}
	w.ctx, w.cancel = context.WithCancel(ctx)
	if limit > 0 {
		w.timer = time.AfterFunc(limit, func() {
			w.mu.Lock()
			w.fired = true
			w.mu.Unlock()
			w.cancel()
		})
	}
	return w
}

func (w *watchdog) alive() {
	if w.timer != nil {
		w.timer.Reset(w.limit)
	}
}

// err is err, or the stall that caused it.
func (w *watchdog) err(err error) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.fired {
		return fmt.Errorf("%w: no progress for %v: %w", errUploadStalled, w.limit, err)
	}
	return err
}

func (w *watchdog) stop() {
	if w.timer != nil {
		w.timer.Stop()
	}
	w.cancel()
}

func (w *watchdog) reader(r io.Reader) io.Reader { return watchedReader{r, w} }

type watchedReader struct {
	r io.Reader
	w *watchdog
}

func (r watchedReader) Read(p []byte) (int, error) {
	r.w.alive()
	return r.r.Read(p)
}
