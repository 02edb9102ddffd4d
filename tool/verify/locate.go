package verify

import (
	"bytes"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/mcbake/mcbake/machineconfig"
)

// locator finds the line of a MachineConfig field in the file it came
// from. Files are parsed again as YAML node trees (JSON is YAML), which
// keep line numbers; objects are found by metadata.name, inside List and
// MachineConfigList items and across YAML documents.
//
// The line is that of the deepest part of the field's JSON path that the
// file has: the key of a mapping entry, the start of a sequence item, or
// for an item selected by name (systemd.units[NAME]) the line of its name.
// A field the file does not spell out (an Ignition 3.0 config translated to
// 3.5, a default) gets the line of its nearest written ancestor.
//
// A Butane config is its own object (found by its metadata.name); a field
// of the MachineConfig it makes is looked up where Butane writes it (see
// machineconfig.ButaneField).
type locator struct {
	objects map[string]map[string]*yaml.Node // file -> MachineConfig -> object
	butane  map[string]bool                  // files that are Butane configs
}

func newLocator(sources []machineconfig.Input) *locator {
	l := &locator{objects: map[string]map[string]*yaml.Node{}, butane: map[string]bool{}}
	for _, s := range sources {
		l.butane[s.Name] = machineconfig.IsButane(s.Name, s.Data)
		byName := map[string]*yaml.Node{}
		dec := yaml.NewDecoder(bytes.NewReader(s.Data))
		for {
			var doc yaml.Node
			if err := dec.Decode(&doc); err != nil {
				break // io.EOF, or a syntax error the loader already reported
			}
			for _, n := range doc.Content {
				addObjects(n, byName)
			}
		}
		l.objects[s.Name] = byName
	}
	return l
}

// addObjects indexes a MachineConfig object, or the items of a List.
func addObjects(n *yaml.Node, into map[string]*yaml.Node) {
	if n.Kind != yaml.MappingNode {
		return
	}
	if k, _ := lookupKey(n, "kind"); k != nil && (k.Value == "List" || k.Value == "MachineConfigList") {
		if items, _ := lookupKey(n, "items"); items != nil {
			for _, it := range items.Content {
				addObjects(it, into)
			}
		}
		return
	}
	meta, _ := lookupKey(n, "metadata")
	if meta == nil {
		return
	}
	if name, _ := lookupKey(meta, "name"); name != nil {
		if _, dup := into[name.Value]; !dup {
			into[name.Value] = n
		}
	}
}

// lookupKey returns the value of key in a mapping node, and the key node.
func lookupKey(n *yaml.Node, key string) (value, keyNode *yaml.Node) {
	if n == nil || n.Kind != yaml.MappingNode {
		return nil, nil
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		if n.Content[i].Value == key {
			return n.Content[i+1], n.Content[i]
		}
	}
	return nil, nil
}

// line returns the line of field in MachineConfig mc of file, 0 when the
// file or MachineConfig is unknown. An empty field means the object
// itself: the line of its metadata.name.
func (l *locator) line(file, mc, field string) int {
	obj := l.objects[file][mc]
	if obj == nil {
		return 0
	}
	if field == "" {
		field = "metadata.name"
	}
	if l.butane[file] {
		field = machineconfig.ButaneField(field)
	}
	cur, line := obj, obj.Line
	for _, s := range parseField(field) {
		next, at := step(cur, s)
		if next == nil {
			break
		}
		cur, line = next, at
	}
	return line
}

// segment is one step of a field path: a key, an index, or a name
// selector (units[kubelet.service]).
type segment struct {
	key   string
	index int // -1 unless an index
	name  string
}

// parseField splits spec.config.systemd.units[a.service].dropins[0] into
// segments.
func parseField(f string) []segment {
	var segs []segment
	for len(f) > 0 {
		switch f[0] {
		case '.':
			f = f[1:]
		case '[':
			end := strings.IndexByte(f, ']')
			if end < 0 {
				return segs
			}
			inner := f[1:end]
			if n, err := strconv.Atoi(inner); err == nil && n >= 0 {
				segs = append(segs, segment{index: n})
			} else {
				segs = append(segs, segment{index: -1, name: inner})
			}
			f = f[end+1:]
		default:
			end := strings.IndexAny(f, ".[")
			if end < 0 {
				end = len(f)
			}
			segs = append(segs, segment{key: f[:end], index: -1})
			f = f[end:]
		}
	}
	return segs
}

// step follows one segment; it returns the node reached and its line.
func step(n *yaml.Node, s segment) (*yaml.Node, int) {
	switch {
	case s.key != "":
		v, k := lookupKey(n, s.key)
		if v == nil {
			return nil, 0
		}
		return v, k.Line
	case n.Kind != yaml.SequenceNode:
		return nil, 0
	case s.index >= 0:
		if s.index >= len(n.Content) {
			return nil, 0
		}
		return n.Content[s.index], n.Content[s.index].Line
	}
	for _, it := range n.Content {
		if v, _ := lookupKey(it, "name"); v != nil && v.Value == s.name {
			return it, v.Line
		}
	}
	return nil, 0
}
