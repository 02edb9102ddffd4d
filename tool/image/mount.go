package image

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"

	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	digest "github.com/opencontainers/go-digest"
	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/docker/reference"
	"go.podman.io/image/v5/types"
	"golang.org/x/sync/errgroup"
)

// errNotMounted is crossMount's error when the registry answers a mount
// request with anything but 201 Created: it will not mount (a registry
// without cross-repository mounts starts an upload instead, answering
// 202), so asking again for the other layers is pointless.
var errNotMounted = errors.New("the registry did not mount the blob")

// crossMount mounts each of layers, which live in from's repository, into
// to's repository of the same registry with one request each, the
// distribution spec's cross-repository mount (POST
// /v2/<to>/blobs/uploads/?mount=<digest>&from=<from>, 201 Created when
// mounted), maxParallelMounts at a time (docs/design.md, "Registries").
// containers/image asks three questions a layer for the same result:
// whether to has it, whether from has it, then the mount. The first
// refusal or error stops the others; what is not mounted, the copy
// uploads or mounts itself.
//
// It returns errNoMountClient, before any mount is asked for, when it
// cannot reach the registry as containers/image would (mountLayers then
// lets containers/image mount).
//
// It sets ok[i] for each layers[i] mounted.
func crossMount(ctx context.Context, sys *types.SystemContext, from, to reference.Named, layers []LayerInfo, ok []bool) error {
	client, err := registryHTTP(ctx, sys, to, []string{repoScope(to, transport.PushScope), repoScope(from, transport.PullScope)})
	if err != nil {
		return fmt.Errorf("%w: %w", errNoMountClient, err)
	}
	g, ctx := errgroup.WithContext(ctx)
	g.SetLimit(maxParallelMounts)
	for i, l := range layers {
		g.Go(func() error {
			err := mountOne(ctx, client, reference.Path(from), reference.Path(to), l.Digest.String())
			ok[i] = err == nil
			return err
		})
	}
	return g.Wait()
}

// errNoMountClient: crossMount could not set up its client.
var errNoMountClient = errors.New("no client for cross-repository mounts")

// mountOne asks the registry to mount the blob dgst of repository from
// into to.
func mountOne(ctx context.Context, client registryClient, from, to, dgst string) error {
	u := client.url("/v2/"+to+"/blobs/uploads/", url.Values{"mount": {dgst}, "from": {from}})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u, nil)
	if err != nil {
		return err
	}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close() // not read: a body that never ends must not hold the build
	switch resp.StatusCode {
	case http.StatusCreated:
		return nil
	case http.StatusAccepted:
		// An upload was started instead: end it.
		if loc, err := resp.Location(); err == nil {
			deleteUpload(ctx, client, loc)
		}
	}
	return fmt.Errorf("%w: mounting %s from %s into %s: %s", errNotMounted, dgst, from, to, resp.Status)
}

// readyToCopy is the destination for a copy to dest of an image built on
// bases: it waits for each base's mounts, makes the records a copy needs
// to mount what they left (recordUnmounted) and waits for them, waits for
// the uploads ahead, and answers for the layers mounted and uploaded
// (withPresent).
func readyToCopy(ctx context.Context, dest types.ImageReference, co *copy.Options, ahead []*Upload, bases ...*Image) types.ImageReference {
	for _, b := range bases {
		b.mountsDone(ctx)
		b.recordUnmounted(ctx, dest)
		b.locationsRecorded()
	}
	for _, u := range ahead {
		u.wait(ctx)
	}
	return withPresent(dest, co, ahead, bases...)
}

// withPresent is dest with the layers of bases that MountInto made
// present in dest's repository, and those uploaded ahead there
// (UploadAhead), answered as present, without asking the
// registry again: copy.Image asks for each layer of the image it writes
// (a HEAD, and a commit to the blob-info cache when the registry has it,
// which containers/image's SQLite cache makes one after another: 60 ms for
// 48 layers, half of a cold build's copy). Call it once the mounts are
// done (mountsDone): mounts and uploads still under way count for nothing. The
// registry still checks, when it takes the manifest, that every blob the
// manifest names is there, and copyImage's retries ask about every blob
// again.
//
// It is dest itself when there is nothing to answer, or when the copy
// signs: containers/image writes sigstore signatures only through its
// own destinations, which a wrapper of the public interface hides.
func withPresent(dest types.ImageReference, co *copy.Options, ahead []*Upload, bases ...*Image) types.ImageReference {
	if signs(co) || dest.DockerReference() == nil {
		return dest
	}
	present := map[digest.Digest]int64{}
	for _, b := range bases {
		m := b.mounted
		if m == nil || m.repo != dest.DockerReference().Name() {
			continue
		}
		select {
		case <-m.done:
			maps.Copy(present, m.present)
		default: // still mounting: mountsDone was not called
		}
	}
	for _, u := range ahead {
		if u.repo != dest.DockerReference().Name() {
			continue
		}
		select {
		case <-u.done:
			if u.ok {
				present[u.digest] = u.size
			}
		default:
		}
	}
	if len(present) == 0 {
		return dest
	}
	return presentRef{dest, present}
}

// signs reports whether a copy with co signs what it writes.
func signs(co *copy.Options) bool {
	return co.SignBy != "" || co.SignBySigstorePrivateKeyFile != "" || len(co.Signers) > 0
}

// presentRef is a docker:// reference whose destination answers
// TryReusingBlob for the blobs of present (withPresent).
type presentRef struct {
	types.ImageReference
	present map[digest.Digest]int64
}

func (r presentRef) NewImageDestination(ctx context.Context, sys *types.SystemContext) (types.ImageDestination, error) {
	d, err := r.ImageReference.NewImageDestination(ctx, sys)
	if err != nil {
		return nil, err
	}
	return presentDest{d, r.present}, nil
}

// presentDest is presentRef's destination.
type presentDest struct {
	types.ImageDestination
	present map[digest.Digest]int64
}

func (d presentDest) TryReusingBlob(ctx context.Context, info types.BlobInfo, cache types.BlobInfoCache, canSubstitute bool) (bool, types.BlobInfo, error) {
	if size, ok := d.present[info.Digest]; ok {
		return true, types.BlobInfo{Digest: info.Digest, Size: size}, nil
	}
	return d.ImageDestination.TryReusingBlob(ctx, info, cache, canSubstitute)
}
