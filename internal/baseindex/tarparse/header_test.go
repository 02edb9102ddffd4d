package tarparse

import (
	"archive/tar"
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestParseHeader: ParseHeader reads what archive/tar reads, for the
// fields mcbake uses, in every header format Go's writer produces.
func TestParseHeader(t *testing.T) {
	long := strings.Repeat("d/", 60) + "file"
	tests := []struct {
		name string
		hdr  tar.Header
	}{
		{"ustar", tar.Header{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 5, Format: tar.FormatUSTAR}},
		{"ustar prefix", tar.Header{Name: strings.Repeat("p", 120) + "/name", Typeflag: tar.TypeReg, Mode: 0o600, Format: tar.FormatUSTAR}},
		{"pax long name and link", tar.Header{Name: long, Linkname: long + "-target", Typeflag: tar.TypeSymlink, Mode: 0o777, Format: tar.FormatPAX}},
		{"pax big owner", tar.Header{Name: "x", Typeflag: tar.TypeReg, Uid: 1 << 30, Gid: 3 << 21, Mode: 0o4755, Format: tar.FormatPAX}},
		{"pax utf-8 name", tar.Header{Name: "usr/share/ü/ß", Typeflag: tar.TypeDir, Mode: 0o755, Format: tar.FormatPAX}},
		{"gnu long name", tar.Header{Name: long, Typeflag: tar.TypeLink, Linkname: "a", Format: tar.FormatGNU}},
		{"gnu base-256 owner", tar.Header{Name: "x", Typeflag: tar.TypeReg, Uid: 1 << 40, Gid: 7, Format: tar.FormatGNU}},
		{"char device", tar.Header{Name: "dev/null", Typeflag: tar.TypeChar, Mode: 0o666, Devmajor: 1, Devminor: 3}},
		{"whiteout", tar.Header{Name: "etc/.wh.issue", Typeflag: tar.TypeReg}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw := headerBlocks(t, &tt.hdr)
			want, err := tar.NewReader(bytes.NewReader(append(raw, make([]byte, 1024+tt.hdr.Size)...))).Next()
			if err != nil {
				t.Fatal(err)
			}
			got := new(tar.Header)
			if err := ParseHeader(raw, got); err != nil {
				t.Fatalf("ParseHeader() error = %v", err)
			}
			pick := func(h *tar.Header) []any { return []any{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid, h.Size, h.Linkname} }
			if diff := cmp.Diff(pick(want), pick(got)); diff != "" {
				t.Errorf("ParseHeader() mismatch (-archive/tar +got):\n%s", diff)
			}
		})
	}
}

// headerBlocks returns the header blocks a tar writer writes for hdr.
func headerBlocks(t *testing.T, hdr *tar.Header) []byte {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	if err := tw.WriteHeader(hdr); err != nil {
		t.Fatal(err)
	}
	return bytes.Clone(buf.Bytes())
}

func TestParseHeaderErrors(t *testing.T) {
	good := headerBlocks(t, &tar.Header{Name: "a", Typeflag: tar.TypeReg, Mode: 0o644})
	tests := []struct {
		name   string
		blocks []byte
		want   string
	}{
		{"zero block", make([]byte, 512), "end of archive"},
		{"short", good[:100], "truncated"},
		{"bad checksum", func() []byte { b := bytes.Clone(good); b[0] = 'b'; return b }(), "checksum"},
		{"bad octal", func() []byte { b := bytes.Clone(good); copy(b[100:], "9999999\x00"); fixChecksum(b); return b }(), "mode"},
		{"trailing data", append(bytes.Clone(good), bytes.Repeat([]byte{1}, 512)...), "data after"},
	}
	for _, tt := range tests {
		if err := ParseHeader(tt.blocks, new(tar.Header)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ParseHeader() error = %v, want one containing %q", tt.name, err, tt.want)
		}
	}
}

// fixChecksum rewrites a header block's checksum.
func fixChecksum(b []byte) {
	copy(b[148:156], "        ")
	var sum int
	for _, c := range b[:512] {
		sum += int(c)
	}
	copy(b[148:156], fmt.Sprintf("%06o\x00 ", sum))
}
