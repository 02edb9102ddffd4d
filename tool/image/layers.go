package image

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"

	istorage "go.podman.io/image/v5/storage"
	"go.podman.io/image/v5/types"
	drivers "go.podman.io/storage/drivers"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// indexLayers describes the image's layers for baseindex, each with the
// metadata that lets the index skip its blob when the transport keeps
// some (docs/design.md, "Indexing a base"): the TOC of a zstd:chunked or
// eStargz layer, read by ranges of the blob (oci: reads the blob file,
// docker:// sends HTTP range requests), and a containers-storage layer's
// tar-split and unpacked files.
func (im *Image) indexLayers() []baseindex.Layer {
	unpacked := im.unpackedLayers()
	out := make([]baseindex.Layer, len(im.layers))
	for i, l := range im.layers {
		out[i] = baseindex.Layer{Digest: l.Digest, MediaType: l.MediaType, Size: l.Size, DiffID: l.DiffID,
			// The blob unchecked: baseindex checks the size and digest of
			// every blob it reads, and hashing it twice cost a cold build
			// of a gzip base 3% of its CPU.
			Open: func(ctx context.Context) (io.ReadCloser, error) {
				rc, _, err := im.openBlob(ctx, l.Digest)
				return rc, err
			}}
		if ranges := im.blobRanges(i); ranges != nil && len(im.descs[i].Annotations) > 0 {
			out[i].TOC = &baseindex.TOC{Annotations: im.descs[i].Annotations, ReadRanges: ranges}
		}
		if unpacked != nil {
			out[i].Unpacked = unpacked[i]
		}
	}
	return out
}

// rangeReader reads ranges of one blob.
type rangeReader = func(ctx context.Context, ranges []baseindex.Range) ([][]byte, error)

// blobRanges returns how to read ranges of layer i's blob, or nil when
// the transport cannot.
func (im *Image) blobRanges(i int) rangeReader {
	switch {
	case im.layoutDir != "":
		d := im.descs[i].Digest
		return fileRanges(blobPath(im.layoutDir, d))
	case supportsGetBlobAt(im.src):
		info := im.blobInfo(i)
		return func(ctx context.Context, ranges []baseindex.Range) ([][]byte, error) {
			if im.src == nil {
				return nil, errClosed
			}
			return remoteRanges(ctx, im.src, info, ranges, im.stallOf(info.Digest))
		}
	}
	return nil
}

// fileRanges reads ranges of a blob file of an OCI layout.
func fileRanges(file string) rangeReader {
	return func(_ context.Context, ranges []baseindex.Range) (_ [][]byte, err error) {
		f, err := os.Open(file)
		if err != nil {
			return nil, fmt.Errorf("%w: %v", baseindex.ErrNoRanges, err)
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		out := make([][]byte, len(ranges))
		for i, r := range ranges {
			out[i] = make([]byte, r.Length)
			if _, err := f.ReadAt(out[i], r.Offset); err != nil {
				return nil, fmt.Errorf("reading %s at %d: %w", file, r.Offset, err)
			}
		}
		return out, nil
	}
}

// supportsGetBlobAt reports whether src serves ranges of blobs, as
// containers/image's registry source does (its GetBlobAt, which
// containers/storage's chunked puller uses).
func supportsGetBlobAt(src types.ImageSource) bool {
	s, ok := src.(interface{ SupportsGetBlobAt() bool })
	return ok && s.SupportsGetBlobAt() && reflect.ValueOf(src).MethodByName("GetBlobAt").IsValid()
}

const (
	// maxRangesPerRequest bounds a request's Range header.
	maxRangesPerRequest = 64
	// rangeGap is the largest gap between two ranges fetched as one.
	rangeGap = 16 << 10
)

// remoteRanges reads ranges of a registry blob with HTTP range requests:
// near ranges merged into one, at most maxRangesPerRequest to a request;
// a request that waits stall.After for data fails with stall (nil: no
// limit).
func remoteRanges(ctx context.Context, src types.ImageSource, info types.BlobInfo, ranges []baseindex.Range, stall *StallError) ([][]byte, error) {
	spans := coalesce(ranges)
	data := make([][]byte, len(spans))
	for start := 0; start < len(spans); start += maxRangesPerRequest {
		batch := spans[start:min(start+maxRangesPerRequest, len(spans))]
		got, err := getBlobAt(ctx, src, info, batch, stall)
		if err != nil {
			return nil, err
		}
		copy(data[start:], got)
	}
	out := make([][]byte, len(ranges))
	for i, r := range ranges {
		k, _ := slices.BinarySearchFunc(spans, r.Offset, func(s baseindex.Range, off int64) int {
			switch {
			case s.Offset+s.Length <= off:
				return -1
			case s.Offset > off:
				return 1
			}
			return 0
		})
		rel := r.Offset - spans[k].Offset
		out[i] = data[k][rel : rel+r.Length]
	}
	return out, nil
}

// coalesce sorts ranges and merges those closer than rangeGap.
func coalesce(ranges []baseindex.Range) []baseindex.Range {
	sorted := slices.Clone(ranges)
	slices.SortFunc(sorted, func(a, b baseindex.Range) int { return int(a.Offset - b.Offset) })
	var out []baseindex.Range
	for _, r := range sorted {
		if n := len(out); n > 0 && r.Offset <= out[n-1].Offset+out[n-1].Length+rangeGap {
			last := &out[n-1]
			last.Length = max(last.Length, r.Offset+r.Length-last.Offset)
			continue
		}
		out = append(out, r)
	}
	return out
}

// getBlobAt calls src's GetBlobAt. Its chunk type is internal to
// containers/image, so the call goes through reflection; a source whose
// method does not have the expected shape, or a registry refusing range
// requests, is baseindex.ErrNoRanges.
func getBlobAt(ctx context.Context, src types.ImageSource, info types.BlobInfo, spans []baseindex.Range, stall *StallError) (_ [][]byte, err error) {
	var g *stallGuard
	if stall != nil {
		g = newStallGuard(ctx, stall)
		defer func() { err = g.done(err) }()
		ctx = g.ctx
		g.arm() // until the end: the parts are read at once, restarting it
	}
	m := reflect.ValueOf(src).MethodByName("GetBlobAt")
	t := m.Type()
	if t.NumIn() != 3 || t.NumOut() != 3 || t.In(2).Kind() != reflect.Slice || t.In(2).Elem().Kind() != reflect.Struct {
		return nil, fmt.Errorf("%w: unexpected GetBlobAt", baseindex.ErrNoRanges)
	}
	chunks := reflect.MakeSlice(t.In(2), len(spans), len(spans))
	for i, s := range spans {
		off, length := chunks.Index(i).FieldByName("Offset"), chunks.Index(i).FieldByName("Length")
		if !off.IsValid() || !length.IsValid() || off.Kind() != reflect.Uint64 || length.Kind() != reflect.Uint64 {
			return nil, fmt.Errorf("%w: unexpected GetBlobAt chunk", baseindex.ErrNoRanges)
		}
		off.SetUint(uint64(s.Offset))
		length.SetUint(uint64(s.Length))
	}
	res := m.Call([]reflect.Value{reflect.ValueOf(ctx), reflect.ValueOf(info), chunks})
	if err, _ := res[2].Interface().(error); err != nil {
		if strings.Contains(reflect.TypeOf(err).Name(), "BadPartialRequest") {
			return nil, fmt.Errorf("%w: %v", baseindex.ErrNoRanges, err)
		}
		return nil, fmt.Errorf("fetching blob ranges: %w", err)
	}
	streams, ok1 := res[0].Interface().(chan io.ReadCloser)
	errs, ok2 := res[1].Interface().(chan error)
	if !ok1 || !ok2 {
		return nil, fmt.Errorf("%w: unexpected GetBlobAt results", baseindex.ErrNoRanges)
	}
	return readStreams(streams, errs, spans, g)
}

// readStreams reads the parts GetBlobAt sends, one per span in order,
// draining both channels whatever happens; each arriving byte restarts g
// (nil: none).
func readStreams(streams chan io.ReadCloser, errs chan error, spans []baseindex.Range, g *stallGuard) ([][]byte, error) {
	var out [][]byte
	var failed error
	for streams != nil || errs != nil {
		select {
		case s, ok := <-streams:
			if !ok {
				streams = nil
				continue
			}
			if g != nil {
				s = &progressReader{rc: s, g: g}
			}
			b, err := readPart(s, spans, len(out))
			failed = errors.Join(failed, err)
			out = append(out, b)
		case err, ok := <-errs:
			if !ok {
				errs = nil
				continue
			}
			failed = errors.Join(failed, err)
		}
	}
	if failed != nil {
		return nil, fmt.Errorf("fetching blob ranges: %w", failed)
	}
	if len(out) != len(spans) {
		return nil, fmt.Errorf("%w: the registry sent %d parts for %d ranges", baseindex.ErrNoRanges, len(out), len(spans))
	}
	return out, nil
}

// readPart reads the part for span k, which must have its length.
func readPart(s io.ReadCloser, spans []baseindex.Range, k int) ([]byte, error) {
	if k >= len(spans) {
		return nil, errors.Join(fmt.Errorf("%w: the registry sent more parts than ranges", baseindex.ErrNoRanges), s.Close())
	}
	b, err := io.ReadAll(io.LimitReader(s, spans[k].Length+1))
	err = errors.Join(err, s.Close())
	if err == nil && int64(len(b)) != spans[k].Length {
		err = fmt.Errorf("%w: a part of %d bytes for a range of %d", baseindex.ErrNoRanges, len(b), spans[k].Length)
	}
	return b, err
}

// unpackedLayers returns, for a containers-storage image, each layer's
// tar-split and unpacked files; nil for other transports, and when the
// store's layers cannot be matched to the image's.
func (im *Image) unpackedLayers() []*baseindex.Unpacked {
	if im.store == nil {
		return nil
	}
	ids, err := im.storageLayers()
	if err != nil {
		slog.Debug("reading the store's layers from their blobs", "reason", err)
		return nil
	}
	driver, err := im.store.GraphDriver()
	if err != nil {
		slog.Debug("reading the store's layers from their blobs", "reason", err)
		return nil
	}
	getter, ok := driver.(drivers.DiffGetterDriver)
	if !ok {
		slog.Debug("reading the store's layers from their blobs", "reason", "the driver "+driver.String()+" has no diff getter")
		return nil
	}
	out := make([]*baseindex.Unpacked, len(ids))
	for i, id := range ids {
		out[i] = &baseindex.Unpacked{
			TarSplit: func(context.Context) (io.ReadCloser, error) { return im.openTarSplit(id) },
			Open:     func(p string) (io.ReadCloser, error) { return im.getters.open(getter, id, p) },
		}
	}
	return out
}

// storageLayers returns the store's layer IDs of the image, bottom first,
// checked against the image's diff IDs.
func (im *Image) storageLayers() ([]string, error) {
	// The source's reference names the image by its ID.
	ref, err := istorage.Transport.ParseStoreReference(im.store, im.src.Reference().StringWithinTransport())
	if err != nil {
		return nil, err
	}
	_, img, err := istorage.ResolveReference(ref)
	if err != nil {
		return nil, err
	}
	var ids []string
	for id := img.TopLayer; id != ""; {
		l, err := im.store.Layer(id)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
		if len(ids) > len(im.layers) || l.UncompressedDigest != im.layers[len(im.layers)-len(ids)].DiffID {
			return nil, fmt.Errorf("store layer %s is not the image's layer %d", id, len(im.layers)-len(ids))
		}
		id = l.Parent
	}
	if len(ids) != len(im.layers) {
		return nil, fmt.Errorf("the store has %d layers for the image's %d", len(ids), len(im.layers))
	}
	slices.Reverse(ids)
	return ids, nil
}

// openTarSplit opens a store layer's tar-split. containers/storage keeps
// it at GRAPHROOT/DRIVER-layers/ID.tar-split.gz (or under the image
// store) and has no accessor for it.
func (im *Image) openTarSplit(id string) (io.ReadCloser, error) {
	if im.store == nil {
		return nil, errClosed
	}
	name := im.store.GraphDriverName() + "-layers"
	var firstErr error
	for _, root := range []string{im.store.GraphRoot(), im.store.ImageStore()} {
		if root == "" {
			continue
		}
		f, err := os.Open(filepath.Join(root, name, id+".tar-split.gz"))
		if err == nil {
			return f, nil
		}
		if firstErr == nil {
			firstErr = err
		}
	}
	return nil, firstErr
}

// getters are the file getters of an image's store layers, each opened
// on its first use and kept until the image is closed: making one walks
// the chain of layers below it, which costs a warm diff of a 48-layer
// base more than the reads of its deferred digests.
type getters struct {
	mu     sync.Mutex
	m      map[string]drivers.FileGetCloser
	closed bool
}

// open opens the file at p of the unpacked store layer id; it must be a
// regular file. The layer's file getter searches the layers below too,
// which is what a deferred digest's search wants anyway.
func (gs *getters) open(driver diffGetter, id, p string) (io.ReadCloser, error) {
	g, err := gs.get(driver, id)
	if err != nil {
		return nil, err
	}
	rc, err := g.Get(p)
	if err != nil {
		return nil, err
	}
	if f, ok := rc.(*os.File); ok {
		if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
			return nil, errors.Join(&fs.PathError{Op: "open", Path: p, Err: fs.ErrNotExist}, f.Close())
		}
	}
	return rc, nil
}

func (gs *getters) get(driver diffGetter, id string) (drivers.FileGetCloser, error) {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	if g, ok := gs.m[id]; ok {
		return g, nil
	}
	if gs.closed {
		return nil, fmt.Errorf("reading a store layer's files: %w", errClosed)
	}
	g, err := driver.DiffGetter(id)
	if err != nil {
		return nil, err
	}
	if gs.m == nil {
		gs.m = map[string]drivers.FileGetCloser{}
	}
	gs.m[id] = g
	return g, nil
}

// diffGetter is the part of a drivers.DiffGetterDriver getters use.
type diffGetter interface {
	DiffGetter(id string) (drivers.FileGetCloser, error)
}

// close closes every getter opened.
func (gs *getters) close() error {
	gs.mu.Lock()
	defer gs.mu.Unlock()
	gs.closed = true
	var errs []error
	for id, g := range gs.m {
		errs = append(errs, g.Close())
		delete(gs.m, id)
	}
	return errors.Join(errs...)
}
