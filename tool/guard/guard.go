// Package guard is the revert guard that mcbake build bakes into images.
//
// It is a static node binary and the unit that runs it at shutdown: the
// unit's ExecStop runs `mcbake-node guard` before ostree finalizes a
// staged deployment; see docs/node.md, "The revert guard". Its paths are
// mcbake's own: the ownership manifest records them apart from every
// MachineConfig's (manifest.Manifest.Own).
package guard

import (
	"bytes"
	"context"
	"debug/elf"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/atomicdir"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
)

// Where the guard lives in an image.
const (
	BinaryPath = "/usr/libexec/mcbake/mcbake-node"
	UnitName   = "mcbake-revert-guard.service"
	UnitPath   = "/usr/lib/systemd/system/" + UnitName
	// WantsPath enables the unit from /usr.
	WantsPath = "/usr/lib/systemd/system/multi-user.target.wants/" + UnitName
	// ToolImageDir is where mcbake's own container image carries the
	// guard's files as a tree, for `COPY --from=MCBAKE_IMAGE
	// /usr/share/mcbake/guard/ /` in a Containerfile.
	ToolImageDir = "/usr/share/mcbake/guard"
)

// LayerHistory is the history entry (created_by) of the layer mcbake
// build puts the guard's files in, under the MachineConfig layer.
const LayerHistory = "mcbake build: revert guard"

// Label is the image config label a build with the guard sets: the
// digest of the guard's binary.
const Label = "io.mcbake.revert-guard"

// Source is the provenance the manifest records for the guard's paths.
var Source = manifest.Source{MachineConfig: "", Field: "mcbake revert guard"}

// Unit is the unit file.
//
//go:embed mcbake-revert-guard.service
var Unit []byte

//go:embed bin
var bin embed.FS

// ErrNoBinary is Binary's error when this mcbake carries no node binary
// for the architecture asked for.
var ErrNoBinary = errors.New("this mcbake was built without the revert guard's node binary for it")

// BinaryName is the name, under bin/, of the embedded node binary for
// GOARCH arch (make guard-bin puts them there).
func BinaryName(arch string) string { return "mcbake-node-linux-" + arch }

// Binary returns the static node binary for GOARCH arch embedded at
// build time (make guard-bin GUARD_ARCHES="amd64 arm64 ..."): the image
// the guard goes into runs it, so it must be the image's architecture.
func Binary(arch string) ([]byte, error) {
	b, err := bin.ReadFile("bin/" + BinaryName(arch))
	if errors.Is(err, fs.ErrNotExist) {
		have := "none"
		if ents, _ := bin.ReadDir("bin"); len(ents) > 0 {
			var arches []string
			for _, e := range ents {
				if a, ok := strings.CutPrefix(e.Name(), "mcbake-node-linux-"); ok {
					arches = append(arches, a)
				}
			}
			if len(arches) > 0 {
				have = strings.Join(arches, ", ")
			}
		}
		return nil, fmt.Errorf("%w: linux/%s (it has: %s); build mcbake with make guard-bin GUARD_ARCHES=%s, or pass --guard-binary FILE, or --no-revert-guard", ErrNoBinary, arch, have, arch)
	}
	return b, err
}

// ReadBinary reads a node binary from a file (--guard-binary): a
// regular, non-empty file.
func ReadBinary(file string) ([]byte, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return nil, fmt.Errorf("--guard-binary: %w", err)
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 {
		return nil, fmt.Errorf("--guard-binary %s: not a non-empty regular file", file)
	}
	return os.ReadFile(file)
}

// ArchOf returns the GOARCH an ELF executable runs on ("" when binary is
// not ELF, a script say, or an architecture mcbake does not know).
func ArchOf(binary []byte) string {
	f, err := elf.NewFile(bytes.NewReader(binary))
	if err != nil {
		return ""
	}
	defer f.Close()
	switch {
	case f.Machine == elf.EM_X86_64:
		return "amd64"
	case f.Machine == elf.EM_AARCH64:
		return "arm64"
	case f.Machine == elf.EM_PPC64 && f.Data == elf.ELFDATA2LSB:
		return "ppc64le"
	case f.Machine == elf.EM_S390:
		return "s390x"
	case f.Machine == elf.EM_386:
		return "386"
	}
	return ""
}

// CheckArch refuses a node binary built for another architecture than
// the image's (arch, a GOARCH): the node would fail to run it at the
// shutdown it is for.
func CheckArch(binary []byte, arch string) error {
	if a := ArchOf(binary); a != "" && arch != "" && a != arch {
		return fmt.Errorf("the revert guard's node binary is for linux/%s, the image for linux/%s: pass one for %s (make guard-bin GUARD_ARCHES=%s, or --guard-binary FILE), or --no-revert-guard", a, arch, arch, arch)
	}
	return nil
}

// Entries are the guard's files for an image whose node binary is
// binary: the binary, the unit and the link that enables it, without
// their parent directories.
func Entries(binary []byte) []render.Entry {
	file := func(p string, mode manifest.Mode, b []byte) render.Entry {
		return render.Entry{Entry: manifest.Entry{Path: p, Type: manifest.File, Mode: mode, Size: int64(len(b)),
			Digest: digest.FromBytes(b), Source: Source}, Content: b}
	}
	return []render.Entry{
		file(BinaryPath, 0o755, binary),
		file(UnitPath, 0o644, Unit),
		{Entry: manifest.Entry{Path: WantsPath, Type: manifest.Symlink, Mode: 0o777, Target: "../" + path.Base(UnitPath), Source: Source}},
	}
}

// Tree are Entries with every parent directory (mode 0755, root's): the
// guard's files as a tree to copy onto an image's root.
func Tree(binary []byte) []render.Entry {
	var out []render.Entry
	have := map[string]bool{}
	for _, e := range Entries(binary) {
		var parents []render.Entry
		for d := path.Dir(e.Path); d != "/" && !have[d]; d = path.Dir(d) {
			have[d] = true
			parents = append(parents, render.Entry{Entry: manifest.Entry{Path: d, Type: manifest.Directory, Mode: 0o755, Source: Source}})
		}
		slices.Reverse(parents)
		out = append(append(out, parents...), e)
	}
	return out
}

// WriteTree writes Tree(binary) under dir, for `COPY dir/ /` in a
// Containerfile (mcbake's own image holds it at ToolImageDir). The tree is
// made aside and renamed in; dir must be absent, empty, or an earlier
// guard tree. Owners are root's with o.Chown (as root).
func WriteTree(ctx context.Context, dir string, binary []byte, o render.WriteOptions) error {
	return atomicdir.Build(dir, "guard tree", []string{"usr"}, func(tmp string) error {
		return render.WriteEntries(ctx, tmp, Tree(binary), o)
	})
}
