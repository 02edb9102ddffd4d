package verify

import (
	"fmt"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const rulesDoc = "../../docs/rules.md"

// TestRulesDoc checks that docs/rules.md is what RulesMarkdown generates;
// -update (go generate ./verify) rewrites it.
func TestRulesDoc(t *testing.T) {
	want := RulesMarkdown()
	if *update {
		if err := os.WriteFile(rulesDoc, want, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(rulesDoc)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(string(want), string(got)); diff != "" {
		t.Errorf("%s is stale; run go generate ./verify (-generated +file):\n%s", rulesDoc, diff)
	}
}

// TestRuleTable checks the rules themselves: IDs in sequence and unique,
// names unique slugs, every text present, one paragraph, a valid
// severity, and LookupRule by ID and name.
func TestRuleTable(t *testing.T) {
	slug := regexp.MustCompile(`^[a-z][a-z-]*[a-z]$`)
	names := map[string]bool{}
	for i, r := range Rules() {
		if want := "MCB" + leftPad(i+1); r.ID != want {
			t.Errorf("rule %d has ID %s, want %s", i, r.ID, want)
		}
		if !slug.MatchString(r.Name) || names[r.Name] {
			t.Errorf("rule %s: name %q is not a unique slug", r.ID, r.Name)
		}
		names[r.Name] = true
		if r.Severity.rank() == 0 {
			t.Errorf("rule %s: severity %q", r.ID, r.Severity)
		}
		for what, s := range map[string]string{"summary": r.Summary, "description": r.Description, "fix": r.Fix} {
			if strings.TrimSpace(s) == "" || strings.Contains(s, "\n") {
				t.Errorf("rule %s: %s is empty or not one paragraph", r.ID, what)
			}
		}
		for _, key := range []string{r.ID, strings.ToLower(r.ID), r.Name} {
			if got, ok := LookupRule(key); !ok || got.ID != r.ID {
				t.Errorf("LookupRule(%q) = %s, %v", key, got.ID, ok)
			}
		}
	}
	if _, ok := LookupRule("MCB999"); ok {
		t.Error("LookupRule(MCB999) found a rule")
	}
}

func leftPad(n int) string { return fmt.Sprintf("%03d", n) }
