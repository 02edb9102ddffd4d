// Package render computes what the machine-config-daemon writes for MachineConfigs.
//
// It turns merged MachineConfigs into the exact filesystem entries the
// daemon would write on a node: files, directories, links, systemd
// units, drop-ins, masks, enablement symlinks, core's SSH keys and the
// stored current config, each with the MachineConfig field it came from.
// It reads nothing but the MachineConfigs and a fstree.Tree (a directory
// or a base image index) where owner names, presets and base unit files
// are looked up and parent symlinks are followed.
package render

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/internal/readall"

	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/klauspost/compress/gzip"
	"github.com/opencontainers/go-digest"
	"github.com/vincent-petithory/dataurl"

	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// MaxTotalContent bounds the decompressed content of all files together,
// as fstree.MaxContent bounds each file's (docs/design.md, "What is
// refused"): both are enforced while decompressing.
const MaxTotalContent = 64 << 20

// Well-known paths the MCD writes.
const (
	CurrentConfig = "/etc/machine-config-daemon/currentconfig"
	SSHKeysFile   = "/home/core/.ssh/authorized_keys.d/ignition"
)

// Entry is one rendered filesystem entry: its manifest record plus, for
// files, the content.
type Entry struct {
	manifest.Entry
	Content []byte
}

// Result is a rendering: entries in the order the MCD writes them (later
// writes of the same path already folded in), and unit enablement.
type Result struct {
	Entries []Entry
	Units   []manifest.Unit
	// Skipped are the units with enabled set whose enablement the MCD
	// skips: no contents, and systemctl list-unit-files does not list
	// them (an instance of a template without an instance file, say).
	Skipped []machineconfig.Unit
	// Removes are the paths the MCD removes whatever is there (the unit
	// file of a unit with mask: false and no contents, a drop-in with
	// empty contents), with where each removal comes from. Entries lists
	// such a removal, as Absent, only when the root has something there:
	// a root the MCD already made so has nothing to record.
	Removes map[string]manifest.Source
	// Degrading are the units the machine-config-daemon's on-disk
	// validation finds enabled otherwise than their MachineConfig says,
	// once it applied them all (a later disable undoes an enable through
	// Also= or a template): the node goes Degraded. The rendering is still
	// what the daemon writes.
	Degrading []UnitCheck
}

// UnitCheck is a unit with enabled: true whose enablement the
// machine-config-daemon checks (checkUnitEnabled: a unit with contents,
// not masked) and what `systemctl is-enabled` then says.
type UnitCheck struct {
	Name   string
	State  string
	Source machineconfig.Source
}

// Manifest returns the ownership manifest of the rendering; the
// certificate writer's files are marked Managed.
func (res *Result) Manifest(mcs []*machineconfig.MachineConfig) *manifest.Manifest {
	m := &manifest.Manifest{Units: append([]manifest.Unit(nil), res.Units...)}
	for _, mc := range mcs {
		m.MachineConfigs = append(m.MachineConfigs, manifest.MachineConfig{Name: mc.Name, Digest: mc.Digest})
	}
	for _, e := range res.Entries {
		if CertificateWriterManages(e.Path) || CertificateWriterManages(e.Where()) {
			e.Managed = manifest.ManagedByCertificateWriter
		}
		m.Entries = append(m.Entries, e.Entry)
	}
	m.Sort()
	return m
}

// Render renders m against root (nil: an empty root, where nothing exists
// and no owner name resolves). It reports every problem found, joined.
// Once ctx is done it stops at the next file or stage and returns ctx's
// error.
func Render(ctx context.Context, m *machineconfig.Merged, root fstree.Tree) (*Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	hasRoot := root != nil
	if root == nil {
		root = fstree.Empty
	}
	r := &renderer{ctx: ctx, m: m, root: root, hasRoot: hasRoot,
		index:   map[string]int{},
		storage: map[string]machineconfig.Source{}}
	// The current config, the merged config as the MCD encodes it, is
	// the largest single encoding and reads only m: it is made while the
	// rest renders (docs/design.md, The warm path).
	type encoded struct {
		b   []byte
		err error
	}
	current := make(chan encoded, 1)
	go func() {
		b, err := m.JSON()
		current <- encoded{b, err}
	}()
	var err error
	if r.owners, err = newOwners(root); err != nil {
		return nil, err
	}
	for _, stage := range []func(){r.files, r.directories, r.storageLinks, r.units, r.sshKeys} {
		stage()
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
	cur := <-current
	r.currentConfig(cur.b, cur.err)
	if err := r.owners.err(); err != nil {
		r.errs = append(r.errs, err)
	}
	r.place()
	if len(r.errs) > 0 {
		return nil, errors.Join(r.errs...)
	}
	return &Result{Entries: r.entries, Units: r.unitStates, Skipped: r.skipped, Removes: r.removes, Degrading: r.degrading}, nil
}

type renderer struct {
	ctx        context.Context
	m          *machineconfig.Merged
	root       fstree.Tree
	hasRoot    bool // a root was given: presets decide units without enabled
	owners     *owners
	entries    []Entry
	index      map[string]int // path -> position in entries
	storage    map[string]machineconfig.Source
	unitStates []manifest.Unit
	skipped    []machineconfig.Unit
	removes    map[string]manifest.Source
	degrading  []UnitCheck
	errs       []error
	ioErrs     map[string]bool // paths whose I/O error is recorded
	content    int             // bytes of file content decoded so far
}

func at(s machineconfig.Source, field string) machineconfig.Source {
	s.Field = field
	return s
}

func (r *renderer) fail(src machineconfig.Source, format string, args ...any) {
	r.failFor(machineconfig.ReasonRender, src, format, args...)
}

func (r *renderer) failFor(reason machineconfig.Reason, src machineconfig.Source, format string, args ...any) {
	r.errs = append(r.errs, &machineconfig.FieldError{File: src.File, MachineConfig: src.MachineConfig, Field: src.Field,
		Reason: reason, Msg: fmt.Sprintf(format, args...)})
}

// lstat is r.root.Lstat; an I/O error is recorded once per path and the
// path treated as absent.
func (r *renderer) lstat(p string) (manifest.Entry, bool) {
	e, ok, err := r.root.Lstat(p)
	if err != nil {
		r.ioError(p, err)
	}
	return e, ok
}

// readDir is r.root.ReadDir; an I/O error is recorded once per path.
func (r *renderer) readDir(p string) []string {
	names, err := r.root.ReadDir(p)
	if err != nil {
		r.ioError(p, err)
	}
	return names
}

func (r *renderer) ioError(p string, err error) {
	if r.ioErrs[p] {
		return
	}
	if r.ioErrs == nil {
		r.ioErrs = map[string]bool{}
	}
	r.ioErrs[p] = true
	r.errs = append(r.errs, fmt.Errorf("reading the root: %w", err))
}

func loc(src machineconfig.Source) string {
	return fmt.Sprintf("%s: %s: %s", src.File, src.MachineConfig, src.Field)
}

// add records e, replacing an earlier entry at the same path (the MCD's
// later write wins).
func (r *renderer) add(e Entry, src machineconfig.Source) {
	e.Source = manifest.Source{MachineConfig: src.MachineConfig, Field: src.Field}
	if i, ok := r.index[e.Path]; ok {
		r.entries[i] = e
		return
	}
	r.index[e.Path] = len(r.entries)
	r.entries = append(r.entries, e)
}

func (r *renderer) addFile(p string, content []byte, mode uint32, uid, gid int, src machineconfig.Source) {
	r.add(Entry{Entry: manifest.Entry{Path: p, Type: manifest.File, Mode: manifest.Mode(mode), UID: uid, GID: gid,
		Size: int64(len(content)), Digest: digest.FromBytes(content)}, Content: content}, src)
}

func (r *renderer) addLink(p, target string, src machineconfig.Source) {
	r.add(Entry{Entry: manifest.Entry{Path: p, Type: manifest.Symlink, Mode: 0o777, Target: target}}, src)
}

func (r *renderer) addAbsent(p string, src machineconfig.Source) {
	r.add(Entry{Entry: manifest.Entry{Path: p, Type: manifest.Absent}}, src)
}

// claim records that a storage file, directory or link is written at p,
// refusing a second one of another kind at the same path (several
// MachineConfigs can define a file and a directory at one path; no node
// can have both).
func (r *renderer) claim(p string, src machineconfig.Source) bool {
	if prev, ok := r.storage[p]; ok {
		r.fail(at(src, src.Field+".path"), "path %s is also defined by %s: %s: %s", p, prev.File, prev.MachineConfig, prev.Field)
		return false
	}
	r.storage[p] = src
	return true
}

func (r *renderer) files() {
	for _, f := range r.m.Files {
		if r.ctx.Err() != nil {
			return // Render returns the error
		}
		src := f.Source
		if !r.claim(f.Path, src) {
			continue
		}
		content, err := decode(f.Contents, min(fstree.MaxContent, MaxTotalContent-r.content))
		r.content += len(content)
		if err != nil {
			r.failFor(machineconfig.ReasonContent, at(src, src.Field+".contents"), "%v", err)
			continue
		}
		mode := uint32(0o644)
		if f.Mode != nil {
			mode = uint32(*f.Mode)
		}
		if f.Path == KubeConfig {
			// The MCD makes it 0600 after every write of the files
			// (updateKubeConfigPermission), whatever the mode asked.
			mode = 0o600
		}
		uid := r.owners.uid(f.User.ID, f.User.Name, loc(src))
		gid := r.owners.gid(f.Group.ID, f.Group.Name, loc(src))
		r.addFile(f.Path, content, mode, uid, gid, src)
	}
}

func (r *renderer) directories() {
	for _, d := range r.m.Directories {
		if !r.claim(d.Path, d.Source) {
			continue
		}
		mode := uint32(0o755)
		if d.Mode != nil {
			mode = uint32(*d.Mode)
		}
		uid := r.owners.uid(d.User.ID, d.User.Name, loc(d.Source))
		gid := r.owners.gid(d.Group.ID, d.Group.Name, loc(d.Source))
		r.add(Entry{Entry: manifest.Entry{Path: d.Path, Type: manifest.Directory, Mode: manifest.Mode(mode), UID: uid, GID: gid}}, d.Source)
	}
}

func (r *renderer) storageLinks() {
	for _, l := range r.m.Links {
		if !r.claim(l.Path, l.Source) {
			continue
		}
		if l.Target == nil {
			r.fail(at(l.Source, l.Source.Field+".target"), "link has no target")
			continue
		}
		e := Entry{Entry: manifest.Entry{Path: l.Path, Type: manifest.Symlink, Mode: 0o777, Target: *l.Target,
			UID: r.owners.uid(l.User.ID, l.User.Name, loc(l.Source)), GID: r.owners.gid(l.Group.ID, l.Group.Name, loc(l.Source))}}
		if l.Hard != nil && *l.Hard {
			e.Type, e.Mode = manifest.Hardlink, 0
		}
		r.add(e, l.Source)
	}
}

// sshKeys writes core's keys where the MCD does, 0600 core:core.
func (r *renderer) sshKeys() {
	if len(r.m.SSHKeys) == 0 {
		return
	}
	src := r.m.SSHKeys[0].Source
	src.Field = strings.TrimSuffix(src.Field, "[0]")
	core := "core"
	where := loc(src)
	uid, gid := r.owners.uid(nil, &core, where), r.owners.gid(nil, &core, where)
	var b strings.Builder
	for _, k := range r.m.SSHKeys {
		b.WriteString(k.Key)
		b.WriteByte('\n')
	}
	for _, dir := range []string{"/home/core", "/home/core/.ssh", "/home/core/.ssh/authorized_keys.d"} {
		if _, ok := r.lstat(dir); !ok || dir != "/home/core" {
			r.add(Entry{Entry: manifest.Entry{Path: dir, Type: manifest.Directory, Mode: 0o700, UID: uid, GID: gid}}, src)
		}
	}
	r.addFile(SSHKeysFile, []byte(b.String()), 0o600, uid, gid, src)
}

func (r *renderer) currentConfig(b []byte, err error) {
	if err != nil {
		r.errs = append(r.errs, err)
		return
	}
	r.addFile(CurrentConfig, b, 0o644, 0, 0, machineconfig.Source{MachineConfig: r.m.Name, Field: "spec"})
}

// KubeConfig is the kubelet's kubeconfig, which the MCD keeps at 0600.
const KubeConfig = "/etc/kubernetes/kubeconfig"

// decode returns a resource's content as the MCD decodes it
// (DecodeIgnitionFileContents): no source is an empty file, whatever the
// compression; a source is a data URL (an empty one is not), optionally
// gzip compressed (bounded by fstree.MaxContent while decompressing); checked
// against its verification hash.
func decode(res types.Resource, limit int) ([]byte, error) {
	if res.Source == nil {
		return nil, verify(res.Verification, nil)
	}
	du, err := dataurl.DecodeString(*res.Source)
	if err != nil {
		return nil, fmt.Errorf("decoding data URL: %w", err)
	}
	data := du.Data
	if res.Compression != nil && *res.Compression == "gzip" {
		if data, err = gunzip(data, limit); err != nil {
			return nil, err
		}
	}
	if len(data) > limit {
		return nil, fmt.Errorf("content is %d bytes: the MachineConfigs' files may hold %d MiB, %d MiB in all", len(data), fstree.MaxContent>>20, MaxTotalContent>>20)
	}
	if err := verify(res.Verification, data); err != nil {
		return nil, err
	}
	return data, nil
}

func gunzip(data []byte, limit int) ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(data))
	if err != nil {
		return nil, fmt.Errorf("invalid gzip content: %w", err)
	}
	// The size the trailer states is only a hint: no more than it is kept
	// (nothing when it states more than is left), and content that goes
	// past it is counted, not kept.
	hint := gzipSize(data)
	if hint > limit {
		hint = 0
	}
	out, err := readall.Sized(io.LimitReader(zr, int64(hint)+1), hint+1)
	if err != nil {
		return nil, fmt.Errorf("invalid gzip content: %w", err)
	}
	if len(out) <= hint {
		return out, nil
	}
	kept := len(out)
	out = nil
	n, err := io.Copy(io.Discard, io.LimitReader(zr, int64(limit-kept)+1))
	if err != nil {
		return nil, fmt.Errorf("invalid gzip content: %w", err)
	}
	size := int64(kept) + n
	if size > int64(limit) {
		return nil, tooLarge(limit)
	}
	// It fits after all (a stream of several members, whose trailer
	// states the last one's size): read again into a buffer its size.
	if err := zr.Reset(bytes.NewReader(data)); err != nil {
		return nil, fmt.Errorf("invalid gzip content: %w", err)
	}
	if out, err = readall.Sized(io.LimitReader(zr, int64(limit)+1), int(size)+1); err != nil {
		return nil, fmt.Errorf("invalid gzip content: %w", err)
	}
	if len(out) > limit {
		return nil, tooLarge(limit)
	}
	return out, nil
}

// tooLarge is gunzip's error for content that expands past limit.
func tooLarge(limit int) error {
	if limit < fstree.MaxContent {
		return fmt.Errorf("gzip content expands past what is left of %d MiB for all the MachineConfigs' files", MaxTotalContent>>20)
	}
	return fmt.Errorf("gzip content expands past %d MiB", fstree.MaxContent>>20)
}

// gzipSize is the size a gzip stream says its (last member's) content
// has, modulo 4 GiB (RFC 1952's ISIZE): a hint to size the buffer, never
// trusted.
func gzipSize(data []byte) int {
	if len(data) < 18 {
		return 0
	}
	return int(binary.LittleEndian.Uint32(data[len(data)-4:]))
}

func verify(v types.Verification, data []byte) error {
	if v.Hash == nil || *v.Hash == "" {
		return nil
	}
	algo, want, ok := strings.Cut(*v.Hash, "-")
	if !ok {
		return fmt.Errorf("verification hash %q: want TYPE-HEX", *v.Hash)
	}
	got, err := hashHex(algo, data)
	if err != nil {
		return err
	}
	if got != strings.ToLower(want) {
		return fmt.Errorf("verification hash mismatch: content has %s-%s", algo, got)
	}
	return nil
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
