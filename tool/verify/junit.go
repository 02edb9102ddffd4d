package verify

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"
)

// WriteJSON writes the report as indented JSON (the format docs/verify.md
// documents).
func (r *Report) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(r)
}

// The JUnit XML elements written, in the schema most consumers accept
// (Jenkins, GitLab, Azure DevOps, Tekton and GitHub test reporters).
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name       string          `xml:"name,attr"`
	Tests      int             `xml:"tests,attr"`
	Failures   int             `xml:"failures,attr"`
	Errors     int             `xml:"errors,attr"`
	Skipped    int             `xml:"skipped,attr"`
	Time       string          `xml:"time,attr"`
	Properties []junitProperty `xml:"properties>property,omitempty"`
	Cases      []junitCase     `xml:"testcase"`
}

type junitProperty struct {
	Name  string `xml:"name,attr"`
	Value string `xml:"value,attr"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Time      string        `xml:"time,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Skipped   *junitSkipped `xml:"skipped,omitempty"`
	SystemOut *junitText    `xml:"system-out,omitempty"`
}

type junitSkipped struct {
	Message string `xml:"message,attr"`
}

type junitText struct {
	Body string `xml:",cdata"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Type    string `xml:"type,attr,omitempty"`
	Body    string `xml:",cdata"`
}

// WriteJUnit writes one test case per rule. A rule fails when it has a
// finding at or above the report's threshold: its failure lists those
// findings; findings below the threshold go to the test case's
// system-out. Rules that did not run are skipped, with the reason.
func (r *Report) WriteJUnit(w io.Writer) error {
	suite := junitSuite{Name: "mcbake verify", Time: "0", Properties: r.junitProperties()}
	for _, rule := range rules {
		tc := r.junitCase(rule)
		switch {
		case tc.Failure != nil:
			suite.Failures++
		case tc.Skipped != nil:
			suite.Skipped++
		}
		suite.Cases = append(suite.Cases, tc)
	}
	suite.Tests = len(suite.Cases)
	doc := junitSuites{Name: "mcbake verify", Tests: suite.Tests, Failures: suite.Failures, Skipped: suite.Skipped, Suites: []junitSuite{suite}}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

func (r *Report) junitProperties() []junitProperty {
	props := []junitProperty{{Name: "failOn", Value: string(r.FailOn)}}
	if r.Base != nil {
		props = append(props, junitProperty{Name: "base", Value: r.Base.Reference + "@" + r.Base.Digest.String()})
	}
	if r.Image != nil {
		props = append(props, junitProperty{Name: "image", Value: r.Image.Reference + "@" + r.Image.Digest.String()})
	}
	for _, mc := range r.MachineConfigs {
		props = append(props, junitProperty{Name: "machineConfig", Value: mc.Name + " " + mc.File + " " + mc.Digest.String()})
	}
	return props
}

func (r *Report) junitCase(rule Rule) junitCase {
	tc := junitCase{Name: rule.ID + " " + rule.Name, Classname: "mcbake.verify", Time: "0"}
	if reason := r.notRunReason(rule.ID); reason != "" {
		tc.Skipped = &junitSkipped{Message: reason}
		return tc
	}
	var failing, other []string
	worst := Info
	for _, f := range r.ByRule(rule.ID) {
		if !r.FailOn.Fails(f.Severity) {
			other = append(other, findingText(f))
			continue
		}
		failing = append(failing, findingText(f))
		if f.Severity.rank() > worst.rank() {
			worst = f.Severity
		}
	}
	if len(failing) > 0 {
		tc.Failure = &junitMessage{Message: fmt.Sprintf("%d finding(s): %s", len(failing), rule.Summary), Type: string(worst),
			Body: xmlText(strings.Join(failing, "\n\n"))}
	}
	if len(other) > 0 {
		tc.SystemOut = &junitText{Body: xmlText(strings.Join(other, "\n\n"))}
	}
	return tc
}

// findingText is a finding as plain text, for JUnit bodies.
func findingText(f Finding) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s: %s", f.Severity, f.Message)
	if where := f.where(); where != "" {
		fmt.Fprintf(&b, "\nat %s", where)
	}
	if f.Path != "" {
		fmt.Fprintf(&b, "\npath %s", f.Path)
	}
	for _, p := range f.Paths {
		fmt.Fprintf(&b, "\n  %s", p)
	}
	return b.String()
}

// xmlText replaces the characters XML 1.0 cannot hold (controls other
// than tab, newline and carriage return, which a file or unit name may
// carry) with U+FFFD: encoding/xml writes CDATA as it is.
func xmlText(s string) string {
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\t' || r == '\n' || r == '\r':
			return r
		case r < 0x20 || r == 0xFFFE || r == 0xFFFF || r >= 0xD800 && r <= 0xDFFF:
			return '\uFFFD'
		}
		return r
	}, s)
}
