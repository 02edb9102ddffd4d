// Package machineconfig reads MachineConfigs (YAML or JSON; single objects,
// Lists and multi-document streams; files, directories or stdin), parses
// their Ignition configs (spec 3.0 to 3.5), refuses what the
// machine-config-daemon cannot apply, and merges several MachineConfigs the
// way the Machine Config Operator does.
//
// Every problem is reported as a *FieldError that names the file, the
// MachineConfig and the JSON path of the field at fault; Load reports all
// of them at once (joined with errors.Join), not only the first.
package machineconfig

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"sigs.k8s.io/yaml"
)

// Stdin is the file name that means standard input.
const Stdin = "-"

// Load reads every MachineConfig from the given files or directories ("-"
// reads stdin) and parses each. Directories contribute their *.yaml, *.yml
// and *.json files, sorted by name, not recursing. The result is sorted by
// MachineConfig name; two MachineConfigs with the same name are an error.
func Load(paths []string, stdin io.Reader) ([]*MachineConfig, error) {
	srcs, err := ReadInputs(paths, stdin)
	if err != nil {
		return nil, err
	}
	var mcs []*MachineConfig
	var errs []error
	for _, src := range srcs {
		got, err := parseStream(src.Name, src.Data)
		mcs = append(mcs, got...)
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := CheckDuplicateNames(mcs); err != nil {
		errs = append(errs, err)
	}
	if len(errs) > 0 {
		return nil, errors.Join(errs...)
	}
	if len(mcs) == 0 {
		return nil, fmt.Errorf("no MachineConfig found in %s", strings.Join(paths, ", "))
	}
	sort.SliceStable(mcs, func(i, j int) bool { return mcs[i].Name < mcs[j].Name })
	return mcs, nil
}

// Input is one input file as read: Name is its path ("<stdin>" for
// standard input).
type Input struct {
	Name string
	Data []byte
}

// ReadInputs reads the files the paths name: files as they are,
// directories' *.yaml, *.yml and *.json files (sorted, not recursing), and
// "-" as stdin (os.Stdin when stdin is nil). Every unreadable file is
// reported.
func ReadInputs(paths []string, stdin io.Reader) ([]Input, error) {
	files, err := expand(paths)
	if err != nil {
		return nil, err
	}
	var srcs []Input
	var errs []error
	for _, f := range files {
		src, err := readSource(f, stdin)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		srcs = append(srcs, src)
	}
	return srcs, errors.Join(errs...)
}

func expand(paths []string) ([]string, error) {
	if len(paths) == 0 {
		return nil, errors.New("no MachineConfig given (a file, a directory, or - for stdin)")
	}
	var files []string
	for _, p := range paths {
		if p == Stdin {
			files = append(files, p)
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, p)
			continue
		}
		found, err := configFiles(p)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no *.yaml, *.yml or *.json file in directory", p)
		}
		files = append(files, found...)
	}
	return files, nil
}

func configFiles(dir string) ([]string, error) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var files []string
	for _, e := range ents {
		switch strings.ToLower(filepath.Ext(e.Name())) {
		case ".yaml", ".yml", ".json":
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	return files, nil
}

// MaxInput bounds one input file: MachineConfigs live in etcd, whose
// objects are at most about 1.5 MiB.
const MaxInput = 64 << 20

func readSource(name string, stdin io.Reader) (_ Input, err error) {
	in := Input{Name: name}
	var r io.Reader = stdin
	if name != Stdin {
		f, err := os.Open(name)
		if err != nil {
			return Input{}, err
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		r = f // a pipe too: -f <(oc get mc -o yaml)
	} else {
		in.Name = "<stdin>"
		if r == nil {
			r = os.Stdin
		}
	}
	if in.Data, err = io.ReadAll(io.LimitReader(r, MaxInput+1)); err != nil {
		return Input{}, fmt.Errorf("reading %s: %w", in.Name, err)
	}
	if len(in.Data) > MaxInput {
		return Input{}, fmt.Errorf("%s: larger than %d MiB: no MachineConfig is that large", in.Name, MaxInput>>20)
	}
	return in, nil
}

// Parse reads every MachineConfig in data, a YAML or JSON stream (single
// objects, List or MachineConfigList objects, multi-document YAML) read
// from file, which only names it in errors. It returns the MachineConfigs
// in stream order, including those with refusals, and every problem found
// (joined). Unlike Load it neither sorts nor checks names for duplicates.
func Parse(file string, data []byte) ([]*MachineConfig, error) {
	return parseStream(file, data)
}

// parseStream splits a YAML/JSON stream into documents, expands Lists, and
// parses every MachineConfig found.
func parseStream(file string, data []byte) ([]*MachineConfig, error) {
	var mcs []*MachineConfig
	var errs []error
	for i, doc := range splitDocuments(data) {
		objs, err := documentObjects(doc)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", file, i+1, err))
			continue
		}
		for _, obj := range objs {
			mc, err := parseObject(file, obj)
			if mc != nil {
				mcs = append(mcs, mc)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	return mcs, errors.Join(errs...)
}

// splitDocuments splits a multi-document YAML stream at "---" separator
// lines, dropping documents that hold only whitespace and comments.
func splitDocuments(data []byte) [][]byte {
	var docs [][]byte
	var cur bytes.Buffer
	flush := func() {
		if hasContent(cur.Bytes()) {
			docs = append(docs, bytes.Clone(cur.Bytes()))
		}
		cur.Reset()
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 64*1024), len(data)+1)
	for sc.Scan() {
		line := sc.Bytes()
		if bytes.HasPrefix(line, []byte("---")) && len(bytes.TrimSpace(line[3:])) == 0 {
			flush()
			continue
		}
		cur.Write(line)
		cur.WriteByte('\n')
	}
	flush()
	return docs
}

func hasContent(doc []byte) bool {
	for _, line := range bytes.Split(doc, []byte("\n")) {
		t := bytes.TrimSpace(line)
		if len(t) > 0 && t[0] != '#' {
			return true
		}
	}
	return false
}

// documentObjects converts one document to JSON and expands a List or
// MachineConfigList into its items.
func documentObjects(doc []byte) ([]json.RawMessage, error) {
	js, err := yaml.YAMLToJSON(doc)
	if err != nil {
		return nil, err
	}
	var head struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	switch head.Kind {
	case "List", "MachineConfigList":
		return head.Items, nil
	}
	return []json.RawMessage{js}, nil
}

// CheckDuplicateNames reports every MachineConfig whose name an earlier
// one already has.
func CheckDuplicateNames(mcs []*MachineConfig) error {
	seen := map[string]*MachineConfig{}
	var errs []error
	for _, mc := range mcs {
		if prev, ok := seen[mc.Name]; ok {
			errs = append(errs, fmt.Errorf("%s: %s: metadata.name: MachineConfig name already defined in %s", mc.File, mc.Name, prev.File))
			continue
		}
		seen[mc.Name] = mc
	}
	return errors.Join(errs...)
}
