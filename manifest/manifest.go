// Package manifest defines the ownership manifest, the record of owned paths.
//
// The manifest is the JSON record of every path a build owns, with its
// type, mode, owners, content digest or link target, the MachineConfig
// field that put it there and, once a base image is known, the base's
// state of that path. It is the contract between a build and the node
// side across versions; docs/schema/manifest.schema.json is its JSON
// Schema.
//
// The encoding is byte-for-byte deterministic: entries are sorted by path
// and Marshal always produces the same bytes for the same manifest.
package manifest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strconv"

	"github.com/opencontainers/go-digest"
)

// SchemaVersion is the version of the format written by Marshal.
const SchemaVersion = 1

// ImagePath is where a layered image built by mcbake carries its
// ownership manifest: on a node that runs one, the booted deployment has
// it there (under /usr, so no node writes it).
const ImagePath = "/usr/share/mcbake/manifest.json"

// Type is the kind of filesystem entry an Entry describes.
type Type string

// Entry types. Absent marks a path the build owns by removing it (a
// whiteout in the layer), for example a base enablement symlink that
// `enabled: false` disables. Other is what an observed tree may have that
// a MachineConfig never writes (a device, a fifo, a socket); it never
// appears in a manifest.
const (
	File      Type = "file"
	Directory Type = "directory"
	Symlink   Type = "symlink"
	Hardlink  Type = "hardlink"
	Absent    Type = "absent"
	Other     Type = "other"
)

// Manifest is the ownership manifest of one build or render.
type Manifest struct {
	SchemaVersion  int             `json:"schemaVersion"`
	MachineConfigs []MachineConfig `json:"machineConfigs"`
	Base           *ImageRef       `json:"base,omitempty"`
	Entries        []Entry         `json:"entries"`
	Units          []Unit          `json:"units,omitempty"`
	// Own are the paths mcbake adds for itself (the revert guard under
	// /usr), never a MachineConfig's: diff, ondisk and the node ignore
	// them.
	Own []Entry `json:"own,omitempty"`
}

// ImageRef names an image by reference and manifest digest: the base a
// manifest was built against, the images of a revert report and plan, a
// node's deployments. Config and DiffIDs, when known, identify it across
// format conversions (a copy converted to another manifest format or
// compression has another manifest digest but the same config digest and
// diff IDs): a node compares images by them.
type ImageRef struct {
	Reference string          `json:"reference,omitempty"`
	Digest    digest.Digest   `json:"digest,omitempty"`
	Config    digest.Digest   `json:"config,omitempty"`
	DiffIDs   []digest.Digest `json:"diffIDs,omitempty"`
}

// Same reports whether r and o name the same image: the same config and
// diff IDs when both know them, else the same manifest digest.
func (r ImageRef) Same(o ImageRef) bool {
	if r.Config != "" && o.Config != "" && len(r.DiffIDs) > 0 && len(o.DiffIDs) > 0 {
		return r.Config == o.Config && slices.Equal(r.DiffIDs, o.DiffIDs)
	}
	return r.Digest != "" && r.Digest == o.Digest
}

// MachineConfig names one input MachineConfig and the sha256 of its
// canonical JSON.
type MachineConfig struct {
	Name   string        `json:"name"`
	Digest digest.Digest `json:"digest"`
}

// Entry is one owned path.
type Entry struct {
	// Path is the absolute path the MachineConfig asked for.
	Path string `json:"path"`
	// ResolvedPath is where Path lands once its parent directories are
	// resolved through the base's symlinks; empty when it equals Path.
	ResolvedPath string        `json:"resolvedPath,omitempty"`
	Type         Type          `json:"type"`
	Mode         Mode          `json:"mode"`
	UID          int           `json:"uid"`
	GID          int           `json:"gid"`
	Size         int64         `json:"size,omitempty"`
	Digest       digest.Digest `json:"digest,omitempty"`
	Target       string        `json:"target,omitempty"`
	Source       Source        `json:"source"`
	// Base is the base image's state of the resolved path, when known.
	Base *BaseState `json:"base,omitempty"`
	// Managed names who keeps the path up to date on the node instead of
	// the machine-config-daemon, when someone does: ManagedByCertificateWriter
	// for the files the daemon's certificate writer rotates, which it
	// neither writes on an update nor validates, and which nothing may roll
	// back (docs/design.md, "Files the MCD does not manage on update").
	// Compare ignores it.
	Managed string `json:"managed,omitempty"`
}

// ManagedByCertificateWriter is Entry.Managed for the certificate
// writer's files.
const ManagedByCertificateWriter = "certificate-writer"

// Where returns the path the entry occupies in the image: ResolvedPath when
// set, else Path.
func (e *Entry) Where() string {
	if e.ResolvedPath != "" {
		return e.ResolvedPath
	}
	return e.Path
}

// Source is the provenance of an entry: which MachineConfig and which
// Ignition field (a JSON path such as spec.config.storage.files[3]).
type Source struct {
	MachineConfig string `json:"machineConfig"`
	Field         string `json:"field"`
}

// State is the base image's state of an owned path.
type State string

// Base states.
const (
	StateAbsent  State = "absent"
	StateSame    State = "same"
	StateDiffers State = "differs"
)

// BaseState records how the base image has an owned path.
type BaseState struct {
	State   State  `json:"state"`
	Differs []Attr `json:"differs,omitempty"`
}

// StateOf turns the result of Compare, for a path the tree has, into a
// BaseState; NotInBase is the state of a path it lacks.
func StateOf(differs []Attr) *BaseState {
	if len(differs) == 0 {
		return &BaseState{State: StateSame}
	}
	return &BaseState{State: StateDiffers, Differs: differs}
}

// NotInBase is the BaseState of a path the tree lacks.
func NotInBase() *BaseState { return &BaseState{State: StateAbsent} }

// Unit records what the build decided about one systemd unit's enablement.
type Unit struct {
	Name string `json:"name"`
	// Enablement is enabled, disabled, masked, or preset (enabled unset
	// and no base presets to decide it: left to `systemctl preset`).
	Enablement string `json:"enablement"`
	Source     Source `json:"source"`
}

// Mode is a permission mode, encoded in JSON as an octal string ("0644").
type Mode uint32

// MarshalJSON encodes m as a four-digit octal string.
func (m Mode) MarshalJSON() ([]byte, error) {
	return []byte(fmt.Sprintf(`"%04o"`, uint32(m))), nil
}

// UnmarshalJSON accepts an octal string or a decimal number.
func (m *Mode) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		var n uint32
		if err := json.Unmarshal(b, &n); err != nil {
			return fmt.Errorf("mode: want an octal string or a number, got %s", b)
		}
		*m = Mode(n)
		return nil
	}
	n, err := strconv.ParseUint(s, 8, 32)
	if err != nil {
		return fmt.Errorf("mode %q: not octal", s)
	}
	*m = Mode(n)
	return nil
}

// Sort orders entries by path, then units by name, so encodings are stable.
func (m *Manifest) Sort() {
	sort.SliceStable(m.Entries, func(i, j int) bool { return m.Entries[i].Path < m.Entries[j].Path })
	sort.SliceStable(m.Units, func(i, j int) bool { return m.Units[i].Name < m.Units[j].Name })
	sort.SliceStable(m.Own, func(i, j int) bool { return m.Own[i].Path < m.Own[j].Path })
}

// Marshal sorts m and returns its canonical encoding (indented JSON with a
// trailing newline).
func Marshal(m *Manifest) ([]byte, error) {
	m.SchemaVersion = SchemaVersion
	m.Sort()
	if m.MachineConfigs == nil {
		m.MachineConfigs = []MachineConfig{}
	}
	if m.Entries == nil {
		m.Entries = []Entry{}
	}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// Unmarshal decodes a manifest and checks its schema version.
func Unmarshal(b []byte) (*Manifest, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("decoding manifest: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("decoding manifest: trailing data after the JSON object")
	}
	if m.SchemaVersion != SchemaVersion {
		return nil, fmt.Errorf("manifest schemaVersion %d: only %d is supported", m.SchemaVersion, SchemaVersion)
	}
	m.Sort() // Lookup needs sorted entries; a hand-written file may not be
	return &m, nil
}

// ReadFile reads and decodes the manifest at path.
func ReadFile(path string) (*Manifest, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	m, err := Unmarshal(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return m, nil
}

// Lookup returns the entry for path (as requested), if any.
func (m *Manifest) Lookup(path string) (*Entry, bool) {
	i := sort.Search(len(m.Entries), func(i int) bool { return m.Entries[i].Path >= path })
	if i < len(m.Entries) && m.Entries[i].Path == path {
		return &m.Entries[i], true
	}
	return nil, false
}
