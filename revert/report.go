package revert

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"text/tabwriter"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/manifest"
)

// ReportSchemaVersion is the version of Report's JSON format.
const ReportSchemaVersion = 1

// Report is the result of Diff or DiffDerived.
type Report struct {
	SchemaVersion int               `json:"schemaVersion"`
	Base          manifest.ImageRef `json:"base"`
	Image         manifest.ImageRef `json:"image"`
	// Owned says where the owned paths come from.
	Owned Provenance `json:"owned"`
	// MachineConfigs are the MachineConfigs the owned paths were derived
	// from, when Owned is Derived.
	MachineConfigs []manifest.MachineConfig `json:"machineConfigs,omitempty"`
	Entries        []Entry                  `json:"entries"`
	Summary        Summary                  `json:"summary"`
}

// Provenance says where a report's owned paths come from.
type Provenance string

// Provenances.
const (
	// Recorded: an ownership manifest that mcbake recorded when it built
	// the image (embedded in it, or a copy in a file).
	Recorded Provenance = "manifest"
	// Derived: the image has no ownership manifest (it was built by
	// others); the owned paths are what the machine-config-daemon writes
	// for the given MachineConfigs on a node that runs the image, and the
	// image's defaults come from its own layers (docs/design.md, "Images
	// built by others").
	Derived Provenance = "derived"
)

// Diff predicts what a revert from the layered image whose manifest is m
// to the base, whose tree is tree, does to every owned path (see
// Predict), and summarises it.
func Diff(ctx context.Context, m *manifest.Manifest, image, base manifest.ImageRef, tree fstree.Tree) (*Report, error) {
	entries, err := Predict(ctx, m, tree)
	if err != nil {
		return nil, err
	}
	return &Report{SchemaVersion: ReportSchemaVersion, Base: base, Image: image, Owned: Recorded, Entries: entries, Summary: Summarize(entries)}, nil
}

// DiffDerived is Diff for a layered image without an ownership manifest
// (see PredictDerived): o is what the MachineConfigs own on a node that
// runs the image, layered the image's tree, tree the base's.
func DiffDerived(ctx context.Context, o Ownership, image, base manifest.ImageRef, layered, tree fstree.Tree) (*Report, error) {
	entries, err := PredictDerived(ctx, o, layered, tree)
	if err != nil {
		return nil, err
	}
	return &Report{SchemaVersion: ReportSchemaVersion, Base: base, Image: image, Owned: Derived, MachineConfigs: o.Manifest.MachineConfigs, Entries: entries, Summary: Summarize(entries)}, nil
}

// Clobbered returns the resolved paths the report marks clobbered, sorted.
func (r *Report) Clobbered() []string {
	var out []string
	for _, e := range r.Entries {
		if e.Clobbered {
			out = append(out, e.Path)
		}
	}
	sort.Strings(out)
	return out
}

// WriteJSON writes the report as indented JSON.
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// outcomeOrder is the order outcome groups are printed in: clobbers first.
var outcomeOrder = []Outcome{Removed, Reverted, Restored, Lost, Kept, Untouched, Dropped}

// TextOptions configure WriteText.
type TextOptions struct {
	// Color adds ANSI colours (only for terminals).
	Color bool
}

// WriteText writes a table grouped by outcome, clobbers first.
func (r *Report) WriteText(w io.Writer, opts TextOptions) error {
	color := opts.Color
	paint := func(code, s string) string {
		if !color {
			return s
		}
		return "\x1b[" + code + "m" + s + "\x1b[0m"
	}
	fmt.Fprintf(w, "revert %s -> base %s\n", orDash(r.Image.Reference), orDash(r.Base.Reference))
	if r.Owned == Derived {
		fmt.Fprintf(w, "the image has no mcbake manifest: owned paths derived from %d MachineConfig(s) rendered against the image, compared with the image's own defaults\n", len(r.MachineConfigs))
	}
	fmt.Fprintf(w, "%d owned paths, %s", r.Summary.Total, paint(clobberColor(r.Summary.Clobbered), fmt.Sprintf("%d clobbered", r.Summary.Clobbered)))
	for _, o := range outcomeOrder {
		if n := r.Summary.ByOutcome[o]; n > 0 {
			fmt.Fprintf(w, ", %d %s", n, o)
		}
	}
	fmt.Fprint(w, "\n")
	if n := managedCount(r.Entries); n > 0 {
		fmt.Fprintf(w, "%d managed by the certificate writer: the node keeps them up to date, nothing rewrites them\n", n)
	}
	fmt.Fprint(w, "\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	for _, o := range outcomeOrder {
		var group []Entry
		for _, e := range r.Entries {
			if e.Outcome == o {
				group = append(group, e)
			}
		}
		if len(group) == 0 {
			continue
		}
		head := fmt.Sprintf("%s (%d)", o, len(group))
		if o.Clobbers() {
			head = paint("1;31", head+" — clobbered")
		}
		fmt.Fprintln(tw, head)
		for _, e := range group {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s%s\n", e.Path, e.Type, e.Zone, baseText(e), e.Source.MachineConfig+" "+e.Source.Field, managedText(e))
		}
		fmt.Fprintln(tw)
	}
	return tw.Flush()
}

func clobberColor(n int) string {
	if n > 0 {
		return "1;31"
	}
	return "32"
}

func baseText(e Entry) string {
	s := "base " + string(e.Base)
	if e.Base == manifest.StateDiffers {
		s = fmt.Sprintf("base differs %v", e.Differs)
	}
	switch {
	case e.Image == nil:
	case e.Image.State == manifest.StateDiffers:
		s += fmt.Sprintf(", image differs %v", e.Image.Differs)
	default:
		s += ", image " + string(e.Image.State)
	}
	return s
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func managedCount(entries []Entry) int {
	n := 0
	for _, e := range entries {
		if e.Managed {
			n++
		}
	}
	return n
}

func managedText(e Entry) string {
	if e.Managed {
		return "\t(the certificate writer manages it: never rewritten)"
	}
	return ""
}
