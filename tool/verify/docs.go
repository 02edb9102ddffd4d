package verify

//go:generate go test -tags "containers_image_openpgp exclude_graphdriver_btrfs" -run ^TestRulesDoc$ . -update

import (
	"bytes"
	"fmt"
	"strings"
)

// RulesMarkdown returns docs/rules.md: the rule table and one section per
// rule, generated from the rules themselves.
func RulesMarkdown() []byte {
	var b bytes.Buffer
	b.WriteString("# mcbake verify rules\n\n")
	b.WriteString("<!-- Generated from verify/rules.go by `go generate ./verify`; a test checks it is current. Do not edit. -->\n\n")
	b.WriteString("`mcbake verify` checks these rules (`mcbake verify --list-rules` prints the table). IDs are stable: a rule is never renumbered, " +
		"and a retired rule's ID is not reused. `--disable ID|NAME` turns a rule off; `--fail-on` chooses the severity that fails the run. " +
		"Rules that need `--base` or `--image` are reported as not run without them. See [verify.md](verify.md) for the command, its outputs and exit codes.\n\n")
	b.WriteString("| ID | name | severity | needs | what |\n|---|---|---|---|---|\n")
	for _, r := range rules {
		fmt.Fprintf(&b, "| [%s](#%s) | %s | %s | %s | %s |\n", r.ID, strings.ToLower(r.ID), r.Name, r.Severity, needsDoc(r.Needs), r.Summary)
	}
	for _, r := range rules {
		fmt.Fprintf(&b, "\n## %s\n\n", r.ID)
		fmt.Fprintf(&b, "**%s** · default severity **%s** · needs %s\n\n", r.Name, r.Severity, needsDoc(r.Needs))
		fmt.Fprintf(&b, "%s\n\n", r.Description)
		fmt.Fprintf(&b, "**Fix:** %s\n", r.Fix)
	}
	return b.Bytes()
}

func needsDoc(n Needs) string {
	if n == NeedsNothing {
		return "MachineConfigs only"
	}
	return "`" + strings.ReplaceAll(n.text(), " and ", "` and `") + "`"
}
