package image

import (
	"context"
	"errors"
	"fmt"

	"go.podman.io/image/v5/copy"
	"go.podman.io/image/v5/pkg/compression"
)

// Convert copies the image src to dst (both transport references), with
// every layer recompressed to format — "gzip", "zstd" or "zstd:chunked" —
// or kept as it is for "". It makes the forms of one base that the index
// reads in different ways (docs/design.md, "Indexing a base"), for tests
// and benchmarks: an oci: copy as zstd:chunked carries a table of contents
// per layer; a containers-storage: copy unpacks the layers and keeps their
// tar-splits. The signature policy of opts applies to src. dst is written
// by containers/image directly, not atomically.
func Convert(ctx context.Context, src, dst, format string, opts Options) (err error) {
	sr, err := ParseReference(src)
	if err != nil {
		return err
	}
	dr, err := ParseReference(dst)
	if err != nil {
		return err
	}
	sys, err := opts.systemContext()
	if err != nil {
		return err
	}
	co := &copy.Options{SourceCtx: sys, DestinationCtx: sys, RemoveSignatures: true}
	if format != "" {
		algo, err := compression.AlgorithmByName(format)
		if err != nil {
			return err
		}
		dsys := *sys
		dsys.CompressionFormat = &algo
		dsys.OCIAcceptUncompressedLayers = false // else an oci: destination keeps the layers as they come
		co.DestinationCtx, co.ForceCompressionFormat = &dsys, true
	}
	pc, err := opts.policyContext()
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, pc.Destroy()) }()
	from, fromStore, err := bind(sr, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, shutdownStore(fromStore)) }()
	to, toStore, err := bind(dr, opts)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, shutdownStore(toStore)) }()
	if _, err := copyImageWAL(ctx, pc, to, from, co); err != nil {
		return fmt.Errorf("copying %s to %s: %w", src, dst, err)
	}
	return nil
}
