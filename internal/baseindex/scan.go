package baseindex

import (
	"archive/tar"
	"bufio"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"hash"
	"io"
	"math"
	"path"
	"slices"
	"strconv"
	"strings"

	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex/tarparse"
	"github.com/mcbake/mcbake/internal/decompress"
	"github.com/mcbake/mcbake/machineconfig"
)

// ErrDigestMismatch is returned when a layer blob does not hash to its
// descriptor's digest.
var ErrDigestMismatch = errors.New("digest mismatch")

// ErrDiffIDMismatch is returned when a layer's uncompressed stream does
// not hash to its diff_id.
var ErrDiffIDMismatch = errors.New("diff_id mismatch")

const (
	whiteoutPrefix = ".wh."
	whiteoutMeta   = ".wh..wh."
	opaqueMarker   = ".wh..wh..opq"

	// smallFile is the largest file read whole into a recent-files slot.
	smallFile = 64 << 10
	// recentFiles is how many recent small files a scan remembers, so that
	// a hardlink at a kept path can take the content of a target that is
	// not itself kept. ostree-ext writes every object right before the
	// hardlinks to it, so one would do; a few cover other tar writers.
	recentFiles = 4
	// copyBuffer is the size of the buffer large files are hashed through.
	copyBuffer = 256 << 10
	// blobBuffer is the read-ahead on the compressed stream.
	blobBuffer = 256 << 10
)

// layerMediaTypes are the media types of the layers Build accepts; "" lets
// the magic bytes decide.
var layerMediaTypes = map[string]bool{
	"":                                       true,
	"application/vnd.oci.image.layer.v1.tar": true,
	"application/vnd.oci.image.layer.v1.tar+gzip":                  true,
	"application/vnd.oci.image.layer.v1.tar+zstd":                  true,
	"application/vnd.oci.image.layer.nondistributable.v1.tar":      true,
	"application/vnd.oci.image.layer.nondistributable.v1.tar+gzip": true,
	"application/vnd.oci.image.layer.nondistributable.v1.tar+zstd": true,
	"application/vnd.docker.image.rootfs.diff.tar":                 true,
	"application/vnd.docker.image.rootfs.diff.tar.gzip":            true,
	"application/vnd.docker.image.rootfs.diff.tar.zstd":            true,
	"application/vnd.docker.image.rootfs.foreign.diff.tar.gzip":    true,
}

// scanLayer streams one layer blob, checks its digest and size, and returns
// its entries.
// An eStargz layer's metadata files are skipped (estargzMeta).
func scanLayer(ctx context.Context, l Layer, progress func(digest.Digest, int64), skipEstargz bool) (*scanned, error) {
	s, err := scanBlob(ctx, l, progress, nil, skipEstargz)
	if err != nil {
		return nil, err
	}
	want, err := s.pendingTargets()
	if err != nil {
		return nil, err
	}
	if len(want) == 0 {
		return &s.scanned, nil
	}
	// Some hardlinks at kept paths point to files whose content the first
	// pass did not keep: read the layer again for just those files.
	again, err := scanBlob(ctx, l, nil, want, skipEstargz)
	if err != nil {
		return nil, fmt.Errorf("second pass: %w", err)
	}
	if err := s.fillLinks(want, again.got); err != nil {
		return nil, err
	}
	return &s.scanned, nil
}

// scanBlob makes one pass over a layer blob. want holds the indexes of the
// entries whose content to keep in the scanner's got map.
func scanBlob(ctx context.Context, l Layer, progress func(digest.Digest, int64), want map[int]bool, skipEstargz bool) (*scanner, error) {
	s, err := scanBlobWith(ctx, l, progress, want, skipEstargz, false)
	if errors.Is(err, tarparse.ErrSparse) {
		// The rare layer with a sparse file is read again, with
		// archive/tar.
		return scanBlobWith(ctx, l, progress, want, skipEstargz, true)
	}
	return s, err
}

// scanBlobWith is scanBlob, reading the tar stream with archive/tar if
// archiveTar is set.
func scanBlobWith(ctx context.Context, l Layer, progress func(digest.Digest, int64), want map[int]bool, skipEstargz, archiveTar bool) (s *scanner, err error) {
	if l.Open == nil {
		return nil, errors.New("layer has no Open function")
	}
	rc, err := l.Open(ctx)
	if err != nil {
		return nil, fmt.Errorf("opening blob: %w", err)
	}
	defer func() { err = errors.Join(err, rc.Close()) }()
	var r io.Reader = rc
	if l.Size > 0 {
		r = io.LimitReader(rc, l.Size+1) // enough to notice a longer blob
	}
	blob := newBlobReader(ctx, r, l, progress)
	br := bufio.NewReaderSize(blob, blobBuffer)
	s = newScanner(want)
	s.skipEstargz, s.archiveTar = skipEstargz, archiveTar
	if l.DiffID != "" && want == nil {
		if err := l.DiffID.Validate(); err != nil {
			return nil, fmt.Errorf("diff_id: %w", err)
		}
		s.diff = l.DiffID.Algorithm().Hash()
	}
	if err := s.readBlob(br, l.MediaType); err != nil {
		if ctx.Err() != nil || isLimit(err) || errors.Is(err, tarparse.ErrSparse) {
			// A limit refuses the layer whatever the rest of the blob; a
			// sparse file has it read again.
			return nil, err
		}
		// A corrupt stream is most likely a corrupt download: say so if
		// the rest of the blob confirms it.
		if _, derr := io.Copy(io.Discard, br); derr == nil {
			if verr := blob.verify(); verr != nil {
				return nil, verr
			}
		}
		return nil, err
	}
	if _, err := io.Copy(io.Discard, br); err != nil {
		return nil, fmt.Errorf("reading blob: %w", err)
	}
	if err := blob.verify(); err != nil {
		return nil, err
	}
	if s.diff != nil {
		// What a layer's diff_id vouches for is its uncompressed stream:
		// an image whose config lies about it is refused, not copied.
		if got := digest.NewDigest(l.DiffID.Algorithm(), s.diff); got != l.DiffID {
			return nil, fmt.Errorf("%w: the uncompressed layer is %s, the image config's diff_id says %s", ErrDiffIDMismatch, got, l.DiffID)
		}
	}
	return s, nil
}

// readBlob decompresses br and reads the tar stream in it to its end,
// into s.diff too when it is set.
func (s *scanner) readBlob(br *bufio.Reader, mediaType string) (err error) {
	dec, err := openLayer(br, mediaType)
	if err != nil {
		return err
	}
	defer func() {
		// A decompressor's Close repeats the error a read already returned.
		if cerr := dec.Close(); cerr != nil && !errors.Is(err, cerr) {
			err = errors.Join(err, cerr)
		}
	}()
	var r io.Reader = dec
	if s.diff != nil {
		r = io.TeeReader(dec, s.diff)
	}
	if err := s.readTar(r); err != nil {
		return err
	}
	// Read what follows the end of the archive so that the decompressor
	// checks its trailer (gzip's CRC and size), and the diff_id is of the
	// whole stream.
	if _, err := io.CopyBuffer(io.Discard, r, s.buf); err != nil {
		return fmt.Errorf("reading past the end of the tar stream: %w", err)
	}
	return nil
}

// openLayer checks the media type is a layer type and opens the stream
// (the magic bytes pick the decompressor).
func openLayer(br *bufio.Reader, mediaType string) (io.ReadCloser, error) {
	if !layerMediaTypes[mediaType] {
		return nil, fmt.Errorf("unsupported layer media type %q", mediaType)
	}
	return decompress.Reader(br)
}

// blobReader hashes and counts the compressed stream as it is read, and
// stops when the context is done.
type blobReader struct {
	ctx      context.Context
	r        io.Reader
	layer    Layer
	hash     hash.Hash
	n        int64
	progress func(digest.Digest, int64)
}

func newBlobReader(ctx context.Context, r io.Reader, l Layer, progress func(digest.Digest, int64)) *blobReader {
	return &blobReader{ctx: ctx, r: r, layer: l, hash: l.Digest.Algorithm().Hash(), progress: progress}
}

func (b *blobReader) Read(p []byte) (int, error) {
	if err := b.ctx.Err(); err != nil {
		return 0, err
	}
	n, err := b.r.Read(p)
	if n > 0 {
		b.hash.Write(p[:n])
		b.n += int64(n)
		if b.progress != nil {
			b.progress(b.layer.Digest, b.n)
		}
	}
	return n, err
}

// verify checks the digest and, when the layer has one, the size of what
// was read.
func (b *blobReader) verify() error {
	// The size first: a blob longer than its descriptor says is read one
	// byte past it, and its digest cannot match then.
	switch {
	case b.layer.Size > 0 && b.n > b.layer.Size:
		return fmt.Errorf("size mismatch: the blob is longer than the %d bytes its descriptor says", b.layer.Size)
	case b.layer.Size > 0 && b.n < b.layer.Size:
		return fmt.Errorf("size mismatch: read %d bytes, descriptor says %d", b.n, b.layer.Size)
	}
	if got := digest.NewDigest(b.layer.Digest.Algorithm(), b.hash); got != b.layer.Digest {
		return fmt.Errorf("%w (got %s)", ErrDigestMismatch, got)
	}
	return nil
}

// scanner turns tar entries into nodes.
type scanner struct {
	scanned
	hash hash.Hash
	buf  []byte

	recent [recentFiles]recentFile
	next   int
	// kept holds this layer's kept contents by path, for hardlinks.
	kept map[string][]byte
	// needs lists hardlinks at kept paths whose target content the scan
	// did not have at hand.
	needs []int

	want map[int]bool
	got  map[int][]byte
	// skipEstargz skips eStargz's metadata files.
	skipEstargz bool
	// archiveTar reads the stream with archive/tar, which expands sparse
	// files, rather than tarparse.Reader.
	archiveTar bool
	// diff, when set, hashes the uncompressed stream, for Layer.DiffID.
	diff hash.Hash
	// budget counts the contents kept.
	budget keptBudget
	// at lists, by path, the indexes of the entries at it, in order: what
	// linkTarget looks hardlink targets up in, made on its first use.
	at map[string][]int
}

// recentFile is a small file the scan read recently.
type recentFile struct {
	path string
	data []byte
	ok   bool
}

func newScanner(want map[int]bool) *scanner {
	s := newListScanner()
	s.hash, s.buf, s.want = sha256.New(), make([]byte, copyBuffer), want
	return s
}

// newListScanner returns a scanner for listings, which hash nothing.
func newListScanner() *scanner {
	return &scanner{kept: map[string][]byte{}, scanned: newScanned(), got: map[int][]byte{}, budget: keptBudget{scope: "of this layer"}}
}

// readTar reads every entry of a tar stream, with tarparse.Reader unless the
// scanner is told to use archive/tar.
func (s *scanner) readTar(r io.Reader) error {
	if s.archiveTar {
		return eachEntry(tar.NewReader(r), s.add)
	}
	return eachEntry(tarparse.NewReader(r), s.add)
}

// entryReader reads a tar stream: archive/tar's Reader or tarparse.Reader.
type entryReader interface {
	Next() (*tar.Header, error)
	io.Reader
}

// eachEntry calls fn with every entry of tr and a reader of its content;
// an error names the entry.
func eachEntry(tr entryReader, fn func(hdr *tar.Header, content io.Reader) error) error {
	for {
		hdr, err := tr.Next()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return fmt.Errorf("reading tar stream: %w", err)
		}
		if err := fn(hdr, tr); err != nil {
			return fmt.Errorf("tar entry %s: %w", quoteName(hdr.Name), err)
		}
	}
}

// add records one tar entry; r reads its content.
func (s *scanner) add(hdr *tar.Header, r io.Reader) error {
	e, p, ok, err := s.header(hdr)
	if err != nil || !ok {
		return err
	}
	switch e.typ {
	case File:
		return s.addFile(e, p, hdr.Size, r)
	case Hardlink:
		if err := s.addHardlink(&e, p, hdr.Linkname); err != nil {
			return err
		}
		if err := s.linkContent(p, s.str(e.target)); err != nil {
			return err
		}
	}
	s.entries = append(s.entries, e)
	return nil
}

// header turns a tar header into an entry at path p, with its path and,
// for a symlink, its target interned; it records whiteouts and opaque
// markers itself. It reports false for what is not an entry.
func (s *scanner) header(hdr *tar.Header) (e entry, p string, ok bool, err error) {
	if hdr.Typeflag == tar.TypeXGlobalHeader {
		return e, "", false, nil
	}
	if p, err = entryPath(hdr.Name); err != nil {
		return e, "", false, err
	}
	if aufsMeta(p) || s.skipEstargz && estargzMeta[p] {
		return e, "", false, nil
	}
	s.forget(p)
	if name := baseName(p); strings.HasPrefix(name, whiteoutPrefix) {
		return e, "", false, s.addWhiteout(parentDir(p), name)
	}
	if !validID(hdr.Uid) || !validID(hdr.Gid) {
		return e, "", false, fmt.Errorf("owner %d:%d is not a valid uid:gid", hdr.Uid, hdr.Gid)
	}
	e = entry{mode: uint32(hdr.Mode) & 0o7777, uid: uint32(hdr.Uid), gid: uint32(hdr.Gid)}
	if e.typ, err = entryType(hdr.Typeflag); err != nil {
		return e, "", false, err
	}
	if p == "" && e.typ != Dir {
		return e, "", false, fmt.Errorf("root is a %s", e.typ)
	}
	if e.path, err = s.intern(p); err != nil {
		return e, "", false, err
	}
	if e.typ == Symlink {
		if err := checkTarget(hdr.Linkname); err != nil {
			return e, "", false, err
		}
		e.target, err = s.intern(hdr.Linkname)
	}
	return e, p, err == nil, err
}

// addHardlink sets the target of a hardlink at p.
func (s *scanner) addHardlink(e *entry, p, linkname string) error {
	target, err := entryPath(linkname)
	if err != nil {
		return fmt.Errorf("hardlink target: %w", err)
	}
	if target == p {
		return errors.New("hardlink to itself")
	}
	e.target, err = s.intern(target)
	return err
}

// validID reports whether id is a uid or gid that Linux can give a file.
func validID(id int) bool {
	return id >= 0 && uint64(id) <= math.MaxUint32
}

// aufsMeta reports whether p is under an aufs metadata directory such as
// ".wh..wh.plnk", which extraction skips.
func aufsMeta(p string) bool {
	first, _, nested := strings.Cut(p, "/")
	return nested && strings.HasPrefix(first, whiteoutMeta)
}

// entryType maps a tar type flag to a node type.
func entryType(flag byte) (Type, error) {
	switch flag {
	case tar.TypeReg, '\x00', tar.TypeGNUSparse, tar.TypeCont:
		return File, nil
	case tar.TypeDir:
		return Dir, nil
	case tar.TypeSymlink:
		return Symlink, nil
	case tar.TypeLink:
		return Hardlink, nil
	case tar.TypeChar:
		return CharDevice, nil
	case tar.TypeBlock:
		return BlockDevice, nil
	case tar.TypeFifo:
		return FIFO, nil
	}
	return 0, fmt.Errorf("unsupported tar entry type %q", flag)
}

// addWhiteout records a whiteout or opaque marker found in dir. Other
// ".wh..wh." names are aufs metadata and mean nothing to an image.
func (s *scanner) addWhiteout(dir, name string) error {
	m := entry{typ: typeWhiteout}
	switch {
	case name == opaqueMarker:
		m.typ = typeOpaque
	case strings.HasPrefix(name, whiteoutMeta):
		return nil
	default:
		deleted := strings.TrimPrefix(name, whiteoutPrefix)
		if deleted == "" || deleted == "." || deleted == ".." {
			return fmt.Errorf("invalid whiteout %q", name)
		}
		dir = joinPath(dir, deleted)
	}
	var err error
	if m.path, err = s.intern(dir); err != nil {
		return err
	}
	s.markers = append(s.markers, m)
	return nil
}

// addFile hashes a regular file at p and keeps its content when needed.
func (s *scanner) addFile(e entry, p string, size int64, r io.Reader) error {
	idx := len(s.entries)
	keep, err := keepContent(p, size)
	if err != nil {
		return err
	}
	if keep {
		if err := s.budget.take(p, size); err != nil {
			return err
		}
	}
	content, err := s.hashFile(r, p, size, keep || s.want[idx])
	if err != nil {
		return err
	}
	e.size = size
	s.hash.Sum(e.digest[:0])
	if s.want[idx] {
		s.got[idx] = content
	}
	if keep {
		s.content[idx] = content
		s.kept[p] = content
	}
	s.entries = append(s.entries, e)
	return nil
}

// hashFile reads size bytes of r into the hash. It returns a copy of the
// content if keep is set. Small files go through a recent-files slot.
func (s *scanner) hashFile(r io.Reader, p string, size int64, keep bool) ([]byte, error) {
	s.hash.Reset()
	if size <= smallFile {
		data, err := s.readSmall(r, p, int(size))
		if err != nil {
			return nil, err
		}
		s.hash.Write(data)
		if keep {
			return append([]byte{}, data...), nil
		}
		return nil, nil
	}
	if keep {
		data := make([]byte, size)
		if _, err := io.ReadFull(r, data); err != nil {
			return nil, fmt.Errorf("reading content: %w", err)
		}
		s.hash.Write(data)
		return data, nil
	}
	n, err := io.CopyBuffer(s.hash, r, s.buf)
	if err == nil && n != size {
		err = io.ErrUnexpectedEOF
	}
	if err != nil {
		return nil, fmt.Errorf("reading content: %w", err)
	}
	return nil, nil
}

// readSmall reads a small file into the next recent-files slot.
func (s *scanner) readSmall(r io.Reader, p string, size int) ([]byte, error) {
	slot := &s.recent[s.next]
	s.next = (s.next + 1) % recentFiles
	if slot.data == nil {
		slot.data = make([]byte, smallFile)
	}
	slot.path, slot.ok = p, false
	data := slot.data[:size]
	if _, err := io.ReadFull(r, data); err != nil {
		return nil, fmt.Errorf("reading content: %w", err)
	}
	slot.data, slot.ok = slot.data[:size], true
	return data, nil
}

// forget drops what the scan remembers of p's content: an entry at p
// replaces it.
func (s *scanner) forget(p string) {
	for i := range s.recent {
		if s.recent[i].ok && s.recent[i].path == p {
			s.recent[i].ok = false
		}
	}
	delete(s.kept, p)
}

// linkContent gives the next entry, a hardlink at p to target, the
// content of its target if p is kept and the scan has it at hand;
// otherwise it notes the link as needing it.
func (s *scanner) linkContent(p, target string) error {
	if !keptPath(p) {
		return nil
	}
	content, ok := s.kept[target]
	if !ok {
		content, ok = s.recentContent(target)
	}
	if !ok {
		s.needs = append(s.needs, len(s.entries))
		return nil
	}
	if keep, _ := keepContent(p, int64(len(content))); keep {
		if err := s.budget.take(p, int64(len(content))); err != nil {
			return err
		}
		s.content[len(s.entries)] = content
		s.kept[p] = content
	}
	return nil
}

// recentContent returns a copy of the content of p if it is a recent file.
func (s *scanner) recentContent(p string) ([]byte, bool) {
	for i := 1; i <= recentFiles; i++ {
		slot := &s.recent[(s.next-i+recentFiles)%recentFiles]
		if slot.ok && slot.path == p {
			return append([]byte{}, slot.data...), true
		}
	}
	return nil, false
}

// pendingTargets returns the indexes of the regular files, in this layer,
// whose content the needy hardlinks want. A target in a lower layer is
// left to the merge.
func (s *scanner) pendingTargets() (map[int]bool, error) {
	want := map[int]bool{}
	for _, i := range s.needs {
		j, ok := s.linkTarget(i)
		if !ok {
			continue
		}
		keep, err := keepContent(s.str(s.entries[i].path), s.entries[j].size)
		if err != nil {
			return nil, fmt.Errorf("hardlink %q to %q: %w", s.str(s.entries[i].path), s.str(s.entries[i].target), err)
		}
		if keep {
			if err := s.budget.take(s.str(s.entries[i].path), s.entries[j].size); err != nil {
				return nil, err
			}
			want[j] = true
		}
	}
	return want, nil
}

// linkTarget finds the regular file in this layer that the hardlink
// entries[i] shares an inode with: the last entry at its target path
// before it, following hardlinks to hardlinks. Each lookup is a binary
// search in the entries at a path.
func (s *scanner) linkTarget(i int) (int, bool) {
	if s.at == nil {
		s.indexTargets()
	}
	for hops := 0; hops < len(s.entries); hops++ {
		at := s.at[s.str(s.entries[i].target)]
		k, _ := slices.BinarySearch(at, i)
		if k == 0 {
			return 0, false
		}
		j := at[k-1]
		switch s.entries[j].typ {
		case File:
			return j, true
		case Hardlink:
			i = j
		default:
			return 0, false
		}
	}
	return 0, false
}

// indexTargets makes s.at for every path a hardlink of the layer
// targets: two passes over the entries, whatever the chains of hardlinks
// to hardlinks.
func (s *scanner) indexTargets() {
	s.at = map[string][]int{}
	for k := range s.entries {
		if s.entries[k].typ == Hardlink {
			s.at[s.str(s.entries[k].target)] = nil
		}
	}
	for k := range s.entries {
		p := s.str(s.entries[k].path)
		if at, ok := s.at[p]; ok {
			s.at[p] = append(at, k)
		}
	}
}

// fillLinks gives the needy hardlinks the contents a second pass kept.
func (s *scanner) fillLinks(want map[int]bool, got map[int][]byte) error {
	for _, i := range s.needs {
		j, ok := s.linkTarget(i)
		if !ok || !want[j] {
			continue
		}
		content, ok := got[j]
		if !ok || s.entries[j].digest != sha256.Sum256(content) {
			return fmt.Errorf("second pass did not find the content of %q", s.str(s.entries[j].path))
		}
		s.content[i] = content
	}
	return nil
}

// entryPath cleans a tar entry name into a path relative to the root.
// Leading slashes are dropped; ".." that would climb above the root is an
// error, as extraction refuses it, and so is a path no node can create
// (checkName).
func entryPath(name string) (string, error) {
	p, ok := cleanRel(name)
	if !ok {
		c := path.Clean(name)
		if c == ".." || strings.HasPrefix(c, "../") {
			return "", fmt.Errorf("path %s escapes the root", quoteName(name))
		}
		p = relPath(c)
	}
	return p, checkName(p)
}

// checkName refuses a path (relative to the root) that is longer than
// PATH_MAX as an absolute path, that has a component longer than
// NAME_MAX, or a NUL: no node can extract it, and a layer of such names
// would only cost memory. It is checked before the path is kept. A
// whiteout's ".wh." is not part of the name it deletes, so it does not
// count.
func checkName(p string) error {
	extra := 0
	if strings.HasPrefix(baseName(p), whiteoutPrefix) {
		extra = len(whiteoutPrefix)
	}
	switch {
	case len(p)+1 > machineconfig.MaxPath+extra:
		return limitf("path %s is %d bytes, longer than PATH_MAX (%d): no node can extract it", quoteName("/"+p), len(p)+1, machineconfig.MaxPath)
	case strings.IndexByte(p, 0) >= 0:
		return fmt.Errorf("path %s contains a NUL byte", quoteName("/"+p))
	}
	for rest := p; rest != ""; {
		c, next, _ := strings.Cut(rest, "/")
		if next == "" {
			c = c[min(extra, len(c)):]
		}
		if len(c) > machineconfig.MaxName {
			return limitf("path %s: a component is %d bytes, longer than NAME_MAX (%d): no node can extract it", quoteName("/"+p), len(c), machineconfig.MaxName)
		}
		rest = next
	}
	return nil
}

// checkTarget refuses a symlink target no node can create: longer than
// PATH_MAX, or with a NUL.
func checkTarget(target string) error {
	switch {
	case len(target) > machineconfig.MaxPath:
		return limitf("symlink target %s is %d bytes, longer than PATH_MAX (%d): no node can extract it", quoteName(target), len(target), machineconfig.MaxPath)
	case strings.IndexByte(target, 0) >= 0:
		return fmt.Errorf("symlink target %s contains a NUL byte", quoteName(target))
	}
	return nil
}

// limitError is a refusal of what a layer would make the index keep
// (see docs/limits.md), as opposed to a damaged layer.
type limitError struct{ error }

func (e limitError) Unwrap() error { return e.error }

func limitf(format string, args ...any) error {
	return limitError{fmt.Errorf(format, args...)}
}

// isLimit reports whether err is a limit's refusal: a limitError, or a
// zstd frame asking for a window over decompress.MaxZstdWindow.
func isLimit(err error) bool {
	var le limitError
	return errors.As(err, &le) || errors.Is(err, zstd.ErrWindowSizeExceeded) || errors.Is(err, zstd.ErrDecoderSizeExceeded)
}

// quoteName quotes a name for an error, shortened to its first 100
// bytes: a hostile name may be megabytes long.
func quoteName(name string) string {
	const max = 100
	if len(name) <= max {
		return strconv.Quote(name)
	}
	return strconv.Quote(name[:max]) + "..."
}

// cleanRel returns name without a leading "./" or "/" and a trailing "/"
// if that leaves a clean relative path, which is what most tar entry
// names are; false sends the caller to path.Clean.
func cleanRel(name string) (string, bool) {
	p := strings.TrimPrefix(name, "./")
	if len(p) > 0 && p[0] == '/' {
		p = p[1:]
	}
	p = strings.TrimSuffix(p, "/")
	if p == "" {
		return "", false
	}
	for start := 0; start <= len(p); {
		end := strings.IndexByte(p[start:], '/')
		if end < 0 {
			end = len(p) - start
		}
		switch p[start : start+end] {
		case "", ".", "..":
			return "", false
		}
		start += end + 1
	}
	return p, true
}
