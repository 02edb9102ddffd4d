package machineconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"

	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// Source says which MachineConfig, file and field an item came from.
type Source struct {
	File          string
	MachineConfig string
	Field         string
}

// File is a storage file and where it came from.
type File struct {
	types.File
	Source Source
}

// Directory is a storage directory and where it came from.
type Directory struct {
	types.Directory
	Source Source
}

// Link is a storage link and where it came from.
type Link struct {
	types.Link
	Source Source
}

// Unit is a systemd unit and where it came from.
type Unit struct {
	types.Unit
	// Source is the last MachineConfig that defines the unit; Sources
	// says which one set each part ("contents", "enabled", "mask",
	// "dropins[NAME]") when several did (see SourceOf).
	Source  Source
	Sources map[string]Source
}

// SourceOf returns where part of the unit ("contents", "enabled", "mask",
// "dropins[NAME]") came from, with the part's full field path.
func (u Unit) SourceOf(part string) Source {
	s, ok := u.Sources[part]
	if !ok {
		s = u.Source
	}
	s.Field = u.Source.Field + "." + part
	return s
}

// unitParts lists the parts of u that are set.
func unitParts(u types.Unit) []string {
	var parts []string
	if u.Contents != nil {
		parts = append(parts, "contents")
	}
	if u.Enabled != nil {
		parts = append(parts, "enabled")
	}
	if u.Mask != nil {
		parts = append(parts, "mask")
	}
	for _, d := range u.Dropins {
		parts = append(parts, "dropins["+d.Name+"]")
	}
	return parts
}

// SSHKey is one of core's authorized keys and where it came from.
type SSHKey struct {
	Key    string
	Source Source
}

// Conflict records that two MachineConfigs define the same path or unit:
// the later one (by name) wins.
type Conflict struct {
	// Kind is file, directory, link or unit.
	Kind string
	// Key is the path or unit name.
	Key       string
	Winner    Source
	Loser     Source
	Identical bool
}

// Merged is several MachineConfigs merged as the MCO merges them.
type Merged struct {
	// Name is the merged MachineConfig's name: the single input's name,
	// or "rendered-mcbake-<hash>" for several.
	Name string
	// MachineConfigs are the inputs, sorted by name.
	MachineConfigs  []*MachineConfig
	Files           []File
	Directories     []Directory
	Links           []Link
	Units           []Unit
	SSHKeys         []SSHKey
	PasswordHash    *string
	KernelArguments []string
	Extensions      []string
	OSImageURL      string
	// BaseOSExtensionsContainerImage is the last one set, by name order.
	BaseOSExtensionsContainerImage string
	KernelType                     string
	FIPS                           bool
	Conflicts                      []Conflict
}

// Merge merges MachineConfigs like the MCO's MergeMachineConfigs: sorted
// by name, each merged into the result with Ignition's own merge
// (config/v3_5.Merge): a later file, directory or link with the same path,
// or unit with the same name, overrides the fields it sets and keeps the
// others (a unit's drop-ins merge by name); every such redefinition is
// kept as a Conflict. Kernel arguments concatenate; extensions union;
// core's SSH keys union in order.
func Merge(mcs []*MachineConfig) *Merged {
	sorted := append([]*MachineConfig(nil), mcs...)
	sort.SliceStable(sorted, func(i, j int) bool { return sorted[i].Name < sorted[j].Name })
	m := &Merged{MachineConfigs: sorted, Name: mergedName(sorted)}
	files := newKeyed("file", mergeFile)
	dirs := newKeyed("directory", mergeDirectory)
	links := newKeyed("link", mergeLink)
	units := newKeyed("unit", mergeUnit)
	seenExt := map[string]bool{}
	seenKey := map[string]bool{}
	for _, mc := range sorted {
		src := func(field string) Source { return Source{File: mc.File, MachineConfig: mc.Name, Field: field} }
		st := mc.Ignition.Storage
		for i, f := range st.Files {
			files.put(f.Path, File{File: f, Source: src(fmt.Sprintf("spec.config.storage.files[%d]", i))}, f)
		}
		for i, d := range st.Directories {
			dirs.put(d.Path, Directory{Directory: d, Source: src(fmt.Sprintf("spec.config.storage.directories[%d]", i))}, d)
		}
		for i, l := range st.Links {
			links.put(l.Path, Link{Link: l, Source: src(fmt.Sprintf("spec.config.storage.links[%d]", i))}, l)
		}
		for _, u := range mc.Ignition.Systemd.Units {
			us := src(fmt.Sprintf("spec.config.systemd.units[%s]", u.Name))
			parts := map[string]Source{}
			for _, p := range unitParts(u) {
				parts[p] = us
			}
			units.put(u.Name, Unit{Unit: u, Source: us, Sources: parts}, u)
		}
		for i, u := range mc.Ignition.Passwd.Users {
			if u.Name != "core" {
				continue
			}
			for j, k := range u.SSHAuthorizedKeys {
				key := strings.TrimSpace(string(k))
				if key == "" || seenKey[key] {
					continue
				}
				seenKey[key] = true
				m.SSHKeys = append(m.SSHKeys, SSHKey{Key: key, Source: src(fmt.Sprintf("spec.config.passwd.users[%d].sshAuthorizedKeys[%d]", i, j))})
			}
			if u.PasswordHash != nil {
				m.PasswordHash = u.PasswordHash
			}
		}
		m.KernelArguments = append(m.KernelArguments, mc.Spec.KernelArguments...)
		for _, e := range mc.Spec.Extensions {
			if !seenExt[e] {
				seenExt[e] = true
				m.Extensions = append(m.Extensions, e)
			}
		}
		if mc.Spec.OSImageURL != "" {
			m.OSImageURL = mc.Spec.OSImageURL
		}
		if mc.Spec.BaseOSExtensionsContainerImage != "" {
			m.BaseOSExtensionsContainerImage = mc.Spec.BaseOSExtensionsContainerImage
		}
		if mc.Spec.KernelType != "" {
			m.KernelType = mc.Spec.KernelType
		}
		m.FIPS = m.FIPS || mc.Spec.FIPS
	}
	m.Files, m.Directories, m.Links, m.Units = files.items, dirs.items, links.items, units.items
	for _, c := range [][]Conflict{files.conflicts, dirs.conflicts, links.conflicts, units.conflicts} {
		m.Conflicts = append(m.Conflicts, c...)
	}
	return m
}

// keyed keeps items in first-definition order, merging a later item with
// the same key into the earlier one.
type keyed[T any] struct {
	kind      string
	merge     func(old, new T) T
	index     map[string]int
	raw       []any
	items     []T
	conflicts []Conflict
}

func newKeyed[T any](kind string, merge func(old, new T) T) *keyed[T] {
	return &keyed[T]{kind: kind, merge: merge, index: map[string]int{}}
}

func (k *keyed[T]) put(key string, item T, raw any) {
	i, ok := k.index[key]
	if !ok {
		k.index[key] = len(k.items)
		k.items = append(k.items, item)
		k.raw = append(k.raw, raw)
		return
	}
	k.conflicts = append(k.conflicts, Conflict{
		Kind:      k.kind,
		Key:       key,
		Winner:    sourceOf(item),
		Loser:     sourceOf(k.items[i]),
		Identical: reflect.DeepEqual(k.raw[i], raw),
	})
	k.items[i] = k.merge(k.items[i], item)
	k.raw[i] = raw
}

// The merge functions apply Ignition's merge (what the MCO runs) to one
// item; the result's source is the later MachineConfig.
func mergeFile(old, new File) File {
	c := v35.Merge(types.Config{Storage: types.Storage{Files: []types.File{old.File}}}, types.Config{Storage: types.Storage{Files: []types.File{new.File}}})
	return File{File: c.Storage.Files[0], Source: new.Source}
}

func mergeDirectory(old, new Directory) Directory {
	c := v35.Merge(types.Config{Storage: types.Storage{Directories: []types.Directory{old.Directory}}}, types.Config{Storage: types.Storage{Directories: []types.Directory{new.Directory}}})
	return Directory{Directory: c.Storage.Directories[0], Source: new.Source}
}

func mergeLink(old, new Link) Link {
	c := v35.Merge(types.Config{Storage: types.Storage{Links: []types.Link{old.Link}}}, types.Config{Storage: types.Storage{Links: []types.Link{new.Link}}})
	return Link{Link: c.Storage.Links[0], Source: new.Source}
}

func mergeUnit(old, new Unit) Unit {
	c := v35.Merge(types.Config{Systemd: types.Systemd{Units: []types.Unit{old.Unit}}}, types.Config{Systemd: types.Systemd{Units: []types.Unit{new.Unit}}})
	parts := map[string]Source{}
	for p, s := range old.Sources {
		parts[p] = s
	}
	for p, s := range new.Sources {
		parts[p] = s
	}
	return Unit{Unit: c.Systemd.Units[0], Source: new.Source, Sources: parts}
}

func sourceOf(item any) Source {
	switch v := item.(type) {
	case File:
		return v.Source
	case Directory:
		return v.Source
	case Link:
		return v.Source
	case Unit:
		return v.Source
	}
	return Source{}
}

func mergedName(mcs []*MachineConfig) string {
	if len(mcs) == 1 {
		return mcs[0].Name
	}
	h := sha256.New()
	for _, mc := range mcs {
		fmt.Fprintf(h, "%s %s\n", mc.Name, mc.Digest)
	}
	return "rendered-mcbake-" + hex.EncodeToString(h.Sum(nil))[:16]
}

// Ignition returns the merged Ignition config (spec 3.5).
func (m *Merged) Ignition() types.Config {
	cfg := types.Config{Ignition: types.Ignition{Version: types.MaxVersion.String()}}
	for _, f := range m.Files {
		cfg.Storage.Files = append(cfg.Storage.Files, f.File)
	}
	for _, d := range m.Directories {
		cfg.Storage.Directories = append(cfg.Storage.Directories, d.Directory)
	}
	for _, l := range m.Links {
		cfg.Storage.Links = append(cfg.Storage.Links, l.Link)
	}
	for _, u := range m.Units {
		cfg.Systemd.Units = append(cfg.Systemd.Units, u.Unit)
	}
	if len(m.SSHKeys) > 0 || m.PasswordHash != nil {
		core := types.PasswdUser{Name: "core", PasswordHash: m.PasswordHash}
		for _, k := range m.SSHKeys {
			core.SSHAuthorizedKeys = append(core.SSHAuthorizedKeys, types.SSHAuthorizedKey(k.Key))
		}
		cfg.Passwd.Users = []types.PasswdUser{core}
	}
	return cfg
}

// JSON returns the merged MachineConfig object as the MCD stores it at
// /etc/machine-config-daemon/currentconfig.
func (m *Merged) JSON() ([]byte, error) {
	cfg, err := json.Marshal(m.Ignition())
	if err != nil {
		return nil, fmt.Errorf("encoding merged ignition config: %w", err)
	}
	obj := map[string]any{
		"apiVersion": APIVersion,
		"kind":       Kind,
		"metadata":   map[string]any{"name": m.Name},
		"spec": Spec{
			OSImageURL:                     m.OSImageURL,
			BaseOSExtensionsContainerImage: m.BaseOSExtensionsContainerImage,
			Config:                         cfg,
			KernelArguments:                m.KernelArguments,
			Extensions:                     m.Extensions,
			FIPS:                           m.FIPS,
			KernelType:                     m.KernelType,
		},
	}
	return json.Marshal(obj)
}
