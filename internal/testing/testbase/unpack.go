package testbase

import (
	"archive/tar"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/gzip"
	"github.com/klauspost/compress/zstd"
	v1 "github.com/opencontainers/image-spec/specs-go/v1"
)

// Unpack reads the image an OCI layout's index.json points at (for an
// index, its first manifest) and returns its merged filesystem, keyed by
// File.Path, with whiteouts and opaque directories applied. A hard link
// keeps Type tar.TypeLink and Target, and carries its target's content,
// mode and owner. It reads what Write produces; it is not a general image
// reader (no blob verification, no foreign layers).
func Unpack(dir string) (map[string]File, error) {
	m, err := readManifest(dir)
	if err != nil {
		return nil, err
	}
	state := map[string]entry{}
	for i, l := range m.Layers {
		entries, err := readLayer(blobPath(dir, l.Digest), l.MediaType)
		if err != nil {
			return nil, fmt.Errorf("reading layer %d: %w", i, err)
		}
		if err := apply(state, entries); err != nil {
			return nil, fmt.Errorf("applying layer %d: %w", i, err)
		}
	}
	files := make(map[string]File, len(state))
	for name, e := range state {
		files[name] = File{Path: name, Type: e.typ, Mode: e.mode, UID: e.uid, GID: e.gid, Content: e.content, Target: e.target}
	}
	return files, nil
}

// readManifest follows index.json (and nested indexes) to the first
// image manifest.
func readManifest(dir string) (v1.Manifest, error) {
	var idx v1.Index
	if err := readJSON(filepath.Join(dir, "index.json"), &idx); err != nil {
		return v1.Manifest{}, err
	}
	for {
		if len(idx.Manifests) == 0 {
			return v1.Manifest{}, errors.New("image index has no manifests")
		}
		desc := idx.Manifests[0]
		if desc.MediaType != v1.MediaTypeImageIndex && desc.MediaType != mediaTypeDockerManifestList {
			var m v1.Manifest
			err := readJSON(blobPath(dir, desc.Digest), &m)
			return m, err
		}
		idx = v1.Index{}
		if err := readJSON(blobPath(dir, desc.Digest), &idx); err != nil {
			return v1.Manifest{}, err
		}
	}
}

func readJSON(p string, v any) error {
	b, err := os.ReadFile(p)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("parsing %s: %w", p, err)
	}
	return nil
}

func readLayer(p, mediaType string) (entries []entry, err error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, f.Close()) }()
	r, err := decompressor(f, mediaType)
	if err != nil {
		return nil, err
	}
	defer func() { err = errors.Join(err, r.Close()) }()
	return readTar(tar.NewReader(r))
}

func decompressor(r io.Reader, mediaType string) (io.ReadCloser, error) {
	switch {
	case strings.HasSuffix(mediaType, "gzip"):
		return gzip.NewReader(r)
	case strings.HasSuffix(mediaType, "zstd"):
		d, err := zstd.NewReader(r)
		if err != nil {
			return nil, err
		}
		return d.IOReadCloser(), nil
	default:
		return io.NopCloser(r), nil
	}
}

func readTar(tr *tar.Reader) ([]entry, error) {
	var entries []entry
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return entries, nil
		}
		if err != nil {
			return nil, err
		}
		name := strings.TrimPrefix(path.Clean("/"+h.Name), "/")
		if name == "" {
			continue
		}
		e := entry{name: name, typ: typeOf(h.Typeflag), mode: h.Mode & 0o7777, uid: h.Uid, gid: h.Gid, target: h.Linkname}
		if e.typ == tar.TypeLink {
			e.target = strings.TrimPrefix(path.Clean("/"+h.Linkname), "/")
		}
		if e.typ == tar.TypeReg {
			if e.content, err = io.ReadAll(tr); err != nil {
				return nil, fmt.Errorf("reading %s: %w", name, err)
			}
		}
		entries = append(entries, e)
	}
}
