package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/mcbake/mcbake/machineconfig"

	"github.com/spf13/cobra"

	"github.com/mcbake/mcbake/internal/cli"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/build/buildah"
	"github.com/mcbake/mcbake/tool/guard"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/progress"
)

// buildFlags are the flags of mcbake build.
type buildFlags struct {
	files                      []string
	img                        imageFlags
	index                      indexFlags
	base, output, compression  string
	timestamp, digestFile      string
	quiet, renderOnly, noGuard bool
	guardBinary, engine        string
	containerfileAppend        string
	labels, annotations        []string
}

func newBuildCommand() *cobra.Command {
	f := &buildFlags{}
	cmd := &cobra.Command{
		Use:   "build --base IMAGE [-f MC...] -o IMAGE",
		Short: "Bake MachineConfigs into a layered OS image, offline",
		Long: `Build renders the MachineConfigs against the base image (owners resolve
against its passwd/group, presets and unit files come from it, paths resolve
through its symlinks) and appends one reproducible layer with the rendered
files, the ownership manifest (/usr/share/mcbake/manifest.json) and the revert
guard: a unit and a static binary under /usr that, at shutdown, keep the
MachineConfig files of a node that leaves this image for its base
(docs/node.md; --no-revert-guard leaves it out). Without -f, the layer holds
only the guard: for an image built by others. The base's layers are reused as
they are. IMAGE is a containers-transport reference:
oci:DIR[:TAG], oci-archive:FILE[:TAG], docker-archive:FILE, dir:DIR,
containers-storage:NAME or docker://REF.`,
		Example: `  # offline, between OCI layouts
  mcbake build --base oci:rhcos:4.18 -f worker.yaml -o oci:layered:latest --digestfile layered.digest

  # in CI: from a registry into another repository of it, pushing only the new layer
  mcbake build --base docker://quay.io/org/rhcos@sha256:... -f machineconfigs/ \
    -o docker://quay.io/org/worker:4.18 --authfile auth.json --retry-times 3

  # separate credentials for the base and the destination, and a sigstore signature
  mcbake build --base docker://registry.example.com/os/rhcos:4.18 -f worker.yaml \
    -o docker://quay.io/org/worker:4.18 --src-creds reader:$READ_TOKEN --dest-authfile push.json \
    --sign-by-sigstore-private-key cosign.key --sign-passphrase-file cosign.pass

  # add only the revert guard to an image built by others (ignition-apply, OCL)
  mcbake build --base docker://quay.io/org/worker-ocl@sha256:... -o docker://quay.io/org/worker-ocl:guarded

  # every platform of a multi-platform base, under one index
  mcbake build --base docker://quay.io/org/rhcos:4.18 -f worker.yaml -o docker://quay.io/org/worker:4.18 --platform all`,
		Args: cobra.NoArgs,
		RunE: f.run,
	}
	f.register(cmd)
	return cmd
}

func (f *buildFlags) register(cmd *cobra.Command) {
	f.img.registerPush(cmd)
	f.img.register(cmd)
	f.index.register(cmd, " (default: the repository of a docker:// -o)")
	addMachineConfigFlag(cmd, &f.files)
	fl := cmd.Flags()
	fl.StringVar(&f.base, "base", "", "base image reference")
	fl.StringVarP(&f.output, "output", "o", "", "destination image reference")
	fl.StringVar(&f.compression, "compression", build.Gzip, "new layer compression: gzip or zstd")
	fl.StringVar(&f.timestamp, "timestamp", "", "layer mtime and image creation time, Unix seconds (default: $SOURCE_DATE_EPOCH, else the base image's creation time)")
	fl.StringVar(&f.digestFile, "digestfile", "", "write the resulting image digest to this file")
	fl.BoolVarP(&f.quiet, "quiet", "q", false, "no progress output")
	fl.StringVar(&f.engine, "engine", engineAppend, "append (native, default) or buildah (buildah's library, from templates/Containerfile.tmpl)")
	fl.BoolVar(&f.renderOnly, "render-only", false, "write the Containerfile and its context to -o DIR for an external builder, build nothing")
	fl.StringArrayVar(&f.labels, "label", nil, "KEY=VALUE label for the image config; repeatable")
	fl.StringArrayVar(&f.annotations, "annotation", nil, "KEY=VALUE annotation for the image manifest; repeatable")
	fl.BoolVar(&f.noGuard, "no-revert-guard", false, "leave the revert guard out of the image (verify reports it, MCB025)")
	fl.StringVar(&f.guardBinary, "guard-binary", "", "the revert guard's static node binary (default: the one built into mcbake)")
	fl.StringVar(&f.containerfileAppend, "containerfile-append", "", "extra Containerfile instructions (buildah engine and --render-only), e.g. RPM installs")
	_ = cmd.MarkFlagRequired("base")
	completeImageRefs(cmd, "base", "output")
	_ = cmd.MarkFlagRequired("output")
	completeValues(cmd, "compression", build.Gzip, build.Zstd)
	completeValues(cmd, "engine", engineAppend, engineBuildah)
}

// run checks the flags, all before the base is opened, and runs the
// operation they name: a render-only build or an image build.
func (f *buildFlags) run(cmd *cobra.Command, _ []string) error {
	in, platforms, err := f.inputs(cmd)
	if err != nil {
		return err
	}
	eng, err := engineNamed(f.engine, f.containerfileAppend)
	if err != nil {
		return err
	}
	if err := f.checkCombination(in.Images, platforms); err != nil {
		return err
	}
	rep := progress.New(cmd.ErrOrStderr(), f.quiet)
	in.Progress = func(layer string, total, n int64) { rep.Update("read "+short(layer), total, n) }
	if f.renderOnly {
		return f.renderContext(cmd, build.RenderOptions{Options: in, Dir: f.output, ContainerfileAppend: f.containerfileAppend}, rep)
	}
	return f.buildImage(cmd, build.ImageOptions{Options: in, Output: f.output, Compression: f.compression, Engine: eng, Platforms: platforms}, rep)
}

// inputs are the build's inputs the flags give, and the platforms of a
// multi-platform build (--platform all or a list).
func (f *buildFlags) inputs(cmd *cobra.Command) (in build.Options, platforms []string, err error) {
	in.Base = f.base
	if in.Images, in.CacheDir, err = f.img.options(cmd); err != nil {
		return in, nil, err
	}
	if p := in.Images.Platform; p == build.AllPlatforms || strings.Contains(p, ",") {
		platforms, in.Images.Platform = strings.Split(p, ","), ""
	}
	if in.Timestamp, err = buildTime(f.timestamp); err != nil {
		return in, nil, err
	}
	if in.GuardFor, err = guardBinaryFor(f.noGuard, f.guardBinary, len(f.files)); err != nil {
		return in, nil, err
	}
	if len(f.files) > 0 {
		cacheDir := in.CacheDir
		in.LoadMachineConfigs = func() ([]*machineconfig.MachineConfig, error) {
			return cli.LoadMachineConfigs(cmd, f.files, cacheDir)
		}
	}
	if in.Labels, err = keyValues("--label", f.labels); err != nil {
		return in, nil, err
	}
	if in.Annotations, err = keyValues("--annotation", f.annotations); err != nil {
		return in, nil, err
	}
	// A render-only build's -o is a directory, not a repository to
	// publish the base's index to.
	dest := f.output
	if f.renderOnly {
		dest = ""
	}
	in.SharedIndex, err = f.index.shared(dest, cmd.ErrOrStderr(), f.quiet)
	return in, platforms, err
}

// checkCombination refuses the flags that the operation they name
// (--render-only, --engine) cannot apply.
func (f *buildFlags) checkCombination(images image.Options, platforms []string) error {
	isAppend := f.engine == "" || f.engine == engineAppend
	push := images.Sign != (image.Signing{}) || images.Destination != (image.Registry{})
	switch {
	case len(platforms) > 0 && (f.renderOnly || !isAppend):
		return errors.New("--platform all or a list builds an index: only with --engine append, without --render-only")
	case f.renderOnly && push && f.index.repo == "":
		// With --index-repo they are the index repository's settings.
		return errors.New("--sign-* and --dest-* need an image build or --index-repo: --render-only writes a directory and pushes nothing else")
	case f.renderOnly:
		return nil
	case !isAppend && push:
		return errors.New("--sign-* and --dest-* need --engine append (buildah writes with the shared and --src-* settings)")
	case isAppend && f.containerfileAppend != "":
		return errors.New("--containerfile-append needs --engine buildah or --render-only")
	}
	return nil
}

// renderContext is --render-only: it writes the build context to -o DIR.
func (f *buildFlags) renderContext(cmd *cobra.Command, opts build.RenderOptions, rep *progress.Reporter) error {
	p, err := build.RenderOnly(cmd.Context(), opts)
	rep.Wait()
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "%s: Containerfile and build context written\n", opts.Dir)
	return printSummary(cmd.ErrOrStderr(), opts.Dir, p.Manifest)
}

// buildImage builds the image, writes its digest (stdout, --digestfile)
// and, unless --quiet, what it sent and what it holds.
func (f *buildFlags) buildImage(cmd *cobra.Command, opts build.ImageOptions, rep *progress.Reporter) error {
	var pushed image.Transfer
	opts.PushProgress = func(p image.BlobProgress) {
		pushed.Add(p)
		if !p.Skipped {
			rep.Update("write "+short(p.Digest.String()), p.Size, p.Written)
		}
	}
	digestOut, err := openOutput("--digestfile", f.digestFile, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	defer digestOut.discard()
	res, err := build.Image(cmd.Context(), opts)
	rep.Wait()
	if err != nil {
		return err
	}
	if err := digestOut.commit([]byte(res.Digest.String())); err != nil {
		return err
	}
	fmt.Fprintln(cmd.OutOrStdout(), res.Digest)
	if f.quiet {
		return nil
	}
	return printBuilt(cmd.ErrOrStderr(), opts.Output, &pushed, res)
}

// printBuilt prints what the build sent and the summary of each image.
func printBuilt(w io.Writer, dest string, pushed *image.Transfer, res *build.Result) error {
	printTransfer(w, dest, pushed)
	for _, p := range res.Platforms {
		if err := printSummary(w, dest+" "+p.Platform, p.Manifest); err != nil {
			return err
		}
	}
	if len(res.Platforms) > 0 {
		return nil
	}
	return printSummary(w, dest, res.Manifest)
}

// guardBinaryFor is the revert guard's binary a build bakes, for an image
// of a given GOARCH: none with --no-revert-guard (nil), --guard-binary's
// for every architecture (the build refuses it for an image of another),
// else the one built into mcbake for that architecture.
func guardBinaryFor(noGuard bool, file string, mcFiles int) (func(arch string) ([]byte, error), error) {
	switch {
	case noGuard && file != "":
		return nil, errors.New("--guard-binary and --no-revert-guard: choose one")
	case noGuard && mcFiles == 0:
		return nil, errors.New("nothing to build: no MachineConfig (-f) and --no-revert-guard")
	case noGuard:
		return nil, nil
	case file != "":
		b, err := guard.ReadBinary(file)
		if err != nil {
			return nil, err
		}
		return func(string) ([]byte, error) { return b, nil }, nil
	}
	return guard.Binary, nil
}

// Engines --engine names.
const (
	engineAppend  = "append"
	engineBuildah = "buildah"
)

// engineNamed is the build.Engine --engine names (nil: append), with
// the --containerfile-append file for an engine that builds a
// Containerfile.
func engineNamed(name, containerfileAppend string) (build.Engine, error) {
	switch name {
	case "", engineAppend:
		return nil, nil
	case engineBuildah:
		return buildah.Engine{ContainerfileAppend: containerfileAppend}, nil
	}
	return nil, fmt.Errorf("--engine %q: want append or buildah", name)
}

// buildTime picks --timestamp, else SOURCE_DATE_EPOCH, else zero: the
// base's creation time (build.Prepared.Time).
func buildTime(flag string) (time.Time, error) {
	v, from := flag, "--timestamp"
	if v == "" {
		v, from = os.Getenv("SOURCE_DATE_EPOCH"), "SOURCE_DATE_EPOCH"
	}
	if v == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("%s %q: want Unix seconds", from, v)
	}
	return time.Unix(n, 0).UTC(), nil
}

// keyValues parses repeated KEY=VALUE flag values.
func keyValues(flag string, values []string) (map[string]string, error) {
	if len(values) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, v := range values {
		k, val, ok := strings.Cut(v, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("%s %q: want KEY=VALUE", flag, v)
		}
		out[k] = val
	}
	return out, nil
}

// printTransfer says what the write sent: the bytes of new blobs, and how
// many blobs the destination had already (present, mounted or linked).
func printTransfer(w io.Writer, dest string, t *image.Transfer) {
	uploaded, written, skipped := t.Totals()
	fmt.Fprintf(w, "%s: uploaded %d bytes (%s) in %d blob(s); %d blob(s) already there or mounted\n",
		dest, uploaded, progress.Bytes(uploaded), written, skipped)
}

func short(digest string) string {
	if len(digest) > 19 {
		return digest[:19]
	}
	return digest
}
