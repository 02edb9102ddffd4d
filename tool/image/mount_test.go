package image

import (
	"context"
	"testing"
	"time"
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
