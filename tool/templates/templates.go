// Package templates holds the text templates mcbake renders for other tools.
//
// They are embedded in the binary: the Containerfile that the buildah
// engine builds and that `mcbake build --render-only` hands to external
// builders, and (NodeUnits) the systemd units of the node flow. Every
// *.tmpl file of this directory is a template, named by its file name;
// Execute renders one with text/template. Data is prepared (and quoted)
// by the caller: the templates only lay it out.
package templates

import (
	"embed"
	"fmt"
	"io"
	"text/template"
)

// Template names.
const (
	// Containerfile lays out a build: FROM the base, COPY of the rendered
	// tree, ownership fix-ups, the ownership manifest, removals, LABELs
	// and the user's extra instructions. Its data is a ContainerfileData.
	Containerfile = "Containerfile.tmpl"
)

//go:embed *.tmpl
var files embed.FS

// NodeUnits holds the node flow's systemd units (node/*.service), to be
// installed in /etc/systemd/system and enabled (docs/node.md):
// mcbake-revert-finalized.service, the shutdown safety net, and
// mcbake-revert-check.service, the first-boot check.
//
//go:embed node/*.service
var NodeUnits embed.FS

var parsed = template.Must(template.New("").Option("missingkey=error").ParseFS(files, "*.tmpl"))

// Execute renders the template called name with data to w.
func Execute(w io.Writer, name string, data any) error {
	t := parsed.Lookup(name)
	if t == nil {
		return fmt.Errorf("no template %q", name)
	}
	if err := t.Execute(w, data); err != nil {
		return fmt.Errorf("rendering %s: %w", name, err)
	}
	return nil
}

// ContainerfileData is the data of the Containerfile template. Every
// string is written as it is: the caller quotes it for the Containerfile.
type ContainerfileData struct {
	// Header is comment text (without "# ") put at the top, one line each.
	Header []string
	// From is the base image reference of the FROM line.
	From string
	// Rootfs is the context directory COPY'd to "/" (with a trailing slash).
	Rootfs string
	// Chowns are COPY instructions, after the tree's, that give paths
	// their owner (COPY makes everything root's).
	Chowns []Copy
	// Manifest is the COPY of the ownership manifest; nil for a build
	// that adds only the revert guard.
	Manifest *Copy
	// Remove, when not empty, is the JSON exec form of the RUN that removes
	// the paths the build owns as absent.
	Remove string
	// Labels are LABEL key=value pairs, quoted.
	Labels []Label
	// Append is the user's extra instructions, written verbatim last.
	Append string
}

// Copy is one COPY instruction.
type Copy struct {
	// Comment, when set, is a comment line (without "# ") put above it.
	Comment string
	// Flags are "--chown=..." and the like.
	Flags []string
	// Args is the source and destination: either "SRC DEST" or the JSON
	// form.
	Args string
}

// Label is one LABEL pair, both parts already quoted.
type Label struct{ Key, Value string }
