package main

import (
	"cmp"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/mcbake/mcbake/tool/image"
)

// imageFlags are the flags every command that reads or writes images
// takes, with skopeo's names and meanings.
type imageFlags struct {
	opts       image.Options
	cacheDir   string
	tlsVerify  bool
	retryDelay string
	stall      time.Duration
	// push is set by registerPush: the per-side flags of a command that
	// also writes an image.
	push *pushFlags
}

// pushFlags are the flags of the destination side and of signing.
type pushFlags struct {
	srcTLSVerify, destTLSVerify bool
}

func (f *imageFlags) register(cmd *cobra.Command) {
	fl := cmd.Flags()
	fl.StringVar(&f.opts.SignaturePolicy, "signature-policy", "", "signature policy file (default: $HOME/.config/containers/policy.json, then /etc/containers/policy.json)")
	fl.BoolVar(&f.opts.InsecurePolicy, "insecure-policy", false, "accept any image without a signature policy")
	fl.StringVar(&f.opts.AuthFile, "authfile", "", "registry credentials file, containers-auth.json(5) (default: $REGISTRY_AUTH_FILE, else the usual auth.json)")
	fl.StringVar(&f.opts.Creds, "creds", "", "registry credentials, USERNAME or USERNAME:PASSWORD (instead of the auth file)")
	fl.StringVar(&f.opts.CertDir, "cert-dir", "", "directory with ca.crt and client certificates (*.cert, *.key) for registries (default: certs.d, containers-certs.d(5))")
	optionalBoolVar(fl, &f.tlsVerify, "tls-verify", "require HTTPS and verify registry certificates (default: true, but for registries registries.conf marks insecure)")
	fl.StringVar(&f.opts.RegistriesConf, "registries-conf", "", "registries.conf file (default: $CONTAINERS_REGISTRIES_CONF, else the system's)")
	fl.StringVar(&f.opts.RegistriesDir, "registries.d", "", "registries.d directory: signature storage and sigstore attachments (default: the system's)")
	fl.IntVar(&f.opts.Retry.MaxRetry, "retry-times", 0, "retry a registry operation that failed with a transient error this many times")
	fl.StringVar(&f.retryDelay, "retry-delay", "", "delay between retries, e.g. 2s (default: exponential backoff from 1s)")
	fl.DurationVar(&f.stall, "stall-timeout", image.DefaultStallTimeout, "fail a read of a base layer from a registry that gets no data for this long (0: no limit)")
	platforms, usage := []string{"linux/amd64", "linux/arm64", "linux/ppc64le", "linux/s390x"}, "os/arch[/variant] to pick from a multi-platform image (default: the host's)"
	if f.push != nil {
		platforms, usage = append(platforms, "all"), usage+"; all, or a comma-separated list, builds one image per platform under an OCI index"
	}
	fl.StringVar(&f.opts.Platform, "platform", "", usage)
	fl.StringVar(&f.opts.StorageRoot, "storage-root", "", "containers-storage root (default: from storage.conf)")
	fl.StringVar(&f.opts.StorageRunRoot, "storage-runroot", "", "containers-storage run root (default: from storage.conf)")
	fl.StringVar(&f.opts.StorageDriver, "storage-driver", "", "containers-storage driver (default: from storage.conf)")
	fl.StringVar(&f.cacheDir, "cache-dir", "", "cache for base indexes and blob info (default: $XDG_CACHE_HOME/mcbake)")
	completeValues(cmd, "storage-driver", "overlay", "vfs")
	completeValues(cmd, "platform", platforms...)
	completeDirs(cmd, "cert-dir", "registries.d", "storage-root", "storage-runroot", "cache-dir")
	completeFiles(cmd, "json", "signature-policy", "authfile")
	completeFiles(cmd, "conf", "registries-conf")
}

// registerPush adds the flags of a command that reads a base and writes
// an image: each shared registry flag per side (skopeo copy's --src-* and
// --dest-*, the shared flag as the default) and signing. It comes before
// register.
func (f *imageFlags) registerPush(cmd *cobra.Command) {
	f.push = &pushFlags{}
	fl := cmd.Flags()
	for _, side := range []struct {
		prefix, what string
		r            *image.Registry
		tls          *bool
	}{
		{"src", "the base", &f.opts.Source, &f.push.srcTLSVerify},
		{"dest", "the destination", &f.opts.Destination, &f.push.destTLSVerify},
	} {
		fl.StringVar(&side.r.AuthFile, side.prefix+"-authfile", "", "credentials file for "+side.what+" (default: --authfile)")
		fl.StringVar(&side.r.Creds, side.prefix+"-creds", "", "credentials, USERNAME or USERNAME:PASSWORD, for "+side.what+" (default: --creds)")
		fl.StringVar(&side.r.CertDir, side.prefix+"-cert-dir", "", "certificate directory for "+side.what+" (default: --cert-dir)")
		optionalBoolVar(fl, side.tls, side.prefix+"-tls-verify", "require HTTPS and verify certificates for "+side.what+" (default: --tls-verify)")
		completeDirs(cmd, side.prefix+"-cert-dir")
		completeFiles(cmd, "json", side.prefix+"-authfile")
	}
	f.registerSigning(cmd, "the pushed image and the base index it publishes")
}

// registerSigning adds the signing flags, skopeo copy's, for a command
// that signs what: the image it pushes, the base index it publishes.
func (f *imageFlags) registerSigning(cmd *cobra.Command, what string) {
	fl := cmd.Flags()
	fl.StringVar(&f.opts.Sign.SigstorePrivateKey, "sign-by-sigstore-private-key", "", "sign "+what+" with this sigstore (cosign) private key file")
	fl.StringVar(&f.opts.Sign.PassphraseFile, "sign-passphrase-file", "", "file whose first line is the signing key's passphrase")
	fl.StringVar(&f.opts.Sign.By, "sign-by", "", "sign "+what+" with this GPG key (simple signing; not available in builds with the containers_image_openpgp tag)")
	completeFiles(cmd, "", "sign-by-sigstore-private-key", "sign-passphrase-file")
}

// options resolves the flags into image.Options; it also returns the
// cache directory.
func (f *imageFlags) options(cmd *cobra.Command) (image.Options, string, error) {
	o := f.opts
	fl := cmd.Flags()
	if fl.Changed("tls-verify") {
		o.TLSVerify = boolPtr(f.tlsVerify)
	}
	if f.push != nil {
		if fl.Changed("src-tls-verify") {
			o.Source.TLSVerify = boolPtr(f.push.srcTLSVerify)
		}
		if fl.Changed("dest-tls-verify") {
			o.Destination.TLSVerify = boolPtr(f.push.destTLSVerify)
		}
	}
	if o.Retry.MaxRetry < 0 {
		return o, "", fmt.Errorf("--retry-times %d: want 0 or more", o.Retry.MaxRetry)
	}
	if f.retryDelay != "" {
		d, err := time.ParseDuration(f.retryDelay)
		if err != nil || d < 0 {
			return o, "", fmt.Errorf("--retry-delay %q: want a duration such as 2s", f.retryDelay)
		}
		o.Retry.Delay = d
	}
	switch {
	case f.stall < 0:
		return o, "", fmt.Errorf("--stall-timeout %v: want 0 (no limit) or more", f.stall)
	case f.stall == 0:
		o.StallTimeout = -1 // no limit
	default:
		o.StallTimeout = f.stall
	}
	dir := f.cacheDir
	if dir == "" {
		base, err := os.UserCacheDir()
		if err != nil {
			return o, "", fmt.Errorf("finding the cache directory (set --cache-dir or XDG_CACHE_HOME): %w", err)
		}
		dir = filepath.Join(base, "mcbake")
	}
	o.CacheDir = filepath.Join(dir, "blobinfo")
	if err := os.MkdirAll(o.CacheDir, 0o755); err != nil {
		// The caches only save time: without them a build reads every
		// base layer again (containers/image keeps its blob-info cache in
		// memory then).
		slog.Warn("the cache directory cannot be used; going on without a cache", "dir", dir, "err", err)
		return o, "", nil
	}
	return o, dir, nil
}

func boolPtr(v bool) *bool { return &v }

// completeValues makes a flag complete to a fixed list of values.
func completeValues(cmd *cobra.Command, flag string, values ...string) {
	_ = cmd.RegisterFlagCompletionFunc(flag, cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp))
}

// completeImageRefs makes flags that take an image reference complete
// to a transport ("oci:", "docker://", ...), then, after a local
// transport's colon, to the paths under it (a layout directory, an
// archive).
func completeImageRefs(cmd *cobra.Command, flags ...string) {
	for _, f := range flags {
		_ = cmd.RegisterFlagCompletionFunc(f, completeImageRef)
	}
}

func completeImageRef(_ *cobra.Command, _ []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
	transport, rest, ok := strings.Cut(toComplete, ":")
	if !ok {
		var out []cobra.Completion
		for _, t := range image.Transports() {
			if !strings.HasPrefix(t, toComplete) {
				continue
			}
			if t == "docker" {
				out = append(out, "docker://")
			} else {
				out = append(out, t+":")
			}
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	switch transport {
	case "oci", "oci-archive", "docker-archive", "dir":
	default:
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	dir, prefix := filepath.Split(rest)
	entries, err := os.ReadDir(cmp.Or(dir, "."))
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []cobra.Completion
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), prefix) || (strings.HasPrefix(e.Name(), ".") && !strings.HasPrefix(prefix, ".")) {
			continue
		}
		name := transport + ":" + dir + e.Name()
		if e.IsDir() {
			name += "/"
		}
		out = append(out, name)
	}
	return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
}

// completeDirs makes flags complete to directories.
func completeDirs(cmd *cobra.Command, flags ...string) {
	for _, f := range flags {
		_ = cmd.MarkFlagDirname(f)
	}
}

// completeFiles makes flags complete to files with extension ext ("" =
// any file).
func completeFiles(cmd *cobra.Command, ext string, flags ...string) {
	for _, f := range flags {
		if ext == "" {
			_ = cmd.MarkFlagFilename(f)
		} else {
			_ = cmd.MarkFlagFilename(f, ext)
		}
	}
}

// optionalBool is a boolean flag whose help shows no default of its own
// (the usage says what applies when it is not given): pflag prints
// "(default true)" for a bool flag that defaults to true, which
// contradicted "default: registries.conf's choice".
type optionalBool struct{ v *bool }

func (b optionalBool) String() string { return strconv.FormatBool(b.v != nil && *b.v) }

func (b optionalBool) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*b.v = v
	return nil
}

func (optionalBool) Type() string     { return "bool" }
func (optionalBool) IsBoolFlag() bool { return true }

// optionalBoolVar defines an optionalBool flag: --name is true,
// --name=false false; whether it was given is fl.Changed(name).
func optionalBoolVar(fl *pflag.FlagSet, p *bool, name, usage string) {
	*p = false
	fl.VarPF(optionalBool{p}, name, "", usage).NoOptDefVal = "true"
}
