// Package image is mcbake's only door to container images.
//
// It opens a base image from any supported transport, and writes that
// base plus one new layer to a destination. It is the single package that
// imports containers/image, containers/storage and containers/common
// (go.podman.io/image/v5, go.podman.io/storage and go.podman.io/common,
// the successors to the frozen github.com/containers modules; README.md,
// "Libraries, and why").
//
// References always name their transport (oci:DIR[:TAG], oci-archive:FILE[:TAG],
// docker-archive:FILE[:NAME:TAG], dir:DIR, containers-storage:NAME,
// docker://REF); a bare "quay.io/x:1" is refused rather than guessed.
//
// Programs that write to containers-storage must call InitReexec first thing
// in main (and TestMain).
//
// Contracts:
//
//   - Open returns an *Image resolved to one platform. The caller owns it and
//     must Close it; Close releases the image source and, for
//     containers-storage, shuts the store down. Every method of an Image is
//     unusable after Close. The signature policy is evaluated in Open, on the
//     image exactly as the transport serves it. A failed Open returns a nil
//     *Image and an error that names the reference once ("opening REF:
//     cause": authentication required, manifest unknown, x509: ...), never a
//     panic; it holds nothing open.
//   - Registry settings (Options.Registry, with Source and Destination
//     overriding it field by field) have skopeo's names and meanings, and
//     go through containers/common and containers/image: the auth file
//     defaults to $REGISTRY_AUTH_FILE, registries.conf to
//     $CONTAINERS_REGISTRIES_CONF. Open, Platforms, Append and
//     AppendPlatforms retry transient failures (Options.Retry) with
//     containers/common's retry package; authentication, missing images and
//     certificate errors are not retried.
//   - Opening a docker:// image records where its layers live, and how they
//     are compressed, in the blob-info cache, so that a later Append into
//     another repository of the same registry mounts them instead of
//     uploading them, even when the cache was empty (docs/design.md,
//     Registries). Blobs the destination already has are never sent again.
//   - Image.OpenLayer returns a stream the caller must Close. The stream
//     checks the blob's digest: a mismatch is reported as a read error at the
//     end of the stream, never as a clean io.EOF.
//   - Append signs what it writes when Options.Sign says so (sigstore keys;
//     GPG only in builds without containers_image_openpgp), and reports every
//     blob written or skipped to AppendOptions.Progress.
//   - AppendPlatforms writes one appended image per base (one per platform)
//     and an image list (an OCI image index) over them, with Append's
//     guarantees for each image and for the destination; the same entries
//     give the same list digest.
//   - Append never closes the base image, and never modifies, moves or
//     removes the caller's layer file (it is copied, not linked).
//   - Append builds the new manifest and config itself; the same base, layer
//     and AppendOptions give the same manifest digest on every machine and
//     for every oci:, oci-archive:, dir: and containers-storage: destination.
//     Base layers are never recompressed or re-tarred (docker-archive: is the
//     exception: that format has no compressed OCI layers, so copying to it
//     decompresses and its digest is of the converted Docker manifest).
//   - Destinations oci:, dir:, oci-archive: and docker-archive: are atomic:
//     the image is written into a temporary sibling of the destination (the
//     destination's parent directory must exist) and renamed into place only
//     after the copy succeeded and the context is still live. When the
//     destination is an existing OCI layout, new blobs are linked into it and
//     index.json is replaced by rename as the very last step, so a reader sees
//     either the old or the new index; existing blob files are never
//     rewritten. On error or cancellation nothing is left at the destination
//     and temporary files are removed. containers-storage: and docker://
//     commit inside the copy itself, with those transports' own guarantees.
//   - Base blobs that already sit in an OCI layout on the same filesystem are
//     hard-linked, not copied, and are trusted by name (content addressing) as
//     containers/image does; they are digest-checked whenever they are read.
package image
