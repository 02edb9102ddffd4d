package node

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/render"
	"github.com/opencontainers/go-digest"
)

// Mismatch kinds.
const (
	Missing  = "missing"
	Present  = "present" // should be absent
	Content  = "content"
	Mode     = "mode"
	Owner    = "owner"
	TypeDiff = "type"
	Target   = "target"
)

// Mismatch is one way an on-disk path differs from what the MachineConfig
// wants.
type Mismatch struct {
	Path   string          `json:"path"`
	Kinds  []string        `json:"kinds"`
	Want   string          `json:"want"`
	Got    string          `json:"got"`
	Source manifest.Source `json:"source"`
}

// differences observes p under root and returns how it differs from
// want, in the kinds Mismatch reports; nil when it matches.
func differences(root *Root, p string, want manifest.Entry) ([]string, error) {
	have, ok, err := fstree.Observe(root, p, want)
	if err != nil {
		return nil, err
	}
	return kinds(want, have, ok), nil
}

// kinds turns manifest.Compare's attributes into mismatch kinds: owners
// are one kind, and a path that should be absent is present.
func kinds(want, have manifest.Entry, ok bool) []string {
	switch {
	case want.Type == manifest.Absent && ok:
		return []string{Present}
	case want.Type == manifest.Absent:
		return nil
	case !ok:
		return []string{Missing}
	}
	var k []string
	for _, a := range manifest.Compare(want, have) {
		switch a {
		case manifest.AttrType:
			k = append(k, TypeDiff)
		case manifest.AttrContent:
			k = append(k, Content)
		case manifest.AttrTarget:
			k = append(k, Target)
		case manifest.AttrMode:
			k = append(k, Mode)
		case manifest.AttrUID, manifest.AttrGID:
			if len(k) == 0 || k[len(k)-1] != Owner {
				k = append(k, Owner)
			}
		}
	}
	return k
}

func describe(t manifest.Type, mode uint32, uid, gid int, dg digest.Digest, target string) string {
	switch t {
	case manifest.Absent:
		return "absent"
	case manifest.Symlink:
		return fmt.Sprintf("symlink -> %s %d:%d", target, uid, gid)
	case manifest.Directory:
		return fmt.Sprintf("directory %04o %d:%d", mode, uid, gid)
	}
	return fmt.Sprintf("%s %04o %d:%d %s", t, mode, uid, gid, shortDigest(dg))
}

func describeEntry(e manifest.Entry, ok bool) string {
	if !ok {
		return "absent"
	}
	return describe(e.Type, uint32(e.Mode), e.UID, e.GID, e.Digest, e.Target)
}

func shortDigest(d digest.Digest) string {
	if len(d) > 19 {
		return string(d[:19])
	}
	return string(d)
}

// ReportSchemaVersion is the version of Report's JSON format.
const ReportSchemaVersion = 1

// Report is the result of Validate.
type Report struct {
	SchemaVersion int        `json:"schemaVersion"`
	Root          string     `json:"root"`
	Checked       int        `json:"checked"`
	Mismatches    []Mismatch `json:"mismatches"`
}

// Validate checks that root holds what the MachineConfigs, rendered
// against root, want: every file's content, mode and owner, directories,
// links, unit files, drop-ins, masks, enablement links (and removed ones)
// and SSH keys; every mismatch is reported. The stored current config is
// not compared (the MCD writes its own serialization of the MachineConfig
// there), nor are the files the certificate writer manages (the MCD does
// not validate them either). It writes nothing. An error means the MachineConfigs could not be
// rendered or root could not be read.
func Validate(ctx context.Context, root *Root, mcs []*machineconfig.MachineConfig) (*Report, error) {
	res, err := renderOn(ctx, root, mcs)
	if err != nil {
		return nil, err
	}
	return check(root, res)
}

// renderOn renders the MachineConfigs against root, as the
// machine-config-daemon would write them there.
func renderOn(ctx context.Context, root *Root, mcs []*machineconfig.MachineConfig) (*render.Result, error) {
	return render.Render(ctx, machineconfig.Merge(mcs), root)
}

// check compares root with a rendering (see Validate).
func check(root *Root, res *render.Result) (*Report, error) {
	rep := &Report{SchemaVersion: ReportSchemaVersion, Root: root.Path(), Mismatches: []Mismatch{}}
	for _, e := range res.Entries {
		if e.Path == render.CurrentConfig || render.CertificateWriterManages(e.Path) {
			continue
		}
		rep.Checked++
		have, ok, err := fstree.Observe(root, e.Where(), e.Entry)
		if err != nil {
			return nil, err
		}
		if emptyDropinKept(e, have, ok) {
			continue
		}
		if k := kinds(e.Entry, have, ok); len(k) > 0 {
			rep.Mismatches = append(rep.Mismatches, Mismatch{Path: e.Where(), Kinds: k, Source: e.Source,
				Want: describe(e.Type, uint32(e.Mode), e.UID, e.GID, e.Digest, e.Target), Got: describeEntry(have, ok)})
		}
	}
	sort.Slice(rep.Mismatches, func(i, j int) bool { return rep.Mismatches[i].Path < rep.Mismatches[j].Path })
	return rep, nil
}

// emptyDropinKept reports whether have is a zero-length regular file at
// 0644 where the rendering wants a drop-in with empty contents absent. The
// MCD removes such a drop-in when it writes the unit, but its validation
// (checkV3Dropin) accepts one that exists with no content and mode 0644,
// for nodes from before 4.7, whose Ignition wrote it (docs/node.md).
func emptyDropinKept(e render.Entry, have manifest.Entry, ok bool) bool {
	return e.Type == manifest.Absent && ok && strings.Contains(e.Source.Field, ".dropins[") &&
		have.Type == manifest.File && have.Size == 0 && have.Mode == 0o644
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes one line per mismatch and a closing count.
func (r *Report) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, m := range r.Mismatches {
		fmt.Fprintf(tw, "%s\t%v\twant %s\tgot %s\t%s %s\n", m.Path, m.Kinds, m.Want, m.Got, m.Source.MachineConfig, m.Source.Field)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	_, err := fmt.Fprintf(w, "%s: %d path(s) checked, %d mismatch(es)\n", r.Root, r.Checked, len(r.Mismatches))
	return err
}
