// Command benchdoc puts make bench's report into docs/benchmarks.md.
//
// The report goes between the document's begin and end markers:
//
//	go run ./hack/benchdoc docs/benchmarks.md _bench/report.txt
//
// The rest of the document, what the figures mean and how they moved, is
// written by people.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/google/renameio/v2"
)

// The markers around the generated section.
const (
	Begin = "<!-- make bench: begin (generated: hack/bench.sh writes what is between these lines) -->"
	End   = "<!-- make bench: end -->"
)

// Replace returns doc with what lies between Begin and End replaced by
// report, in a fenced block; header (the commit, the date, the machine)
// goes above it. doc must hold each marker once, Begin first.
func Replace(doc []byte, header string, report []byte) ([]byte, error) {
	b, e := bytes.Index(doc, []byte(Begin)), bytes.Index(doc, []byte(End))
	switch {
	case b < 0 || e < 0:
		return nil, fmt.Errorf("no %q ... %q section", Begin, End)
	case e < b:
		return nil, errors.New("the end marker comes before the begin marker")
	case bytes.Count(doc, []byte(Begin)) > 1 || bytes.Count(doc, []byte(End)) > 1:
		return nil, errors.New("a marker appears more than once")
	}
	var out bytes.Buffer
	out.Write(doc[:b+len(Begin)])
	out.WriteString("\n\n" + header + "\n\n```\n")
	out.Write(bytes.TrimRight(report, "\n"))
	out.WriteString("\n```\n\n")
	out.Write(doc[e:])
	return out.Bytes(), nil
}

func run(docFile, reportFile, header string) error {
	doc, err := os.ReadFile(docFile)
	if err != nil {
		return err
	}
	report, err := os.ReadFile(reportFile)
	if err != nil {
		return err
	}
	if len(bytes.TrimSpace(report)) == 0 {
		return fmt.Errorf("%s is empty", reportFile)
	}
	out, err := Replace(doc, header, report)
	if err != nil {
		return fmt.Errorf("%s: %w", docFile, err)
	}
	return renameio.WriteFile(docFile, out, 0o644)
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: benchdoc DOC REPORT HEADER")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3]); err != nil {
		fmt.Fprintln(os.Stderr, "benchdoc:", err)
		os.Exit(2)
	}
}
