package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/internal/baseindex"
	"github.com/mcbake/mcbake/tool/image"
)

// indexFlags are the flags of the published base index (docs/ci.md, "The
// published base index") on the commands that index a base.
type indexFlags struct {
	repo      string
	noPublish bool
}

func (f *indexFlags) register(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.StringVar(&f.repo, "index-repo", "", "registry repository (HOST/PATH) the base's index is read from and published to"+what)
	fl.BoolVar(&f.noPublish, "no-publish-index", false, "read a published base index but do not publish one after scanning the base")
}

// shared resolves the flags: --index-repo, else the repository of dest
// when it is a docker:// reference ("" for none). quiet leaves out the
// line saying where the index came from.
func (f *indexFlags) shared(dest string, stderr io.Writer, quiet bool) (image.SharedIndex, error) {
	repo := f.repo
	if repo == "" && dest != "" {
		var err error
		if repo, err = image.IndexRepository(dest); err != nil {
			return image.SharedIndex{}, err
		}
	} else if repo != "" {
		var err error
		if repo, err = image.IndexRepository(repo); err != nil || repo == "" {
			return image.SharedIndex{}, fmt.Errorf("--index-repo %q: want a registry repository, HOST/PATH", f.repo)
		}
	}
	s := image.SharedIndex{Repo: repo, Publish: !f.noPublish, Named: f.repo != ""}
	if !quiet {
		s.Origin = func(o image.IndexOrigin) { printOrigin(stderr, o) }
		s.Published = func(t image.IndexTransfer) { printPublished(stderr, t) }
	}
	return s, nil
}

// printOrigin says where a base's index came from.
func printOrigin(w io.Writer, o image.IndexOrigin) {
	switch o.Source {
	case image.FromRegistry:
		fmt.Fprintf(w, "base index: from the registry, %s@%s (%d bytes downloaded)\n", o.Repository, o.Manifest, o.Bytes)
	case image.FromCache:
		fmt.Fprintln(w, "base index: from the local cache")
	default:
		fmt.Fprintln(w, "base index: scanned from the base's layers")
	}
}

// printPublished says what publishing a base's index did.
func printPublished(w io.Writer, t image.IndexTransfer) {
	signed := ""
	if t.Signed {
		signed = ", signed"
	}
	if t.Pushed {
		fmt.Fprintf(w, "base index: published to %s@%s (%d bytes uploaded)%s\n", t.Repository, t.Manifest, t.Bytes, signed)
	} else {
		fmt.Fprintf(w, "base index: already published at %s@%s%s\n", t.Repository, t.Manifest, signed)
	}
}

func newIndexCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "index",
		Short: "Publish a base's index to a registry, or fetch it from there",
		Example: `  mcbake index push --base docker://quay.io/org/rhcos@sha256:... --index-repo quay.io/org/mcbake-index
  mcbake index pull --base docker://quay.io/org/rhcos@sha256:... --index-repo quay.io/org/mcbake-index`,
		Long: `A base's index (what mcbake reads of a base: every path's type, mode, owner,
size and digest, and the few files rendering needs) can be published to a
registry repository as an OCI artifact that refers to the base's manifest, so
that CI runners with an empty cache read the base's manifest and config and
the index, not its layers (docs/ci.md). build, diff and verify publish and use
it on their own with --index-repo (a build: its docker:// destination by
default); these commands do it explicitly.`,
	}
	cmd.AddCommand(newIndexPushCommand(), newIndexPullCommand())
	return cmd
}

// indexCommandFlags are the flags of index push and index pull.
type indexCommandFlags struct {
	img  imageFlags
	base string
	repo string
}

func (f *indexCommandFlags) register(cmd *cobra.Command) {
	f.img.register(cmd)
	cmd.Flags().StringVar(&f.base, "base", "", "the base image")
	cmd.Flags().StringVar(&f.repo, "index-repo", "", "registry repository (HOST/PATH) of the index")
	_ = cmd.MarkFlagRequired("base")
	_ = cmd.MarkFlagRequired("index-repo")
}

// open resolves the flags and opens the base.
func (f *indexCommandFlags) open(cmd *cobra.Command) (*image.Image, image.Options, string, string, error) {
	opts, cacheDir, err := f.img.options(cmd)
	if err != nil {
		return nil, opts, "", "", err
	}
	if cacheDir == "" {
		return nil, opts, "", "", errors.New("the index commands need a usable --cache-dir")
	}
	repo, err := image.IndexRepository(f.repo)
	if err != nil || repo == "" {
		return nil, opts, "", "", fmt.Errorf("--index-repo %q: want a registry repository, HOST/PATH", f.repo)
	}
	im, err := image.Open(cmd.Context(), f.base, opts)
	return im, opts, cacheDir, repo, err
}

func newIndexPushCommand() *cobra.Command {
	var f indexCommandFlags
	cmd := &cobra.Command{
		Use:     "push --base IMAGE --index-repo HOST/PATH",
		Short:   "Index a base (or read its cached index) and publish the index",
		Example: `  mcbake index push --base docker://quay.io/org/rhcos@sha256:... --index-repo quay.io/org/mcbake-index`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			if err := f.img.opts.Sign.Check(); err != nil {
				return err
			}
			im, opts, cacheDir, repo, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, im.Close()) }()
			if _, err := image.IndexLayers(cmd.Context(), im, image.BaseOptions{Images: opts, CacheDir: cacheDir}); err != nil {
				return fmt.Errorf("indexing %s: %w", f.base, err)
			}
			t, err := image.PublishCachedIndex(cmd.Context(), repo, im, nil, cacheDir, opts)
			if errors.Is(err, baseindex.ErrNoView) {
				return fmt.Errorf("%s: the index cannot be published: %w (a containers-storage base defers digests; push it from a registry or OCI copy)", f.base, err)
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s@%s\n", t.Repository, t.Manifest)
			signed := ""
			if t.Signed {
				signed = " and signed"
			}
			if t.Pushed {
				fmt.Fprintf(cmd.ErrOrStderr(), "base index: published%s (%d bytes uploaded)\n", signed, t.Bytes)
			} else {
				fmt.Fprintf(cmd.ErrOrStderr(), "base index: already published; nothing pushed%s\n", strings.Replace(signed, " and", ", but", 1))
			}
			return nil
		},
	}
	f.img.registerSigning(cmd, "the published index")
	f.register(cmd)
	return cmd
}

func newIndexPullCommand() *cobra.Command {
	var f indexCommandFlags
	cmd := &cobra.Command{
		Use:   "pull --base IMAGE --index-repo HOST/PATH",
		Short: "Fetch a base's published index into the local cache, verified",
		Long: `Pull finds the published index of the base in the repository, verifies it
as the local cache is verified (format version, checksums, the chain of layer
digests against the base's manifest and config) and stores it in the cache.
It fails when there is none or it is refused; build, diff and verify then
scan the base instead.`,
		Example: `  mcbake index pull --base docker://quay.io/org/rhcos@sha256:... --index-repo quay.io/org/mcbake-index`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) (err error) {
			im, opts, cacheDir, repo, err := f.open(cmd)
			if err != nil {
				return err
			}
			defer func() { err = errors.Join(err, im.Close()) }()
			layers := image.IndexChain(im)
			t, err := image.PullIndex(cmd.Context(), repo, im, baseindex.ViewVersion, opts, func(view []byte) error {
				return baseindex.ImportView(cacheDir, layers, view)
			})
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s@%s\n", t.Repository, t.Manifest)
			fmt.Fprintf(cmd.ErrOrStderr(), "base index: verified and cached (%d bytes downloaded)\n", t.Bytes)
			return nil
		},
	}
	f.register(cmd)
	return cmd
}
