// Package machineconfig reads, checks and merges MachineConfigs as the MCO does.
//
// It reads YAML or JSON (single objects, Lists and multi-document
// streams; Butane configs of the openshift variant; files, directories or
// stdin), parses their Ignition configs (spec 3.0 to 3.5, and spec 2
// converted as the MCO does), refuses what the machine-config-daemon
// cannot apply, and merges several MachineConfigs the way the Machine
// Config Operator does.
//
// Every problem is reported as a *FieldError that names the file, the
// MachineConfig and the JSON path of the field at fault; Load reports all
// of them at once (joined with errors.Join), not only the first.
package machineconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/mcbake/mcbake/internal/readall"

	yamlv2 "go.yaml.in/yaml/v2"
)

// Stdin is the file name that means standard input.
const Stdin = "-"

// Load reads every MachineConfig from the given files or directories ("-"
// reads stdin) and parses each. Directories contribute their *.yaml, *.yml,
// *.json and *.bu files, sorted by name, not recursing; a Butane config
// (by extension, or a top-level variant) is translated to the
// MachineConfig it makes. The result is sorted by
// MachineConfig name; two MachineConfigs with the same name are an error,
// and so is a set no single pool merges (see Pool) or the MCO would not
// merge (CheckMerge). It is LoadForPool with the pool inferred.
func Load(paths []string, stdin io.Reader) ([]*MachineConfig, error) {
	return LoadForPool(paths, stdin, "")
}

// LoadForPool is Load for the MachineConfigPool pool ("" = inferred from
// the role labels): the MachineConfigs are those ForPool returns.
func LoadForPool(paths []string, stdin io.Reader, pool string) ([]*MachineConfig, error) {
	return LoadWith(paths, stdin, LoadOptions{Pool: pool})
}

// LoadOptions configure LoadWith.
type LoadOptions struct {
	// Pool is the MachineConfigPool ("" = inferred, as LoadForPool infers
	// it).
	Pool string
	// CacheDir, when set, is a directory where loading remembers, by
	// digest, the Ignition configs that Ignition's parser accepted with
	// nothing to report, and decodes them without validating them again
	// the next time (under CacheDir/ignition). Failing to write there
	// only costs time.
	CacheDir string
	// Skipped, when set, is told of every object of another kind (a
	// KubeletConfig, a MachineConfigPool, ...; Reason ReasonOtherKind) in
	// a file found in a directory, which is skipped: a GitOps directory
	// holds them beside MachineConfigs. In a file named itself (or
	// stdin) such an object is an error.
	Skipped func(*FieldError)
}

// LoadWith is Load with options.
func LoadWith(paths []string, stdin io.Reader, o LoadOptions) ([]*MachineConfig, error) {
	srcs, err := ReadInputs(paths, stdin)
	if err != nil {
		return nil, err
	}
	cache := newValidCache(o.CacheDir)
	var mcs []*MachineConfig
	var errs []error
	for _, src := range srcs {
		got, err := parseStream(src.Name, src.Data, cache)
		mcs = append(mcs, got...)
		if src.InDirectory {
			err = SkipOtherKinds(err, o.Skipped)
		}
		if err != nil {
			errs = append(errs, err)
		}
	}
	if err := CheckDuplicateNames(mcs); err != nil {
		errs = append(errs, err)
	}
	if len(errs) == 0 {
		var err error
		if mcs, err = ForPool(mcs, o.Pool); err != nil {
			return nil, err
		}
		errs = append(errs, CheckMerge(mcs))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	if len(mcs) == 0 {
		return nil, fmt.Errorf("no MachineConfig found in %s", strings.Join(paths, ", "))
	}
	sort.SliceStable(mcs, func(i, j int) bool { return mcs[i].Name < mcs[j].Name })
	return mcs, nil
}

// Input is one input file as read: Name is its path ("<stdin>" for
// standard input); InDirectory says it was found in a directory given.
type Input struct {
	Name        string
	Data        []byte
	InDirectory bool
}

// SkipOtherKinds returns err without its FieldErrors of ReasonOtherKind,
// telling skipped (when set) of each.
func SkipOtherKinds(err error, skipped func(*FieldError)) error {
	if err == nil {
		return nil
	}
	var kept []error
	for _, e := range Errors(err) {
		var fe *FieldError
		if errors.As(e, &fe) && fe.Reason == ReasonOtherKind {
			if skipped != nil {
				skipped(fe)
			}
			continue
		}
		kept = append(kept, e)
	}
	return errors.Join(kept...)
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
	total := 0
	for _, f := range files {
		src, err := readSource(f.name, stdin, MaxInput-total)
		src.InDirectory = f.inDir
		if err != nil {
			errs = append(errs, err)
			if errors.Is(err, errTooLarge) {
				break
			}
			continue
		}
		total += len(src.Data)
		srcs = append(srcs, src)
	}
	return srcs, errors.Join(errs...)
}

// inputFile is a file to read, and whether a directory given held it.
type inputFile struct {
	name  string
	inDir bool
}

func expand(paths []string) ([]inputFile, error) {
	if len(paths) == 0 {
		return nil, errors.New("no MachineConfig given (a file, a directory, or - for stdin)")
	}
	var files []inputFile
	for _, p := range paths {
		if p == Stdin {
			files = append(files, inputFile{name: p})
			continue
		}
		fi, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !fi.IsDir() {
			files = append(files, inputFile{name: p})
			continue
		}
		found, err := configFiles(p)
		if err != nil {
			return nil, err
		}
		if len(found) == 0 {
			return nil, fmt.Errorf("%s: no *.yaml, *.yml, *.json or *.bu file in directory", p)
		}
		for _, f := range found {
			files = append(files, inputFile{name: f, inDir: true})
		}
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
		case ".yaml", ".yml", ".json", ButaneExt:
			if !e.IsDir() {
				files = append(files, filepath.Join(dir, e.Name()))
			}
		}
	}
	return files, nil
}

// MaxInput bounds the input files, together: MachineConfigs live in
// etcd, whose objects are at most about 1.5 MiB, and the memory a load
// takes grows with what it reads.
const MaxInput = 64 << 20

// errTooLarge is the error of an input past MaxInput.
var errTooLarge = fmt.Errorf("larger than %d MiB", MaxInput>>20)

// readSource reads one input of at most limit bytes (what MaxInput leaves
// after the inputs before it).
func readSource(name string, stdin io.Reader, limit int) (_ Input, err error) {
	in := Input{Name: name}
	var r io.Reader = stdin
	size := 0 // the expected size, when known
	if name != Stdin {
		f, err := os.Open(name)
		if err != nil {
			return Input{}, err
		}
		defer func() { err = errors.Join(err, f.Close()) }()
		r = f // a pipe too: -f <(oc get mc -o yaml)
		if st, err := f.Stat(); err == nil && st.Mode().IsRegular() {
			// A regular file's size is known: one too large is refused
			// unread, and one that fits is read into a buffer its size.
			if st.Size() > int64(limit) {
				return Input{}, tooLargeInput(in.Name, limit)
			}
			size = int(st.Size())
		}
	} else {
		in.Name = "<stdin>"
		if r == nil {
			r = os.Stdin
		}
	}
	if in.Data, err = readall.Sized(io.LimitReader(r, int64(limit)+1), size+1); err != nil {
		return Input{}, fmt.Errorf("reading %s: %w", in.Name, err)
	}
	if len(in.Data) > limit {
		return Input{}, tooLargeInput(in.Name, limit)
	}
	return in, nil
}

func tooLargeInput(name string, limit int) error {
	if limit < MaxInput {
		return fmt.Errorf("%s: the inputs are %w together, with the files before it: no pool's MachineConfigs are that large", name, errTooLarge)
	}
	return fmt.Errorf("%s: %w: no MachineConfig is that large", name, errTooLarge)
}

// Parse reads every MachineConfig in data, a YAML or JSON stream (single
// objects, List or MachineConfigList objects, multi-document YAML) read
// from file, which only names it in errors. It returns the MachineConfigs
// in stream order, including those with refusals, and every problem found
// (joined). Unlike Load it neither sorts nor checks names for duplicates.
func Parse(file string, data []byte) ([]*MachineConfig, error) {
	return parseStream(file, data, validCache{})
}

// parseStream decodes a YAML/JSON stream document by document, expands
// Lists, and parses every MachineConfig found; a Butane config is
// translated to its MachineConfig first.
func parseStream(file string, data []byte, cache validCache) ([]*MachineConfig, error) {
	// IsButane and Documents, with the JSON reading done once.
	docs, variant, ok := jsonDocuments(data)
	var err error
	var warnings []*FieldError // Butane's
	switch {
	case isButaneFile(file) || (!ok || variant) && hasVariant(data):
		if data, warnings, err = fromButane(file, data); err != nil {
			return nil, err
		}
		docs, err = Documents(data)
	case !ok:
		docs, err = yamlDocuments(data)
	}
	var mcs []*MachineConfig
	var errs []error
	for _, doc := range docs {
		objs, err := doc.objects()
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: document %d: %w", file, doc.Index, err))
			continue
		}
		for _, obj := range objs {
			mc, err := parseObject(file, obj, cache)
			if mc != nil {
				mc.Warnings = capWarnings(slices.Concat(warnings, mc.Warnings))
				mcs = append(mcs, mc)
			}
			if err != nil {
				errs = append(errs, err)
			}
		}
	}
	if err != nil {
		errs = append(errs, fmt.Errorf("%s: %w", file, err))
	}
	return mcs, errors.Join(errs...)
}

// Document is one document of a YAML stream, as JSON.
type Document struct {
	// Index counts the stream's documents from 1, empty ones included.
	Index int
	JSON  []byte
	// single is set when the document is known to be one object, not a
	// List (see single).
	single bool
}

// objects returns the document's objects (documentObjects).
func (d Document) objects() ([]json.RawMessage, error) {
	if d.single {
		return []json.RawMessage{d.JSON}, nil
	}
	return documentObjects(d.JSON)
}

// single reports whether documentObjects would return an object that
// jsonDocuments decoded (so no deeper than encoding/json decodes) as it
// is, telling by its keys rather than by decoding it again:
// its only key that encoding/json would read as kind (which matches
// names in any case) is "kind", a string that names no List, and none
// is read as items.
func single(obj map[string]any) bool {
	for k, v := range obj {
		switch {
		case strings.EqualFold(k, "items"):
			return false
		case strings.EqualFold(k, "kind"):
			kind, ok := v.(string)
			if k != "kind" || !ok || kind == "List" || kind == "MachineConfigList" {
				return false
			}
		}
	}
	return true
}

// Documents decodes a YAML stream (JSON is YAML) with a YAML parser, not
// by splitting lines: "--- # comment" and "--- {inline}" start documents,
// "..." ends one, a byte-order mark and CRLF line ends are read as YAML
// reads them, and documents that hold nothing (only comments) are
// dropped. Each document is converted to JSON exactly as
// sigs.k8s.io/yaml's YAMLToJSON converts it (YAML 1.1 scalars, as kubectl
// and oc read manifests: mode: 0644 is 420). A syntax error ends the
// stream: the documents before it are returned with the error, which
// names the document.
//
// A stream that starts with "{" and is a sequence of JSON objects is read
// as JSON, as kubectl and oc read it (jsonDocuments): the same documents,
// without a YAML parser's cost.
func Documents(data []byte) ([]Document, error) {
	if docs, _, ok := jsonDocuments(data); ok {
		return docs, nil
	}
	return yamlDocuments(data)
}

// yamlDocuments is Documents with a YAML parser, for any stream.
func yamlDocuments(data []byte) ([]Document, error) {
	dec := yamlv2.NewDecoder(bytes.NewReader(data))
	var docs []Document
	for i := 1; ; i++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, nil
		}
		if err != nil {
			return docs, fmt.Errorf("document %d: %w", i, err)
		}
		if v == nil {
			continue
		}
		obj, err := jsonable(v)
		if err != nil {
			return docs, fmt.Errorf("document %d: %w", i, err)
		}
		js, err := json.Marshal(obj)
		if err != nil {
			return docs, fmt.Errorf("document %d: %w", i, err)
		}
		docs = append(docs, Document{Index: i, JSON: js})
	}
}

// jsonDocuments reads a stream that starts with "{" as a sequence of JSON
// objects, one document each, the way Kubernetes' YAMLOrJSONDecoder reads
// it (docs/design.md, The warm path). Each is converted to the JSON the
// YAML reading makes of it: numbers become what YAML 1.1 resolves them to
// (yamlNumbers), keys are sorted, and encoding/json writes both. It
// reports false for anything else (not JSON, a scalar or array document,
// a syntax error), and Documents reads the stream as YAML, which reads
// every JSON object the same way: YAML is a superset of JSON. variant
// tells whether the first object has a top-level "variant", as a Butane
// config does.
func jsonDocuments(data []byte) (docs []Document, variant, ok bool) {
	if t := bytes.TrimLeft(data, " \t\r\n"); len(t) == 0 || t[0] != '{' || !plainJSON(data) {
		return nil, false, false
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	for i := 1; ; i++ {
		var v any
		err := dec.Decode(&v)
		if errors.Is(err, io.EOF) {
			return docs, variant, true
		}
		if err != nil {
			return nil, false, false
		}
		obj, isObj := v.(map[string]any)
		if !isObj {
			return nil, false, false
		}
		if i == 1 {
			_, variant = obj["variant"]
		}
		js, err := json.Marshal(yamlNumbers(obj))
		if err != nil {
			return nil, false, false
		}
		docs = append(docs, Document{Index: i, JSON: js, single: single(obj)})
	}
}

// plainJSON reports whether data holds only printable ASCII, tabs and line
// ends, and no \u escape of a UTF-16 surrogate. Such JSON means the same
// to any reader; the YAML reading folds raw NEL, U+2028 and U+2029 in
// quoted strings and refuses invalid UTF-8, other control characters and
// surrogate escapes, which JSON keeps, replaces or combines, so input with
// them goes to the YAML reading, as before.
func plainJSON(data []byte) bool {
	for i, c := range data {
		switch {
		case c >= 0x20 && c < 0x7f:
			if c == '\\' && i+3 < len(data) && data[i+1] == 'u' && data[i+2]|0x20 == 'd' &&
				strings.IndexByte("89abcdefABCDEF", data[i+3]) >= 0 {
				return false
			}
		case c == '\t' || c == '\n' || c == '\r':
		default:
			return false
		}
	}
	return true
}

// yamlNumbers replaces the numbers of a value decoded with UseNumber by
// what yaml.v2 resolves the same plain scalars to: an int, a uint64 past
// int64, a float64, or the string itself when it overflows a float64.
func yamlNumbers(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, val := range t {
			t[k] = yamlNumbers(val)
		}
	case []any:
		for i, val := range t {
			t[i] = yamlNumbers(val)
		}
	case json.Number:
		s := string(t)
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			return int(i)
		}
		if u, err := strconv.ParseUint(s, 0, 64); err == nil {
			return u
		}
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f
		}
		return s
	}
	return v
}

// jsonable converts a value decoded by yaml.v2 to one encoding/json
// encodes: map keys become strings, as sigs.k8s.io/yaml's YAMLToJSON
// turns them (without a target type).
func jsonable(v any) (any, error) {
	switch t := v.(type) {
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, val := range t {
			ks, err := keyString(k)
			if err != nil {
				return nil, err
			}
			if m[ks], err = jsonable(val); err != nil {
				return nil, err
			}
		}
		return m, nil
	case []any:
		out := make([]any, len(t))
		for i, val := range t {
			var err error
			if out[i], err = jsonable(val); err != nil {
				return nil, err
			}
		}
		return out, nil
	}
	return v, nil
}

func keyString(k any) (string, error) {
	switch t := k.(type) {
	case string:
		return t, nil
	case int:
		return strconv.Itoa(t), nil
	case int64:
		return strconv.FormatInt(t, 10), nil
	case float64:
		s := strconv.FormatFloat(t, 'g', -1, 32)
		switch s {
		case "+Inf":
			s = ".inf"
		case "-Inf":
			s = "-.inf"
		case "NaN":
			s = ".nan"
		}
		return s, nil
	case bool:
		return strconv.FormatBool(t), nil
	}
	return "", fmt.Errorf("unsupported map key of type %T: %v", k, k)
}

// documentObjects expands a List or MachineConfigList document into its
// items.
func documentObjects(js []byte) ([]json.RawMessage, error) {
	var head struct {
		Kind  string            `json:"kind"`
		Items []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal(js, &head); err != nil {
		return nil, fmt.Errorf("not an object: %w", err)
	}
	switch head.Kind {
	case "List", "MachineConfigList":
		for i, item := range head.Items {
			if t := bytes.TrimLeft(item, " \t\r\n"); len(t) == 0 || t[0] != '{' {
				return nil, fmt.Errorf("items[%d]: not an object: %.40s", i, item)
			}
		}
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
