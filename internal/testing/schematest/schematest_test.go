package schematest

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestSchemasCompile: every schema in docs/schema compiles, its $id is
// its file's, and the names the package comment lists are there.
func TestSchemasCompile(t *testing.T) {
	schemas, err := compiled()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"defs", "manifest", "plan", "diff", "verify-report", "ondisk", "rewrite", "finalized", "check", "record", "record-file", "guard"} {
		if schemas[name] == nil {
			t.Errorf("no schema %s in %s", name, Dir())
		}
	}
	files, _ := filepath.Glob(filepath.Join(Dir(), "*.schema.json"))
	if len(files) != len(schemas) {
		t.Errorf("%d schema files, %d compiled", len(files), len(schemas))
	}
}

func TestCheckUnknownSchema(t *testing.T) {
	if err := Check("nonesuch", []byte(`{}`)); err == nil || !strings.Contains(err.Error(), "no schema") {
		t.Errorf(`Check("nonesuch") = %v, want "no schema"`, err)
	}
}
