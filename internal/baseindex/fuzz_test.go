package baseindex

import (
	"archive/tar"
	"bytes"
	"testing"

	"github.com/mcbake/mcbake/manifest"
)

// FuzzWalk reads arbitrary bytes as a layer tar stream: never a panic,
// and every entry Walk reports has a clean absolute path and a known type.
func FuzzWalk(f *testing.F) {
	var b bytes.Buffer
	tw := tar.NewWriter(&b)
	for _, h := range []*tar.Header{
		{Name: "etc/", Typeflag: tar.TypeDir, Mode: 0o755},
		{Name: "etc/passwd", Typeflag: tar.TypeReg, Mode: 0o644, Size: 4},
		{Name: "etc/.wh.gone", Typeflag: tar.TypeReg},
		{Name: "etc/dir/.wh..wh..opq", Typeflag: tar.TypeReg},
		{Name: "etc/l", Typeflag: tar.TypeSymlink, Linkname: "../../x"},
		{Name: "etc/h", Typeflag: tar.TypeLink, Linkname: "etc/passwd"},
	} {
		if err := tw.WriteHeader(h); err != nil {
			f.Fatal(err)
		}
		if h.Size > 0 {
			tw.Write([]byte("root"))
		}
	}
	tw.Close()
	f.Add(b.Bytes())
	f.Fuzz(func(t *testing.T, data []byte) {
		_ = Walk(bytes.NewReader(data), func(string) bool { return true }, 1<<20, func(e manifest.Entry, content []byte) error {
			switch e.Type {
			case manifest.File, manifest.Directory, manifest.Symlink, manifest.Hardlink, manifest.Absent, manifest.Other, Opaque:
			default:
				t.Fatalf("Walk reported type %q", e.Type)
			}
			if e.Path == "" || e.Path[0] != '/' || (len(e.Path) > 1 && e.Path[len(e.Path)-1] == '/') {
				t.Fatalf("Walk reported path %q", e.Path)
			}
			if int64(len(content)) > 1<<20 {
				t.Fatalf("Walk kept %d bytes", len(content))
			}
			return nil
		})
	})
}

// FuzzDecodeRecords decodes arbitrary cache records (what follows a
// cache file's checksum): never a panic.
func FuzzDecodeRecords(f *testing.F) {
	f.Add("etc\x00passwd", []byte{1, 2, 3})
	f.Fuzz(func(t *testing.T, strs string, recs []byte) {
		newLayerData(strs).decode(recs)
	})
}
