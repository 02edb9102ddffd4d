package baseindex_test

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	digest "github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/baseindex"
)

// ent is one tar entry of a test layer.
type ent struct {
	name     string
	flag     byte
	mode     int64
	uid, gid int
	body     string
	link     string
}

func file(name, body string) ent { return ent{name: name, flag: tar.TypeReg, mode: 0o644, body: body} }
func dir(name string) ent        { return ent{name: name, flag: tar.TypeDir, mode: 0o755} }
func symlink(name, target string) ent {
	return ent{name: name, flag: tar.TypeSymlink, mode: 0o777, link: target}
}
func hardlink(name, target string) ent {
	return ent{name: name, flag: tar.TypeLink, mode: 0o644, link: target}
}
func whiteout(name string) ent { return file(name, "") }

func (e ent) withMode(m int64) ent       { e.mode = m; return e }
func (e ent) withOwner(uid, gid int) ent { e.uid, e.gid = uid, gid; return e }

// compression of a test layer blob.
type compression int

const (
	gzipped compression = iota
	zstded
	plain
)

var mediaTypes = map[compression]string{
	gzipped: "application/vnd.oci.image.layer.v1.tar+gzip",
	zstded:  "application/vnd.oci.image.layer.v1.tar+zstd",
	plain:   "application/vnd.oci.image.layer.v1.tar",
}

// tarBytes writes entries as a tar stream.
func tarBytes(tb testing.TB, entries ...ent) []byte {
	tb.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{
			Name: e.name, Typeflag: e.flag, Mode: e.mode, Uid: e.uid, Gid: e.gid,
			Linkname: e.link, Size: int64(len(e.body)), Format: tar.FormatPAX,
		}
		if e.flag != tar.TypeReg {
			hdr.Size = 0
		}
		if err := tw.WriteHeader(hdr); err != nil {
			tb.Fatalf("writing tar header %q: %v", e.name, err)
		}
		if _, err := io.WriteString(tw, e.body); err != nil {
			tb.Fatalf("writing tar entry %q: %v", e.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// compress compresses b.
func compress(tb testing.TB, c compression, b []byte) []byte {
	tb.Helper()
	var buf bytes.Buffer
	var w io.WriteCloser
	switch c {
	case gzipped:
		w = gzip.NewWriter(&buf)
	case zstded:
		z, err := zstd.NewWriter(&buf, zstd.WithEncoderConcurrency(1))
		if err != nil {
			tb.Fatal(err)
		}
		w = z
	default:
		return b
	}
	if _, err := w.Write(b); err != nil {
		tb.Fatal(err)
	}
	if err := w.Close(); err != nil {
		tb.Fatal(err)
	}
	return buf.Bytes()
}

// testLayer is a layer blob held in memory that counts its opens, and
// the reads of its metadata and unpacked files when it has them.
type testLayer struct {
	baseindex.Layer
	blob                 []byte
	opens                atomic.Int32
	metaReads, fileReads atomic.Int32
}

// newLayer returns a layer for blob whose digest and size match it.
func newLayer(blob []byte, mediaType string) *testLayer {
	l := &testLayer{blob: blob}
	l.Layer = baseindex.Layer{
		Digest:    digest.FromBytes(blob),
		MediaType: mediaType,
		Size:      int64(len(blob)),
		Open: func(context.Context) (io.ReadCloser, error) {
			l.opens.Add(1)
			return io.NopCloser(bytes.NewReader(l.blob)), nil
		},
	}
	return l
}

// layerOf builds a compressed layer of entries.
func layerOf(tb testing.TB, c compression, entries ...ent) *testLayer {
	tb.Helper()
	return newLayer(compress(tb, c, tarBytes(tb, entries...)), mediaTypes[c])
}

// gzLayers builds one gzip layer per entry list.
func gzLayers(tb testing.TB, layers ...[]ent) []*testLayer {
	tb.Helper()
	out := make([]*testLayer, len(layers))
	for i, entries := range layers {
		out[i] = layerOf(tb, gzipped, entries...)
	}
	return out
}

func descriptors(layers []*testLayer) []baseindex.Layer {
	out := make([]baseindex.Layer, len(layers))
	for i, l := range layers {
		out[i] = l.Layer
	}
	return out
}

// unopenable returns the layers with an Open that fails the test.
func unopenable(t *testing.T, layers []*testLayer) []baseindex.Layer {
	out := descriptors(layers)
	for i := range out {
		out[i].Open = func(context.Context) (io.ReadCloser, error) {
			t.Errorf("layer %s opened, want it read from the cache", out[i].Digest)
			return nil, errors.New("opened")
		}
	}
	return out
}

func sha(s string) string {
	sum := sha256.Sum256([]byte(s))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// bodies maps the digest of every file body of the layers to the body.
func bodies(layers [][]ent) map[string]string {
	out := map[string]string{}
	for _, l := range layers {
		for _, e := range l {
			if e.flag == tar.TypeReg {
				out[sha(e.body)] = e.body
			}
		}
	}
	return out
}

// listing describes every node of ix, walking it with ReadDir from the
// root, one line per node; file digests (deferred ones computed) are
// shown as the quoted body they are the digest of. It checks that Lookup
// agrees with ReadDir and that Len counts the nodes that are not implied.
func listing(t *testing.T, ix *baseindex.Index, known map[string]string) []string {
	t.Helper()
	var lines []string
	listed := 0
	var walk func(dir string)
	walk = func(dir string) {
		for _, n := range ix.ReadDir(dir) {
			if got, ok := ix.Lookup(n.Path); !ok || got != n {
				t.Errorf("Lookup(%q) = %v, %v, want the node ReadDir returned", n.Path, got, ok)
			}
			if !n.Implied() {
				listed++
			}
			lines = append(lines, describe(t, ix, n, known))
			if n.Type == baseindex.Dir {
				walk(n.Path)
			}
		}
	}
	root, ok := ix.Lookup("")
	if !ok {
		t.Fatalf("Lookup(\"\") found no root")
	}
	if !root.Implied() {
		listed++
		lines = append(lines, describe(t, ix, root, known))
	}
	walk("")
	if ix.Len() != listed {
		t.Errorf("Len() = %d, want %d", ix.Len(), listed)
	}
	sort.Strings(lines)
	return lines
}

// describe describes a node, with its digest computed if it is deferred.
func describe(t *testing.T, ix *baseindex.Index, n *baseindex.Node, known map[string]string) string {
	t.Helper()
	var b strings.Builder
	p := n.Path
	if p == "" {
		p = "/"
	}
	fmt.Fprintf(&b, "%s %s %04o %d:%d", p, n.Type, n.Mode, n.UID, n.GID)
	if n.Implied() {
		b.WriteString(" implied")
	}
	switch n.Type {
	case baseindex.Symlink:
		fmt.Fprintf(&b, " -> %s", n.Target)
	case baseindex.Hardlink:
		t, target := n.Lstat()
		fmt.Fprintf(&b, " => %s (%s", n.Target, t)
		if target != "" {
			fmt.Fprintf(&b, " -> %s", target)
		}
		b.WriteString(")")
	}
	sum, err := ix.Digest(n)
	if err != nil {
		t.Errorf("Digest(%q): %v", n.Path, err)
	}
	if d := sum.String(); d != "" {
		body, ok := known[d]
		if !ok || int64(len(body)) != n.Size {
			fmt.Fprintf(&b, " %s size %d", d, n.Size)
		} else {
			fmt.Fprintf(&b, " %q", body)
		}
	}
	return b.String()
}
