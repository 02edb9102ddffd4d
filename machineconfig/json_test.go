package machineconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	"gopkg.in/yaml.v3"
)

// jsonStreams are JSON inputs on the edges of the YAML reading: number
// forms, escapes, duplicate keys, a merge key, streams of several objects.
var jsonStreams = []string{
	`{}`,
	`{"a":1,"b":-0,"c":1.0,"d":-0.0,"e":1e3,"f":1E-3,"g":0.1,"h":12345678901234567890,"i":-9223372036854775809,"j":1e400,"k":9223372036854775807}`,
	`{"s":"\"\\\b\f\n\r\t\u00e9\u0000\u003c&>", "t":true, "f":false, "n":null, "a":[], "o":{}}`,
	`{"s":"a\/b"}`,
	`{"a":1,"a":2}`,
	`{"a":{"x":1},"a":[1]}`,
	`{"<<":{"a":1},"b":2}`,
	"{\"a\":1}\n{\"b\":2}\n",
	"\r\n  {\r\n  \"kind\" : \"MachineConfig\" ,\r\n  \"spec\" : { \"config\" : { \"ignition\" : { \"version\" : \"3.5.0\" } } }\r\n}\r\n",
	`{"yes":"no","on":"off","~":"null","0644":0644}`,
	`{"mode":420,"modes":[0,1,-1,0.5]}`,
	`{"variant":"openshift","version":"4.19.0"}`,
	`{"a":"` + string(make([]byte, 0)) + `"}`,
	`{"k":"\ud83d\ude00"}`,
	`[{"a":1}]`,
	`{"a":1} [1]`,
	`{"a":1} ---`,
	// What a List is, as encoding/json reads its kind and items.
	`{"kind":"List","items":[{"kind":"MachineConfig"},{}]}`, `{"kind":"MachineConfigList","items":null}`,
	`{"Kind":"List","items":[{"a":1}]}`, `{"KIND":"MachineConfigList","Items":[{}]}`, `{"kind":"MachineConfig","items":5}`,
	`{"kind":"MachineConfig","ITEMS":[]}`, `{"kind":5}`, `{"kind":null}`, `{"kind":"MachineConfig","Kind":"List"}`,
	`{"kind":"List"}`, `{"kinds":"List","item":[]}`,
	// Not plain JSON: read as YAML, which folds or refuses these.
	"{\"a\":\"x\u0085y\"}", "{\"a\":\"x\u2028  y\"}", "{\"a\":\"x  \u2029y\"}", "{\"a\":\"\xff\"}",
	"{\"a\":\"\x7f\"}", `{"a":"\ud800"}`, `{"a":"\uDE00"}`,
	// Plain JSON go-yaml v2 refuses: read as JSON.
	"{\"a\"\n:1}", "\t{}", "{\n\t\"a\": 1\n}", `{"` + strings.Repeat("k", 1100) + `":1}`,
}

// TestJSONDocumentsAsYAML checks that whatever the JSON reading reads, the
// YAML reading reads the same (or refuses, where only Kubernetes' JSON
// reading accepts: surrogate escapes, say), for the edge cases above and
// for every rendered MachineConfig in testdata.
func TestJSONDocumentsAsYAML(t *testing.T) {
	inputs := append([]string(nil), jsonStreams...)
	files, err := filepath.Glob(filepath.Join("..", "testdata", "machineconfigs", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no fixtures: %v", err)
	}
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		inputs = append(inputs, string(b))
		// A rendered MachineConfig is read once, not again for its kind.
		if docs, _, ok := jsonDocuments(b); !ok || len(docs) != 1 || !docs[0].single {
			t.Errorf("%s: read as JSON %v, %d documents; want one known to be a single object", f, ok, len(docs))
		}
	}
	read := 0
	for _, in := range inputs {
		if checkJSONAsYAML(t, []byte(in)) {
			read++
		}
	}
	if read < len(files)+8 {
		t.Fatalf("the JSON reading read %d of %d inputs; want at least %d", read, len(inputs), len(files)+8)
	}
}

// checkJSONAsYAML compares both readings of data and reports whether the
// JSON one read it. What both read, they read alike. What only the JSON
// reading reads is plain ASCII JSON that go-yaml v2 refuses (a \/ escape,
// objects one after another, a tab before a line's first token, a key on
// another line than its colon or longer than 1024 characters): JSON
// whose meaning no reader disputes, read as kubectl reads it.
func checkJSONAsYAML(t *testing.T, data []byte) bool {
	t.Helper()
	docs, variant, ok := jsonDocuments(data)
	if !ok {
		return false
	}
	if !plainJSON(data) {
		t.Fatalf("%.60q: read as JSON, but not plain JSON", data)
	}
	want, err := yamlDocuments(data)
	if err != nil && len(want) < len(docs) {
		docs = docs[:len(want)] // the documents before YAML's error
	}
	if !slices.EqualFunc(want, docs, func(a, b Document) bool {
		return a.Index == b.Index && bytes.Equal(a.JSON, b.JSON)
	}) {
		if diff := cmp.Diff(want, docs, cmpopts.IgnoreUnexported(Document{})); diff != "" {
			t.Fatalf("%.60q: the JSON and YAML readings differ (-yaml +json):\n%s", data, diff)
		}
	}
	checkObjects(t, data, docs)
	var h butaneHead
	if !variant && yaml.Unmarshal(data, &h) == nil && h.Variant != "" {
		t.Fatalf("%.60q: no variant read as JSON, variant %q read as YAML", data, h.Variant)
	}
	return true
}

// checkObjects checks that a document's objects are what documentObjects
// makes of its JSON, error included, whether or not it is known to be a
// single object.
func checkObjects(t *testing.T, data []byte, docs []Document) {
	t.Helper()
	for _, d := range docs {
		got, gotErr := d.objects()
		want, wantErr := documentObjects(d.JSON)
		if fmt.Sprint(gotErr) != fmt.Sprint(wantErr) || !slices.EqualFunc(got, want, func(a, b json.RawMessage) bool { return bytes.Equal(a, b) }) {
			t.Fatalf("%.60q: document %d (single %v): objects() = %d, %v; documentObjects() = %d, %v", data, d.Index, d.single, len(got), gotErr, len(want), wantErr)
		}
	}
}

// FuzzJSONDocuments checks checkJSONAsYAML on arbitrary bytes.
func FuzzJSONDocuments(f *testing.F) {
	for _, s := range jsonStreams {
		f.Add([]byte(s))
	}
	f.Add([]byte(mcJSON("00-a", ign("3.5.0", `"storage":{"files":[{"path":"/etc/a","mode":420,"contents":{"source":"data:,a"}}]}`))))
	f.Fuzz(func(t *testing.T, data []byte) { checkJSONAsYAML(t, data) })
}
