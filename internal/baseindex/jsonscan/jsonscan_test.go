package jsonscan

import (
	"encoding/json"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestJSONScanner(t *testing.T) {
	tests := []struct {
		in      string
		want    []string
		wantErr bool
	}{
		{in: `{"a":"x","b":12,"c":null,"d":[1,{"e":"f"}],"g":true}`, want: []string{"a=x", "b=12", "c=", "d", "g"}},
		{in: `{"a":"es\"caped\\\u00fc"}`, want: []string{`a=es"caped\ü`}},
		{in: `{"a":"tab	inside"}`, wantErr: true},
		{in: `{"a":1.5}`, want: []string{"a"}},
		{in: `{"a":"x"} trailing`, wantErr: true},
		{in: `{"a":"x"`, wantErr: true},
		{in: `{"a" "x"}`, wantErr: true},
		{in: `{"b":-3}`, want: []string{"b=-3"}},
	}
	for _, tt := range tests {
		s := New([]byte(tt.in))
		var got []string
		s.Object(func(key []byte) {
			switch string(key) {
			case "a":
				if s.Peek() == '"' {
					got = append(got, "a="+s.Str())
				} else {
					got = append(got, "a")
					s.Skip()
				}
			case "b":
				got = append(got, "b="+strconv.FormatInt(s.Int(), 10))
			case "c":
				got = append(got, "c="+s.Str())
			default:
				got = append(got, string(key))
				s.Skip()
			}
		})
		err := s.End()
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !cmp.Equal(got, tt.want) {
			t.Errorf("%s: read %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzSkip: whatever the scanner reads as one JSON value and nothing
// after it is valid JSON to encoding/json, and valid JSON is read so;
// it never panics.
func FuzzSkip(f *testing.F) {
	for _, s := range []string{`{"a":"x","b":12,"c":null,"d":[1,{"e":"f"}],"g":true}`, `{"a":"es\"caped\\\u00fc"}`,
		`[1.5e-3,-0,"\ud83d\ude00"]`, `{"a":"x"} trailing`, `{"a" "x"}`, `  "s"  `, `01`, `-`, `1.`, `"\x01"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		s := New(b)
		s.Skip()
		err := s.End()
		if valid := json.Valid(b); (err == nil) != valid {
			t.Fatalf("%q: End() = %v, encoding/json's Valid = %v", b, err, valid)
		}
	})
}
