package main

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseOutputs(t *testing.T) {
	tests := []struct {
		values  []string
		report  string
		want    []Output
		wantErr string
	}{
		{nil, "", []Output{{Format: "text", Flag: "--format text="}}, ""},
		{nil, "r.txt", []Output{{Format: "text", File: "r.txt", Flag: "--report"}}, ""},
		{[]string{"json"}, "", []Output{{Format: "json", Flag: "--format json="}}, ""},
		{[]string{"junit=junit.xml", "sarif=out.sarif", "text"}, "", []Output{{"junit", "junit.xml", "--format junit="}, {"sarif", "out.sarif", "--format sarif="}, {"text", "", "--format text="}}, ""},
		{[]string{"junit=junit.xml", "json"}, "r.json", []Output{{"junit", "junit.xml", "--format junit="}, {"json", "r.json", "--report"}}, ""},
		{[]string{"yaml"}, "", nil, "want text, json, junit or sarif"},
		{[]string{"json="}, "", nil, "empty file name"},
		{[]string{"json", "text"}, "", nil, "several --format values without =FILE"},
		{[]string{"json=a"}, "b", nil, "there is none"},
		{[]string{"json=a", "sarif=a"}, "", nil, "two reports would be written to a"},
	}
	for _, tt := range tests {
		got, err := parseOutputs(tt.values, tt.report)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("parseOutputs(%q, %q) error = %v, want %q", tt.values, tt.report, err, tt.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("parseOutputs(%q, %q) = %v", tt.values, tt.report, err)
			continue
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("parseOutputs(%q, %q) (-want +got):\n%s", tt.values, tt.report, diff)
		}
	}
}
