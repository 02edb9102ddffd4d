package image

import (
	"fmt"
	"log/slog"
	"sync"

	istorage "go.podman.io/image/v5/storage"
	"go.podman.io/image/v5/types"
	"go.podman.io/storage"
	"go.podman.io/storage/pkg/reexec"
)

// InitReexec must run first in main (and in TestMain) of any program that
// writes to containers-storage: the storage library applies layers in
// re-executed helper processes. It returns true inside such a helper, where
// main must return at once.
func InitReexec() bool { return reexec.Init() }

// bind returns the containers/image reference for r. For containers-storage
// it opens the store chosen by opts and returns it too; the caller must shut
// it down (shutdownStore) when done. For other transports the store is nil.
func bind(r Ref, opts Options) (types.ImageReference, storage.Store, error) {
	if r.transport != transportStorage {
		ref, err := r.imageReference()
		return ref, nil, err
	}
	store, err := openStore(opts)
	if err != nil {
		return nil, nil, err
	}
	ref, err := istorage.Transport.ParseStoreReference(store, r.within)
	if err != nil {
		return nil, nil, joinShutdown(err, store)
	}
	return ref, store, nil
}

// openStore opens the containers-storage store: storage.conf's defaults with
// opts' root, run root and driver applied on top.
func openStore(opts Options) (storage.Store, error) {
	so, err := storage.DefaultStoreOptions()
	if err != nil {
		return nil, fmt.Errorf("reading storage configuration: %w", err)
	}
	if opts.StorageRoot != "" {
		so.GraphRoot = opts.StorageRoot
	}
	if opts.StorageRunRoot != "" {
		so.RunRoot = opts.StorageRunRoot
	}
	if opts.StorageDriver != "" && opts.StorageDriver != so.GraphDriverName {
		// Options in storage.conf belong to the configured driver.
		so.GraphDriverName = opts.StorageDriver
		so.GraphDriverOptions = nil
	}
	store, err := storage.GetStore(so)
	if err != nil {
		return nil, fmt.Errorf("opening container storage at %s: %w", so.GraphRoot, err)
	}
	storeUsers.Lock()
	storeUsers.n[store]++
	storeUsers.Unlock()
	return store, nil
}

// storeUsers counts the users of each store openStore returned.
// containers/storage returns one store per root and run root to the
// whole process; its Shutdown records a write to the store, which has
// the next user make its graph driver and load its layers again. So a
// store is shut down when its last user is done: a diff reading the
// image's manifest while it opens the base (see HoldStore), and a build
// writing into the store its base is in, load it once.
var storeUsers = struct {
	sync.Mutex
	n map[storage.Store]int
}{n: map[storage.Store]int{}}

// HoldStore keeps the containers-storage store that ref (a transport
// reference) names open until release is called, so that images opened
// from it one after the other, or side by side, share one loading of it.
// Any other reference, and a store that does not open (opening the image
// will say why), hold nothing.
func HoldStore(ref string, opts Options) (release func()) {
	r, err := ParseReference(ref)
	if err != nil || r.transport != transportStorage {
		return func() {}
	}
	store, err := openStore(opts)
	if err != nil {
		return func() {}
	}
	return func() {
		if err := shutdownStore(store); err != nil {
			slog.Debug("releasing a held store", "err", err)
		}
	}
}

// shutdownStore releases a store opened by bind, and shuts it down when
// no other user has it open; nil is allowed.
func shutdownStore(store storage.Store) error {
	if store == nil {
		return nil
	}
	storeUsers.Lock()
	storeUsers.n[store]--
	last := storeUsers.n[store] <= 0
	if last {
		delete(storeUsers.n, store)
	}
	storeUsers.Unlock()
	if !last {
		return nil
	}
	if _, err := store.Shutdown(false); err != nil {
		return fmt.Errorf("shutting down container storage: %w", err)
	}
	return nil
}

// joinShutdown shuts store down and returns err with any shutdown error.
func joinShutdown(err error, store storage.Store) error {
	if serr := shutdownStore(store); serr != nil {
		return fmt.Errorf("%w (also: %v)", err, serr)
	}
	return err
}
