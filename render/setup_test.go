package render

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"fmt"
	"strings"
	"testing"

	"github.com/mcbake/mcbake/internal/testing/roottest"

	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/fstree"
	"github.com/mcbake/mcbake/machineconfig"
	"github.com/mcbake/mcbake/manifest"
)

// mcDoc returns a MachineConfig object in JSON with the given Ignition
// 3.5.0 members (JSON without the outer braces, e.g. `"storage":{...}`).
func mcDoc(name, members string) string {
	cfg := `{"ignition":{"version":"3.5.0"}}`
	if members != "" {
		cfg = `{"ignition":{"version":"3.5.0"},` + members + `}`
	}
	return fmt.Sprintf(`{"apiVersion":"machineconfiguration.openshift.io/v1","kind":"MachineConfig","metadata":{"name":%q},"spec":{"config":%s}}`, name, cfg)
}

// parseDocs parses each document as the file mc<i>.yaml.
func parseDocs(t testing.TB, docs ...string) []*machineconfig.MachineConfig {
	t.Helper()
	var mcs []*machineconfig.MachineConfig
	for i, d := range docs {
		got, err := machineconfig.Parse(fmt.Sprintf("mc%d.yaml", i), []byte(d))
		if err != nil {
			t.Fatalf("Parse(mc%d.yaml) = %v", i, err)
		}
		mcs = append(mcs, got...)
	}
	return mcs
}

// renderDocs parses, merges and renders docs against root.
func renderDocs(t testing.TB, root fstree.Tree, docs ...string) (*Result, error) {
	t.Helper()
	return Render(context.Background(), machineconfig.Merge(parseDocs(t, docs...)), root)
}

// makeRoot creates a root directory: each key is a path relative to the
// root; a key ending in "/" is a directory, a value starting with "-> " a
// symlink to the rest, anything else a file with that content.
func makeRoot(t testing.TB, spec map[string]string) *fstree.Dir {
	t.Helper()
	dir := t.TempDir()
	roottest.Write(t, dir, spec)
	return openDir(t, dir)
}

// openDir opens dir as a fstree.Dir, closed when the test ends.
func openDir(t testing.TB, dir string) *fstree.Dir {
	t.Helper()
	d, err := fstree.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := d.Close(); err != nil {
			t.Errorf("closing %s: %v", dir, err)
		}
	})
	return d
}

const installMulti = "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n"

// rhcosSpec is a root laid out like RHCOS: nss-altfiles passwd and group
// files, /usr/local and /home as symlinks into /var, systemd units,
// enablement links and presets.
func rhcosSpec() map[string]string {
	return map[string]string{
		"etc/passwd":     "root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000:CoreOS Admin:/var/home/core:/bin/bash\n",
		"usr/lib/passwd": "# altfiles\nroot:x:0:0::/root:/bin/sh\ncore:x:4000:4000::/home/core:/bin/sh\ncontainers:x:993:993::/:/sbin/nologin\nbroken:x:notanumber:1\n",
		"etc/group":      "root:x:0:\ncore:x:1000:core\nwheel:x:10:core\n",
		"usr/lib/group":  "core:x:4000:\nhugetlbfs:x:801:\n",
		"usr/local":      "-> ../var/usrlocal",
		"var/usrlocal/":  "",
		"home":           "-> var/home",
		"var/home/":      "",
		"etc/systemd/system/multi-user.target.wants/":                    "",
		"usr/lib/systemd/system/rootonly.service":                        "[Unit]\nDescription=only in the root\n" + installMulti,
		"usr/lib/systemd/system/rootenabled.service":                     "[Unit]\nDescription=enabled by the root\n" + installMulti + "Alias=re-alias.service\n",
		"etc/systemd/system/multi-user.target.wants/rootenabled.service": "-> /usr/lib/systemd/system/rootenabled.service",
		"etc/systemd/system/re-alias.service":                            "-> /usr/lib/systemd/system/rootenabled.service",
		"usr/lib/systemd/system-preset/90-default.preset":                "# defaults\nenable p-on.service\ndisable p-*.service\nenable p-off.service\n",
		"usr/lib/systemd/system-preset/50-x.preset":                      "enable p-masked.service\n",
		"etc/systemd/system-preset/50-x.preset":                          "; masks the /usr/lib file\ndisable p-masked.service\n",
	}
}

// pick returns the manifest part of res's entries at the given paths.
func pick(res *Result, paths ...string) map[string]manifest.Entry {
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	out := map[string]manifest.Entry{}
	for _, e := range res.Entries {
		if want[e.Path] {
			out[e.Path] = e.Entry
		}
	}
	return out
}

// keys returns m's keys.
func keys[V any](m map[string]V) []string {
	var out []string
	for k := range m {
		out = append(out, k)
	}
	return out
}

// present returns those of paths that res has entries for.
func present(res *Result, paths ...string) []string {
	var out []string
	for _, p := range paths {
		if len(pick(res, p)) > 0 {
			out = append(out, p)
		}
	}
	return out
}

// content returns the content of res's entry at p.
func content(res *Result, p string) (string, bool) {
	for _, e := range res.Entries {
		if e.Path == p {
			return string(e.Content), true
		}
	}
	return "", false
}

// gz gzips data (no name, no mtime: deterministic).
func gz(t testing.TB, data []byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w, err := gzip.NewWriterLevel(&b, gzip.BestCompression)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Write(data); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// base64URL and percentURL return data URLs of data.
func base64URL(data []byte) string { return "data:;base64," + base64.StdEncoding.EncodeToString(data) }

func percentURL(data []byte) string {
	var b strings.Builder
	b.WriteString("data:,")
	for _, c := range data {
		fmt.Fprintf(&b, "%%%02X", c)
	}
	return b.String()
}

// sha returns the manifest digest of data.
func sha(data string) digest.Digest { return digest.FromString(data) }

// src is a manifest source.
func src(mc, field string) manifest.Source { return manifest.Source{MachineConfig: mc, Field: field} }
