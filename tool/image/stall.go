package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"
)

// DefaultStallTimeout is how long a registry blob read may wait for data
// when Options.StallTimeout is 0.
const DefaultStallTimeout = 2 * time.Minute

// StallError is a registry blob read that waited After for data and got
// none: the registry stalled mid-blob (docs/design.md, "Registries").
type StallError struct {
	Blob     digest.Digest
	Registry string
	After    time.Duration
}

func (e *StallError) Error() string {
	return fmt.Sprintf("reading blob %s from registry %s: no data for %v: the registry stalled (--stall-timeout sets the limit)", e.Blob, e.Registry, e.After)
}

// stallTimeout is the stall limit o sets: 0 for none.
func (o Options) stallTimeout() time.Duration {
	switch {
	case o.StallTimeout < 0:
		return 0
	case o.StallTimeout == 0:
		return DefaultStallTimeout
	}
	return o.StallTimeout
}

// registryOf names the registry src reads from ("" when it is none).
func registryOf(src types.ImageSource) string {
	if named := src.Reference().DockerReference(); named != nil {
		return reference.Domain(named)
	}
	return ""
}

// stallOf is the StallError of a read of blob d that stalls, nil when
// the image's reads have no limit.
func (im *Image) stallOf(d digest.Digest) *StallError {
	if im.stall <= 0 {
		return nil
	}
	return &StallError{Blob: d, Registry: im.registry, After: im.stall}
}

// getBlob opens a blob of the image's source. From a registry, a wait for
// data (the response, or any one read) longer than the stall limit fails
// with a *StallError; the time the caller takes between reads does not
// count.
func (im *Image) getBlob(ctx context.Context, info types.BlobInfo, cache types.BlobInfoCache) (io.ReadCloser, int64, error) {
	var n int64
	rc, err := openGuarded(ctx, im.stallOf(info.Digest), func(ctx context.Context) (rc io.ReadCloser, err error) {
		rc, n, err = im.src.GetBlob(ctx, info, cache)
		return rc, err
	})
	if err != nil {
		return nil, 0, err
	}
	return rc, n, nil
}

// openGuarded calls open and returns what it opened, read with stall's
// limit (nil: none) on the wait for open's answer and on each read:
// past it, the request is cancelled and the wait or read fails with
// stall. Closing the reader releases the guard.
func openGuarded(ctx context.Context, stall *StallError, open func(context.Context) (io.ReadCloser, error)) (io.ReadCloser, error) {
	if stall == nil {
		return open(ctx)
	}
	g := newStallGuard(ctx, stall)
	g.arm()
	rc, err := open(g.ctx)
	g.disarm()
	if err != nil {
		return nil, g.done(err)
	}
	return &stallReader{rc: rc, g: g}, nil
}

// stallGuard cancels a request's context when a wait it is armed for
// lasts longer than the limit.
type stallGuard struct {
	ctx    context.Context
	cancel context.CancelCauseFunc
	stall  *StallError
	timer  *time.Timer
	once   sync.Once
}

func newStallGuard(ctx context.Context, stall *StallError) *stallGuard {
	g := &stallGuard{stall: stall}
	g.ctx, g.cancel = context.WithCancelCause(ctx)
	g.timer = time.AfterFunc(time.Hour, func() { g.cancel(stall) })
	g.timer.Stop()
	return g
}

// arm starts (or restarts) the wait; disarm ends it.
func (g *stallGuard) arm()    { g.timer.Reset(g.stall.After) }
func (g *stallGuard) disarm() { g.timer.Stop() }

// err returns the StallError in place of err when the guard fired.
func (g *stallGuard) err(err error) error {
	if err != nil && err != io.EOF && errors.Is(context.Cause(g.ctx), g.stall) {
		return g.stall
	}
	return err
}

// done releases the guard and returns err as err does.
func (g *stallGuard) done(err error) error {
	err = g.err(err)
	g.once.Do(func() { g.timer.Stop(); g.cancel(nil) })
	return err
}

// stallReader reads a blob with its guard armed during each read.
type stallReader struct {
	rc io.ReadCloser
	g  *stallGuard
}

func (r *stallReader) Read(p []byte) (int, error) {
	r.g.arm()
	n, err := r.rc.Read(p)
	r.g.disarm()
	return n, r.g.err(err)
}

func (r *stallReader) Close() error {
	err := r.rc.Close()
	_ = r.g.done(nil)
	return err
}

// progressReader restarts its guard's wait whenever data arrives: for the
// parts of a range request, read at once by their one consumer.
type progressReader struct {
	rc io.ReadCloser
	g  *stallGuard
}

func (r *progressReader) Read(p []byte) (int, error) {
	n, err := r.rc.Read(p)
	if n > 0 {
		r.g.arm()
	}
	return n, r.g.err(err)
}

func (r *progressReader) Close() error { return r.rc.Close() }
