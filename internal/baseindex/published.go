package baseindex

import (
	"bufio"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
)

// ViewVersion is the version of the view format (see viewVersion): an
// index published for other machines records it, and one of another
// version is not used.
const ViewVersion = viewVersion

// ErrNoView is returned by PublishableView when the cache holds no view
// of the chain that could serve another machine.
var ErrNoView = errors.New("no publishable cached index")

// ErrRefused wraps every reason ImportView refuses a view.
var ErrRefused = errors.New("index refused")

// PublishableView returns the bytes of the cached view of the chain of
// layers, for another machine to use (ImportView): a view whose head and
// every block match their checksums, and which defers no digest (a
// deferred digest needs this machine's unpacked files). ErrNoView when
// there is none.
func PublishableView(cacheDir string, layers []Layer) ([]byte, error) {
	if cacheDir == "" {
		return nil, ErrNoView
	}
	file := viewFile(cacheDir, viewKey(layers))
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrNoView, err)
	}
	if err := checkView(b, layers); err != nil {
		return nil, fmt.Errorf("%w: %s: %v", ErrNoView, file, err)
	}
	return b, nil
}

// ImportView checks b, a view received from elsewhere, as the view of the
// chain of layers, and caches it in cacheDir atomically, where Build then
// reads it as its own. It checks what readView checks of a cached view
// (the format version, the checksum of the head, the chain's key, which
// names every layer's blob digest and diff_id), and every block's
// checksum at once rather than as lookups reach them; and it refuses a
// view that defers digests. A refusal wraps ErrRefused.
func ImportView(cacheDir string, layers []Layer, b []byte) error {
	if cacheDir == "" {
		return errors.New("importing an index needs a cache directory")
	}
	if err := checkView(b, layers); err != nil {
		return fmt.Errorf("%w: %v", ErrRefused, err)
	}
	return writeFileAtomically(viewFile(cacheDir, viewKey(layers)), func(w *bufio.Writer) error {
		_, err := w.Write(b)
		return err
	}, nil)
}

// checkView checks a whole view of the chain of layers.
func checkView(b []byte, layers []Layer) error {
	if len(b) < viewHeader+viewFixed {
		return errors.New("too short to be an index view")
	}
	v, _, ok := openView(b, viewKey(layers), nil)
	if !ok {
		return fmt.Errorf("not a view of this base's layers in format version %d (magic, version, length, head checksum or layer chain differ)", viewVersion)
	}
	if flags := viewFlags(b); flags&viewDeferred != 0 {
		return errors.New("the view defers digests")
	}
	if blk := v.damaged(); blk >= 0 {
		return fmt.Errorf("block %d does not match its checksum", blk)
	}
	return nil
}

// viewFlags returns the flags of a view whose head openView accepted.
func viewFlags(b []byte) uint32 {
	return binary.LittleEndian.Uint32(b[viewHeader+sha256.Size+8:])
}
