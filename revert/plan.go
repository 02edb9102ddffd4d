package revert

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"

	"github.com/mcbake/mcbake/manifest"
	"github.com/opencontainers/go-digest"
)

// PlanSchemaVersion is the version of the plan format.
const PlanSchemaVersion = 1

// Plan is a revert plan: what a node must rewrite after reverting from
// Image to Base, and the clobbers it cannot repair.
type Plan struct {
	SchemaVersion int               `json:"schemaVersion"`
	Image         manifest.ImageRef `json:"image"`
	Base          manifest.ImageRef `json:"base"`
	// Rewrite lists the clobbered /etc paths, parents before children,
	// but those the certificate writer manages (Entry.Managed).
	Rewrite []PlanEntry `json:"rewrite"`
	// Lost lists the clobbered paths a node cannot rewrite: outside /etc
	// and /var, where the base's version wins, and those the base moves
	// into /var through a symlink (a plan rewrites only /etc).
	Lost []PlanEntry `json:"lost,omitempty"`
}

// PlanEntry is the desired state of one clobbered path.
type PlanEntry struct {
	// Path is the path on the node (resolved through the base's
	// symlinks); RequestedPath is the MachineConfig's path when different.
	Path          string          `json:"path"`
	RequestedPath string          `json:"requestedPath,omitempty"`
	Outcome       Outcome         `json:"outcome"`
	Type          manifest.Type   `json:"type"`
	Mode          manifest.Mode   `json:"mode"`
	UID           int             `json:"uid"`
	GID           int             `json:"gid"`
	Size          int64           `json:"size,omitempty"`
	Digest        digest.Digest   `json:"digest,omitempty"`
	Target        string          `json:"target,omitempty"`
	Source        manifest.Source `json:"source"`
}

// MachineConfigPath is the path the entry's MachineConfig asked for.
func (p PlanEntry) MachineConfigPath() string {
	if p.RequestedPath != "" {
		return p.RequestedPath
	}
	return p.Path
}

// NewPlan builds the revert plan from a diff report. The image and base
// digests must be known: a plan is only valid for that pair.
func NewPlan(r *Report) (*Plan, error) {
	if r.Image.Digest == "" || r.Base.Digest == "" {
		return nil, fmt.Errorf("a plan needs the image and base digests (image %q, base %q)", r.Image.Digest, r.Base.Digest)
	}
	p := &Plan{SchemaVersion: PlanSchemaVersion, Image: r.Image, Base: r.Base, Rewrite: []PlanEntry{}}
	for _, e := range r.Entries {
		if !e.Clobbered || e.Managed {
			continue
		}
		pe := PlanEntry{Path: e.Path, RequestedPath: e.RequestedPath, Outcome: e.Outcome, Type: e.Want.Type,
			Mode: e.Want.Mode, UID: e.Want.UID, GID: e.Want.GID, Size: e.Want.Size, Digest: e.Want.Digest, Target: e.Want.Target, Source: e.Source}
		if e.Outcome == Lost || e.Zone != ZoneEtc {
			p.Lost = append(p.Lost, pe)
			continue
		}
		p.Rewrite = append(p.Rewrite, pe)
	}
	return p, nil
}

// MarshalPlan encodes a plan as indented JSON with a trailing newline.
func MarshalPlan(p *Plan) ([]byte, error) {
	b, err := json.MarshalIndent(p, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// ReadPlan reads and checks a plan file: a plan must name the image and
// base digests, and every entry to rewrite must be an absolute, clean path
// below /etc with what its type needs (a file's digest, a link's target).
func ReadPlan(file string) (*Plan, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, err
	}
	p, err := ParsePlan(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return p, nil
}

// ParsePlan decodes and checks a plan (see ReadPlan).
func ParsePlan(b []byte) (*Plan, error) {
	var p Plan
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&p); err != nil {
		return nil, fmt.Errorf("decoding plan: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("decoding plan: trailing data after the JSON object")
	}
	if p.SchemaVersion != PlanSchemaVersion {
		return nil, fmt.Errorf("plan schemaVersion %d: only %d is supported", p.SchemaVersion, PlanSchemaVersion)
	}
	if err := p.Check(); err != nil {
		return nil, err
	}
	return &p, nil
}

// Check reports every problem that makes a plan unusable: a missing image
// or base digest, and entries to rewrite whose path is not absolute and
// clean or not under /etc, files without a digest, links without a target
// and unknown types.
func (p *Plan) Check() error {
	var errs []error
	if p.Image.Digest == "" || p.Base.Digest == "" {
		errs = append(errs, fmt.Errorf("plan: the image and base digests are required (image %q, base %q)", p.Image.Digest, p.Base.Digest))
	}
	for i, pe := range p.Rewrite {
		if err := checkRewrite(pe); err != nil {
			errs = append(errs, fmt.Errorf("plan: rewrite[%d]: %w", i, err))
		}
	}
	for i, pe := range p.Lost {
		if !cleanAbs(pe.Path) {
			errs = append(errs, fmt.Errorf("plan: lost[%d]: path %q is not absolute and clean", i, pe.Path))
		}
	}
	return errors.Join(errs...)
}

func checkRewrite(pe PlanEntry) error {
	switch {
	case !cleanAbs(pe.Path):
		return fmt.Errorf("path %q is not absolute and clean", pe.Path)
	case pe.RequestedPath != "" && !cleanAbs(pe.RequestedPath):
		return fmt.Errorf("%s: requestedPath %q is not absolute and clean", pe.Path, pe.RequestedPath)
	case pe.Path == "/etc" || ZoneOf(pe.Path) != ZoneEtc:
		return fmt.Errorf("%s: only paths below /etc can be rewritten", pe.Path)
	}
	switch pe.Type {
	case manifest.File:
		if pe.Digest == "" {
			return fmt.Errorf("%s: a file needs a digest", pe.Path)
		}
	case manifest.Symlink, manifest.Hardlink:
		if pe.Target == "" {
			return fmt.Errorf("%s: a %s needs a target", pe.Path, pe.Type)
		}
	case manifest.Directory, manifest.Absent:
	default:
		return fmt.Errorf("%s: unknown type %q", pe.Path, pe.Type)
	}
	return nil
}

// cleanAbs reports whether p is absolute and clean.
func cleanAbs(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p
}
