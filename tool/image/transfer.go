package image

import (
	"sync"
	"time"

	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/types"
)

// BlobProgress reports one blob of a write: new blobs as their bytes go
// out, and blobs the destination already has (present, mounted from
// another repository of the same registry, or hard-linked) as skipped.
type BlobProgress struct {
	Digest  digest.Digest
	Size    int64 // -1 when unknown
	Written int64 // bytes written to the destination so far
	Done    bool  // the blob is complete (written or skipped)
	Skipped bool  // not written: the destination has it
}

// Transfer totals the blobs of one or more writes; its Add method is a
// BlobProgress callback. A retried write counts every attempt's bytes.
type Transfer struct {
	mu       sync.Mutex
	uploaded int64
	written  int
	skipped  int
}

// Add records p.
func (t *Transfer) Add(p BlobProgress) {
	if !p.Done {
		return
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if p.Skipped {
		t.skipped++
		return
	}
	t.written++
	t.uploaded += p.Written
}

// Totals returns the bytes written, the blobs written and the blobs
// skipped.
func (t *Transfer) Totals() (uploaded int64, written, skipped int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.uploaded, t.written, t.skipped
}

// progressInterval is how often containers/image reports a blob's bytes.
const progressInterval = 100 * time.Millisecond

// watchProgress returns a channel for copy.Options.Progress that passes
// every event to report, and the function to call after the copy, which
// closes it and waits for the last event. A nil report gives a nil
// channel (no reporting).
func watchProgress(report func(BlobProgress)) (chan types.ProgressProperties, func()) {
	if report == nil {
		return nil, func() {}
	}
	ch := make(chan types.ProgressProperties)
	done := make(chan struct{})
	go func() {
		defer close(done)
		for p := range ch {
			report(blobProgress(p))
		}
	}()
	return ch, func() { close(ch); <-done }
}

func blobProgress(p types.ProgressProperties) BlobProgress {
	b := BlobProgress{Digest: p.Artifact.Digest, Size: p.Artifact.Size, Written: int64(p.Offset)}
	switch p.Event {
	case types.ProgressEventDone:
		b.Done = true
	case types.ProgressEventSkipped:
		b.Done, b.Skipped, b.Written = true, true, 0
	}
	return b
}
