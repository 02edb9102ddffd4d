package baseindex

import (
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
		s := jsonScanner{b: []byte(tt.in)}
		var got []string
		s.object(func(key []byte) {
			switch string(key) {
			case "a":
				if s.ws() == '"' {
					got = append(got, "a="+s.str())
				} else {
					got = append(got, "a")
					s.skip()
				}
			case "b":
				got = append(got, "b="+strconv.FormatInt(s.int(), 10))
			case "c":
				got = append(got, "c="+s.str())
			default:
				got = append(got, string(key))
				s.skip()
			}
		})
		err := s.end()
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: error = %v, want error %v", tt.in, err, tt.wantErr)
			continue
		}
		if !tt.wantErr && !cmp.Equal(got, tt.want) {
			t.Errorf("%s: read %q, want %q", tt.in, got, tt.want)
		}
	}
}
