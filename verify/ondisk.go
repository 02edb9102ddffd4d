package verify

import (
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/mcbake/mcbake/internal/manifest"
	"github.com/mcbake/mcbake/internal/render"
	"github.com/mcbake/mcbake/internal/rootfs"
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

// compareOnDisk returns how the entry at p differs from want; nil when it
// matches.
func compareOnDisk(want manifest.Entry, in rootfs.Info, ok bool) []string {
	if want.Type == manifest.Absent {
		if ok {
			return []string{Present}
		}
		return nil
	}
	if !ok {
		return []string{Missing}
	}
	if string(in.Type) != string(diskType(want.Type)) {
		return []string{TypeDiff}
	}
	var k []string
	switch want.Type {
	case manifest.File, manifest.Hardlink:
		if want.Digest != "" && in.Digest != want.Digest {
			k = append(k, Content)
		}
	case manifest.Symlink:
		if in.Target != want.Target {
			k = append(k, Target)
		}
	}
	if want.Type == manifest.File || want.Type == manifest.Directory {
		if in.Mode != uint32(want.Mode) {
			k = append(k, Mode)
		}
	}
	if want.Type != manifest.Hardlink && (in.UID != want.UID || in.GID != want.GID) {
		k = append(k, Owner)
	}
	return k
}

func diskType(t manifest.Type) rootfs.Type {
	switch t {
	case manifest.Directory:
		return rootfs.Dir
	case manifest.Symlink:
		return rootfs.Symlink
	}
	return rootfs.File
}

func describe(t manifest.Type, mode uint32, uid, gid int, digest, target string) string {
	switch t {
	case manifest.Absent:
		return "absent"
	case manifest.Symlink:
		return fmt.Sprintf("symlink -> %s %d:%d", target, uid, gid)
	case manifest.Directory:
		return fmt.Sprintf("directory %04o %d:%d", mode, uid, gid)
	}
	return fmt.Sprintf("%s %04o %d:%d %s", t, mode, uid, gid, shortDigest(digest))
}

func describeDisk(in rootfs.Info, ok bool) string {
	if !ok {
		return "absent"
	}
	return describe(manifest.Type(in.Type), in.Mode, in.UID, in.GID, in.Digest, in.Target)
}

func shortDigest(d string) string {
	if len(d) > 19 {
		return d[:19]
	}
	return d
}

// OnDiskReport is the result of OnDisk.
type OnDiskReport struct {
	Root       string     `json:"root"`
	Checked    int        `json:"checked"`
	Mismatches []Mismatch `json:"mismatches"`
}

// OnDisk checks that the root directory holds what the rendered
// MachineConfigs want: every file's content, mode and owner, directories,
// links, unit files, drop-ins, masks, enablement links (and removed ones)
// and SSH keys. The stored current config is not compared: the MCD writes
// its own serialization of the MachineConfig there.
func OnDisk(root *rootfs.Root, rootPath string, res *render.Result) (*OnDiskReport, error) {
	rep := &OnDiskReport{Root: rootPath, Mismatches: []Mismatch{}}
	for _, e := range res.Entries {
		if e.Path == render.CurrentConfig {
			continue
		}
		rep.Checked++
		in, ok, err := root.Lstat(e.Where())
		if err != nil {
			return nil, err
		}
		if kinds := compareOnDisk(e.Entry, in, ok); len(kinds) > 0 {
			rep.Mismatches = append(rep.Mismatches, Mismatch{Path: e.Where(), Kinds: kinds, Source: e.Source,
				Want: describe(e.Type, uint32(e.Mode), e.UID, e.GID, e.Digest, e.Target), Got: describeDisk(in, ok)})
		}
	}
	sort.Slice(rep.Mismatches, func(i, j int) bool { return rep.Mismatches[i].Path < rep.Mismatches[j].Path })
	return rep, nil
}

// WriteJSON writes the report as indented JSON.
func (r *OnDiskReport) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// WriteText writes one line per mismatch and a closing count.
func (r *OnDiskReport) WriteText(w io.Writer) error {
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
