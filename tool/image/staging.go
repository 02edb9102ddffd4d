package image

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	digest "github.com/opencontainers/go-digest"
	imgspecv1 "github.com/opencontainers/image-spec/specs-go/v1"
	"go.podman.io/image/v5/manifest"
	"go.podman.io/image/v5/types"
	"go.podman.io/storage"
	"golang.org/x/sys/unix"

	"github.com/mcbake/mcbake/internal/atomicdir"
)

// staging is where Append's copy writes, and how the result reaches the
// destination. close is always called, after commit or instead of it; it
// removes whatever staging is left and releases stores.
type staging interface {
	reference() types.ImageReference
	commit(ctx context.Context) error
	close() error
}

func newStaging(r Ref, bases []*Image, opts Options) (staging, error) {
	switch r.transport {
	case transportOCI:
		return newOCIStaging(r, bases)
	case transportDir:
		return newDirStaging(r)
	case transportOCIArchive, transportDockerArchive:
		return newFileStaging(r)
	}
	return newDirectStaging(r, opts)
}

// pathState classifies an existing destination path.
type pathState int

const (
	stateAbsent pathState = iota
	stateEmptyDir
	stateFullDir
	stateFile
)

func statPath(p string) (pathState, error) {
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return stateAbsent, nil
	}
	if err != nil {
		return 0, err
	}
	if !fi.IsDir() {
		return stateFile, nil
	}
	entries, err := os.ReadDir(p)
	if err != nil {
		return 0, err
	}
	if len(entries) == 0 {
		return stateEmptyDir, nil
	}
	return stateFullDir, nil
}

// checkParent fails unless dest's parent directory exists.
func checkParent(dest string) error {
	parent := filepath.Dir(dest)
	fi, err := os.Stat(parent)
	if err != nil {
		return fmt.Errorf("parent directory must exist: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("parent %s is not a directory", parent)
	}
	return nil
}

// siblingPrefix names staging entries: hidden, and recognisably ours.
func siblingPrefix(dest string) string {
	return "." + filepath.Base(dest) + ".mcbake-"
}

// ociStaging writes an oci: destination into a sibling layout. A new
// destination is renamed into place; an existing layout gets the new blobs
// linked in and its index.json replaced by rename.
type ociStaging struct {
	sibling
	oldIndex []byte   // dest's index.json when staging began (existing layouts)
	created  []string // blob files linked into dest by an unfinished commit
	ref      types.ImageReference
}

func newOCIStaging(r Ref, bases []*Image) (_ *ociStaging, err error) {
	if _, tag, _ := strings.Cut(r.within, ":"); strings.HasPrefix(tag, "@") {
		return nil, errors.New("a destination cannot name an index entry (@N)")
	}
	s := &ociStaging{}
	if s.sibling, err = stageSibling(r, sibling.checkLayout); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.close())
		}
	}()
	for _, base := range bases {
		if err := s.seed(base); err != nil {
			return nil, err
		}
	}
	if s.ref, err = r.withPath(s.tmp); err != nil {
		return nil, err
	}
	return s, nil
}

// sibling is a destination directory, its state when staging began, and
// the temporary sibling the write is staged in.
type sibling struct {
	dest, tmp string
	state     pathState
	lock      *atomicdir.Temp // tmp, locked while this process lives
}

// stageSibling resolves r's directory, refuses it unless check accepts
// it, and creates the temporary sibling.
func stageSibling(r Ref, check func(sibling) error) (s sibling, err error) {
	if s.dest, err = r.absPath(); err != nil {
		return s, err
	}
	if s.state, err = statPath(s.dest); err != nil {
		return s, err
	}
	if err := check(s); err != nil {
		return s, err
	}
	if s.lock, err = atomicdir.MkdirTemp(filepath.Dir(s.dest), siblingPrefix(s.dest)); err != nil {
		return s, err
	}
	s.tmp = s.lock.Path
	return s, nil
}

// checkLayout accepts an absent or empty directory or an OCI layout.
func (s sibling) checkLayout() error {
	switch s.state {
	case stateFile:
		return errors.New("exists and is not a directory")
	case stateFullDir:
		if _, err := os.Stat(filepath.Join(s.dest, imgspecv1.ImageIndexFile)); err != nil {
			return fmt.Errorf("exists and is not an OCI layout: %w", err)
		}
	}
	return checkParent(s.dest)
}

// seed prepares the staging layout: the destination's current index (so the
// tag moves as containers/image would move it) and the base's blobs,
// hard-linked from the destination or the base's own layout.
func (s *ociStaging) seed(base *Image) error {
	if err := os.MkdirAll(filepath.Join(s.tmp, imgspecv1.ImageBlobsDir), 0o755); err != nil {
		return err
	}
	var from []string
	if s.state == stateFullDir {
		if s.oldIndex == nil {
			if err := s.seedIndex(); err != nil {
				return err
			}
		}
		from = append(from, s.dest)
	}
	if base.layoutDir != "" {
		from = append(from, base.layoutDir)
	}
	for _, d := range base.descs {
		if err := linkFirst(from, s.tmp, d); err != nil {
			return fmt.Errorf("linking base layer %s: %w", d.Digest, err)
		}
	}
	return nil
}

func (s *ociStaging) seedIndex() (err error) {
	if s.oldIndex, err = os.ReadFile(filepath.Join(s.dest, imgspecv1.ImageIndexFile)); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(s.tmp, imgspecv1.ImageIndexFile), s.oldIndex, 0o644)
}

// linkFirst links blob d into layout to from the first layout in from that
// has it with the right size. Finding it nowhere is fine: the copy fetches it.
func linkFirst(from []string, to string, d imgspecv1.Descriptor) error {
	dst := blobPath(to, d.Digest)
	for _, layout := range from {
		src := blobPath(layout, d.Digest)
		fi, err := os.Lstat(src)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return err
		}
		if !fi.Mode().IsRegular() || fi.Size() != d.Size {
			continue
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		_, err = placeFile(src, dst, d.Digest)
		return err
	}
	return nil
}

func blobPath(layout string, d digest.Digest) string {
	return filepath.Join(layout, imgspecv1.ImageBlobsDir, d.Algorithm().String(), d.Encoded())
}

func (s *ociStaging) reference() types.ImageReference { return s.ref }

func (s *ociStaging) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if s.state == stateFullDir {
		return s.commitMerge()
	}
	err := commitDir(s.tmp, s.dest, s.state)
	if errors.Is(err, fs.ErrExist) || errors.Is(err, unix.ENOTEMPTY) {
		// Another writer made the layout since: merge into it instead.
		s.state = stateFullDir
		return s.commitMerge()
	}
	return err
}

// commitMerge links the staged blobs into the existing layout, then replaces
// its index.json by rename. Blobs it linked are removed again if it fails
// before the index is replaced.
func (s *ociStaging) commitMerge() (err error) {
	// Concurrent mcbake writers to one layout take turns from reading the
	// index to the rename; a writer that finds the index changed since it
	// began applies its own change to the current index.
	unlock, err := lockDir(s.dest)
	if err != nil {
		return err
	}
	defer unlock()
	index := filepath.Join(s.dest, imgspecv1.ImageIndexFile)
	cur, err := os.ReadFile(index)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.removeCreated())
		}
	}()
	if err := s.moveBlobs(); err != nil {
		return err
	}
	if err := s.ensureLayoutFile(); err != nil {
		return err
	}
	staged, err := os.ReadFile(filepath.Join(s.tmp, imgspecv1.ImageIndexFile))
	if err != nil {
		return err
	}
	if !bytes.Equal(cur, s.oldIndex) {
		if staged, err = mergeIndex(cur, s.oldIndex, staged); err != nil {
			return fmt.Errorf("%s changed while the image was being written: %w", index, err)
		}
	}
	if err := writeFileAtomic(index, staged, 0o644); err != nil {
		return err
	}
	s.created = nil // the index now refers to them
	return syncDir(s.dest)
}

// moveBlobs links every staged blob into the destination layout; blobs it
// already has (same name, so same content) are left untouched.
func (s *ociStaging) moveBlobs() error {
	root := filepath.Join(s.tmp, imgspecv1.ImageBlobsDir)
	algs, err := os.ReadDir(root)
	if err != nil {
		return err
	}
	for _, alg := range algs {
		if err := s.moveAlgorithm(alg.Name()); err != nil {
			return err
		}
	}
	return nil
}

func (s *ociStaging) moveAlgorithm(alg string) error {
	from := filepath.Join(s.tmp, imgspecv1.ImageBlobsDir, alg)
	to := filepath.Join(s.dest, imgspecv1.ImageBlobsDir, alg)
	if err := os.MkdirAll(to, 0o755); err != nil {
		return err
	}
	files, err := os.ReadDir(from)
	if err != nil {
		return err
	}
	for _, f := range files {
		created, err := placeFile(filepath.Join(from, f.Name()), filepath.Join(to, f.Name()), "")
		if err != nil {
			return err
		}
		if created {
			s.created = append(s.created, filepath.Join(to, f.Name()))
		}
	}
	return syncDir(to)
}

func (s *ociStaging) ensureLayoutFile() error {
	dst := filepath.Join(s.dest, imgspecv1.ImageLayoutFile)
	if _, err := os.Stat(dst); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	_, err := placeFile(filepath.Join(s.tmp, imgspecv1.ImageLayoutFile), dst, "")
	return err
}

func (s *ociStaging) removeCreated() error {
	var errs []error
	for _, p := range s.created {
		errs = append(errs, os.Remove(p))
	}
	s.created = nil
	return errors.Join(errs...)
}

func (s *ociStaging) close() error {
	defer s.lock.Release()
	return removeStaging(s.tmp)
}

// dirStaging writes a dir: destination into a sibling directory and swaps it
// into place.
type dirStaging struct {
	sibling
	ref types.ImageReference
}

// dirVersionPrefix starts the version file of a dir: image.
const dirVersionPrefix = "Directory Transport Version:"

func newDirStaging(r Ref) (_ *dirStaging, err error) {
	s := &dirStaging{}
	if s.sibling, err = stageSibling(r, sibling.checkDirImage); err != nil {
		return nil, err
	}
	if s.ref, err = r.withPath(s.tmp); err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

// checkDirImage accepts an absent or empty directory or a dir: image.
func (s sibling) checkDirImage() error {
	switch s.state {
	case stateFile:
		return errors.New("exists and is not a directory")
	case stateFullDir:
		v, err := os.ReadFile(filepath.Join(s.dest, "version"))
		if err != nil || !strings.HasPrefix(string(v), dirVersionPrefix) {
			return errors.New("exists and is not a dir: image; refusing to replace it")
		}
	}
	return checkParent(s.dest)
}

func (s *dirStaging) reference() types.ImageReference { return s.ref }

func (s *dirStaging) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	return commitDir(s.tmp, s.dest, s.state)
}

func (s *dirStaging) close() error {
	defer s.lock.Release()
	return removeStaging(s.tmp)
}

// commitDir makes the finished staging directory tmp the destination. An
// existing non-empty destination is exchanged atomically and its old content
// ends up in tmp, for close to remove.
func commitDir(tmp, dest string, state pathState) error {
	if err := syncTree(tmp); err != nil {
		return err
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	switch state {
	case stateFullDir:
		if err := atomicdir.Exchange(tmp, dest); err != nil {
			return err
		}
	case stateEmptyDir:
		if err := os.Remove(dest); err != nil {
			return err
		}
		fallthrough
	default:
		if err := os.Rename(tmp, dest); err != nil {
			return err
		}
	}
	return syncDir(filepath.Dir(dest))
}

// fileStaging writes an archive destination to a sibling file and renames it
// over the destination.
type fileStaging struct {
	dest, tmp string
	lock      *atomicdir.Temp
	ref       types.ImageReference
}

func newFileStaging(r Ref) (_ *fileStaging, err error) {
	s := &fileStaging{}
	if s.dest, err = r.absPath(); err != nil {
		return nil, err
	}
	state, err := statPath(s.dest)
	if err != nil {
		return nil, err
	}
	if state == stateEmptyDir || state == stateFullDir {
		return nil, errors.New("is a directory")
	}
	if err := checkParent(s.dest); err != nil {
		return nil, err
	}
	if s.lock, err = atomicdir.CreateTemp(filepath.Dir(s.dest), siblingPrefix(s.dest)); err != nil {
		return nil, err
	}
	s.tmp = s.lock.Path
	if s.ref, err = r.withPath(s.tmp); err != nil {
		return nil, errors.Join(err, s.close())
	}
	return s, nil
}

func (s *fileStaging) reference() types.ImageReference { return s.ref }

func (s *fileStaging) commit(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := syncPath(s.tmp); err != nil {
		return err
	}
	if err := os.Chmod(s.tmp, 0o644); err != nil {
		return err
	}
	if err := os.Rename(s.tmp, s.dest); err != nil {
		return err
	}
	return syncDir(filepath.Dir(s.dest))
}

func (s *fileStaging) close() error {
	defer s.lock.Release()
	return removeStaging(s.tmp)
}

// directStaging writes straight to containers-storage: or docker://, which
// commit inside the copy.
type directStaging struct {
	ref   types.ImageReference
	store storage.Store
}

func newDirectStaging(r Ref, opts Options) (*directStaging, error) {
	ref, store, err := bind(r, opts)
	if err != nil {
		return nil, err
	}
	return &directStaging{ref: ref, store: store}, nil
}

func (s *directStaging) reference() types.ImageReference { return s.ref }

// present reports whether the destination, a containers-storage store,
// holds src already: the image its name resolves to has src's manifest
// (docs/design.md, The warm path). A build with the same inputs makes
// the same image, digest for digest, and copy.Image would only rewrite
// the store's records of it: its commit, with the blob-info cache's
// transactions, took 8 to 9 ms of a 35 ms warm build. This is
// copy.Image's own OptimizeDestinationImageAlreadyExists check, made
// before the copy starts. A signed build always copies, as copy.Image's
// check does when there are signatures to write.
func (s *directStaging) present(ctx context.Context, src *appendSource, opts Options) bool {
	if s.store == nil || opts.Sign != (Signing{}) {
		return false
	}
	sys, err := opts.destinationContext()
	if err != nil {
		return false
	}
	is, err := s.ref.NewImageSource(ctx, sys)
	if err != nil {
		return false // no image of that name, most often
	}
	defer is.Close()
	m, _, err := is.GetManifest(ctx, nil)
	if err != nil {
		return false
	}
	d, err := manifest.Digest(m)
	return err == nil && d == src.manifestDigest
}

func (s *directStaging) commit(context.Context) error { return nil }

func (s *directStaging) close() error { return shutdownStore(s.store) }

// removeStaging removes a staging file or directory; "" and a path already
// gone (renamed into place) are fine.
func removeStaging(p string) error {
	if p == "" {
		return nil
	}
	if err := os.RemoveAll(p); err != nil {
		return fmt.Errorf("removing staging %s: %w", p, err)
	}
	return nil
}

// lockDir takes an exclusive flock(2) on the directory itself (no lock
// file is added to the layout) and returns its release.
func lockDir(dir string) (func(), error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, &os.PathError{Op: "open", Path: dir, Err: err}
	}
	if err := unix.Flock(fd, unix.LOCK_EX); err != nil {
		unix.Close(fd)
		return nil, &os.PathError{Op: "flock", Path: dir, Err: err}
	}
	return func() {
		_ = unix.Flock(fd, unix.LOCK_UN)
		_ = unix.Close(fd)
	}, nil
}

// mergeIndex applies what the copy changed in an index (from old, what
// the layout had when the write began — nil for a layout that did not
// exist — to staged) to cur, what the layout has now: the manifests the
// copy removed (the one its tag named) are removed, those it added are
// added, replacing any other manifest with the same tag.
func mergeIndex(cur, old, staged []byte) ([]byte, error) {
	var c, o, s imgspecv1.Index
	for _, x := range []struct {
		b []byte
		v *imgspecv1.Index
	}{{cur, &c}, {staged, &s}, {old, &o}} {
		if len(x.b) == 0 {
			continue
		}
		if err := json.Unmarshal(x.b, x.v); err != nil {
			return nil, fmt.Errorf("decoding index: %w", err)
		}
	}
	key := func(d imgspecv1.Descriptor) string {
		return d.Digest.String() + "\x00" + d.Annotations[imgspecv1.AnnotationRefName]
	}
	in := func(ds []imgspecv1.Descriptor, d imgspecv1.Descriptor) bool {
		return slices.ContainsFunc(ds, func(x imgspecv1.Descriptor) bool { return key(x) == key(d) })
	}
	var added, removed []imgspecv1.Descriptor
	for _, d := range s.Manifests {
		if !in(o.Manifests, d) {
			added = append(added, d)
		}
	}
	for _, d := range o.Manifests {
		if !in(s.Manifests, d) {
			removed = append(removed, d)
		}
	}
	tags := map[string]bool{}
	for _, d := range added {
		if t := d.Annotations[imgspecv1.AnnotationRefName]; t != "" {
			tags[t] = true
		}
	}
	var out []imgspecv1.Descriptor
	for _, d := range c.Manifests {
		if !in(removed, d) && !in(added, d) && !tags[d.Annotations[imgspecv1.AnnotationRefName]] {
			out = append(out, d)
		}
	}
	c.Manifests = append(out, added...)
	if c.SchemaVersion == 0 {
		c.SchemaVersion = 2
	}
	return json.Marshal(c)
}
