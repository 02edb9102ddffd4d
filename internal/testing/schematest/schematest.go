// Package schematest checks JSON documents against docs/schema, for tests.
//
// The documents are what mcbake and mcbake-node write; their JSON
// Schemas (draft 2020-12) are in docs/schema.
//
// Each schema is named by its file without .schema.json: manifest, plan,
// diff, verify-report, ondisk, rewrite, finalized, check, record,
// record-file and guard (docs/usage.md, "JSON documents").
package schematest

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// base is the $id prefix of every schema in docs/schema.
const base = "https://github.com/mcbake/mcbake/docs/schema/"

var compiled = sync.OnceValues(compileAll)

// Dir is docs/schema of the source tree this package was built from.
func Dir() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "docs", "schema")
}

// compileAll compiles every schema in Dir, keyed by name.
func compileAll() (map[string]*jsonschema.Schema, error) {
	files, err := filepath.Glob(filepath.Join(Dir(), "*.schema.json"))
	if err != nil || len(files) == 0 {
		return nil, fmt.Errorf("no schemas in %s (%v)", Dir(), err)
	}
	c := jsonschema.NewCompiler()
	c.AssertFormat()
	for _, f := range files {
		if err := addResource(c, f); err != nil {
			return nil, err
		}
	}
	out := map[string]*jsonschema.Schema{}
	for _, f := range files {
		name := strings.TrimSuffix(filepath.Base(f), ".schema.json")
		if out[name], err = c.Compile(base + filepath.Base(f)); err != nil {
			return nil, fmt.Errorf("compiling %s: %w", f, err)
		}
	}
	return out, nil
}

// addResource adds the schema in file under its URL (base + its name),
// which must be its $id.
func addResource(c *jsonschema.Compiler, file string) error {
	b, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	doc, err := jsonschema.UnmarshalJSON(bytes.NewReader(b))
	if err != nil {
		return fmt.Errorf("%s: %w", file, err)
	}
	url := base + filepath.Base(file)
	if m, ok := doc.(map[string]any); !ok || m["$id"] != url {
		return fmt.Errorf("%s: $id must be %s", file, url)
	}
	return c.AddResource(url, doc)
}

// Check validates doc against the schema called name.
func Check(name string, doc []byte) error {
	schemas, err := compiled()
	if err != nil {
		return err
	}
	sch, ok := schemas[name]
	if !ok {
		return fmt.Errorf("no schema %q in %s", name, Dir())
	}
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("decoding the document: %w", err)
	}
	return sch.Validate(inst)
}

// Validate fails t unless doc is valid under the schema called name.
func Validate(t testing.TB, name string, doc []byte) {
	t.Helper()
	if err := Check(name, doc); err != nil {
		t.Errorf("the %s document does not follow docs/schema/%s.schema.json: %v\n%s", name, name, err, clip(doc))
	}
}

// Invalid fails t unless doc, valid under the schema called name, is
// not once edit changed it: it shows the schema catches what edit breaks
// (a wrong type, a missing required field). edit gets doc decoded.
func Invalid(t testing.TB, name string, doc []byte, what string, edit func(doc any)) {
	t.Helper()
	var v any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatal(err)
	}
	edit(v)
	bad, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	if Check(name, bad) == nil {
		t.Errorf("a %s document with %s follows docs/schema/%s.schema.json; want it refused", name, what, name)
	}
}

// Object returns the JSON object at path in v (object keys, or array
// indexes as ints), for Invalid's edits; it panics when there is none,
// which fails the test.
func Object(v any, path ...any) map[string]any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			v = v.(map[string]any)[k]
		case int:
			v = v.([]any)[k]
		}
	}
	return v.(map[string]any)
}

func clip(b []byte) []byte {
	if len(b) > 4000 {
		return append(b[:4000:4000], "..."...)
	}
	return b
}
