package verify

import (
	"archive/tar"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/opencontainers/go-digest"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/manifest"
	"github.com/mcbake/mcbake/tool/build"
	"github.com/mcbake/mcbake/tool/image"
)

// imageConfig has a file, a symbolic and a hard link, a directory and a
// disabled base unit (whose enablement link the image removes with a
// whiteout).
const imageConfig = `{
  "storage": {
    "files": [{"path": "/etc/mcbake/a.conf", "mode": 420, "contents": {"source": "data:,a%0A"}}],
    "links": [{"path": "/etc/mcbake/link", "target": "a.conf"}, {"path": "/etc/mcbake/hard", "target": "/etc/mcbake/a.conf", "hard": true}],
    "directories": [{"path": "/etc/mcbake/d", "mode": 488}]
  },
  "systemd": {"units": [{"name": "openvswitch.service", "enabled": false}]}
}`

// imageFindings are the findings of the image rules, as "RULE MC FIELD
// PATH", with the messages for diagnostics.
func imageFindings(r *Report) ([]string, []string) {
	var got, msgs []string
	for _, f := range r.Findings {
		switch f.Rule {
		case RuleManifestDrift, RuleStaleImage, RuleImageIsBase, RuleBaseMismatch, RuleContentMismatch:
			got = append(got, f.Rule+" "+fieldsOf([]Finding{f})[0])
			msgs = append(msgs, f.Message)
		}
	}
	return got, msgs
}

func TestImageRules(t *testing.T) {
	e := newEnv(t)
	mc := e.MC("50-a", imageConfig)
	img := e.build(e.Base, "image", mc)
	zstdImg, _ := e.buildWith(build.Zstd, e.Base, "image-zstd", mc)
	changed := writeMC(t, t.TempDir(), "50-a", strings.Replace(imageConfig, "data:,a%0A", "data:,b%0A", 1))
	other := writeMC(t, t.TempDir(), "60-b", `{"storage": {"files": [`+file("/etc/b", "b")+`]}}`)
	bumped := e.WriteBase("bumped", testbase.Layer{Files: []testbase.File{{Path: "etc/bumped", Type: tar.TypeReg, Mode: 0o644, Content: []byte("new\n")}}})
	tests := []struct {
		name       string
		mcs        []string
		base       string
		image      string
		want       []string
		wantNotRun map[string]string
	}{
		{"the image of the MachineConfigs", []string{mc}, e.Base, img, nil, map[string]string{}},
		{"a zstd layer", []string{mc}, e.Base, zstdImg, nil, map[string]string{}},
		{"without a base", []string{mc}, "", img, nil, map[string]string{
			RuleFileDirClash: "needs --base", RuleRevertClobber: "needs --base", RuleUnitNotFound: "needs --base", RuleUnknownOwner: "needs --base",
			RuleImageIsBase: "needs --base", RuleBaseMismatch: "needs --base", RuleOSImageURL: "needs --base"}},
		{"a MachineConfig changed", []string{changed}, e.Base, img, []string{RuleStaleImage + " 50-a metadata.name "}, map[string]string{}},
		{"other MachineConfigs", []string{other}, e.Base, img, []string{RuleStaleImage + "   ", RuleStaleImage + " 60-b metadata.name "}, map[string]string{}},
		{"the image is the base", []string{mc}, e.Base, e.Base, []string{RuleImageIsBase + "   "}, map[string]string{
			RuleManifestDrift: "the image is the base", RuleStaleImage: "the image is the base", RuleBaseMismatch: "the image is the base",
			RuleRevertGuard: "the image is the base", RuleContentMismatch: "the image is the base"}},
		{"a bumped base", []string{mc}, bumped, img, []string{RuleBaseMismatch + "   "}, map[string]string{}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := e.run(Options{MachineConfigs: tt.mcs, Base: tt.base, Image: tt.image})
			got, msgs := imageFindings(r)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("image findings (-want +got):\n%s\nmessages: %q", diff, msgs)
			}
			notRun := map[string]string{}
			for _, n := range r.NotRun {
				notRun[n.Rule] = n.Reason
			}
			if diff := cmp.Diff(tt.wantNotRun, notRun); diff != "" {
				t.Errorf("rules not run (-want +got):\n%s", diff)
			}
		})
	}
}

// TestManifestDrift writes images by hand, as the append engine does,
// with one thing changed each, and checks what MCB008 reports.
func TestManifestDrift(t *testing.T) {
	e := newEnv(t)
	mc := e.MC("50-a", imageConfig)
	p := e.prepare(e.Base, mc)
	const file0 = "50-a spec.config.storage.files[0] /etc/mcbake/a.conf"
	tests := []struct {
		name string
		// change edits the layer entries, the manifest and the labels;
		// the manifest is re-encoded and, unless keepLabel, the label
		// digest follows it. want are the MCB008 findings, "MC FIELD PATH".
		change    func(entries []tarEntry, m *manifest.Manifest, labels map[string]string) []tarEntry
		keepLabel bool
		want      []string
		wantMsg   string
	}{
		{"as built", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry { return en }, false, nil, ""},
		{"label digest", func(en []tarEntry, _ *manifest.Manifest, l map[string]string) []tarEntry {
			l[image.LabelManifestDigest] = "sha256:" + strings.Repeat("0", 64)
			return en
		}, true, []string{"  "}, "does not match the label"},
		{"file content", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry {
			i := entryAt(en, "etc/mcbake/a.conf")
			en[i].content, en[i].hdr.Size = []byte("b\n"), 2
			return en
		}, false, []string{file0}, "(content)"},
		{"file mode and owner", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry {
			i := entryAt(en, "etc/mcbake/a.conf")
			en[i].hdr.Mode, en[i].hdr.Uid = 0o600, 1000
			return en
		}, false, []string{file0}, "(mode, uid)"},
		{"link target", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry {
			en[entryAt(en, "etc/mcbake/link")].hdr.Linkname = "elsewhere"
			return en
		}, false, []string{"50-a spec.config.storage.links[0] /etc/mcbake/link"}, "(target)"},
		{"hard link target", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry {
			en[entryAt(en, "etc/mcbake/hard")].hdr.Linkname = "etc/passwd"
			return en
		}, false, []string{"50-a spec.config.storage.links[1] /etc/mcbake/hard"}, "(target)"},
		{"unrecorded file", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry {
			return append(en, tarEntry{hdr: tar.Header{Typeflag: tar.TypeReg, Name: "etc/extra", Mode: 0o644, ModTime: time.Unix(0, 0)}})
		}, false, []string{"  "}, "/etc/extra, which the manifest does not record"},
		{"missing whiteout", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry {
			return slices.Delete(en, entryAt(en, "etc/systemd/system/multi-user.target.wants/.wh.openvswitch.service"), entryAt(en, "etc/systemd/system/multi-user.target.wants/.wh.openvswitch.service")+1)
		}, false, []string{"50-a spec.config.systemd.units[openvswitch.service].enabled /etc/systemd/system/multi-user.target.wants/openvswitch.service"}, "no whiteout"},
		{"recorded but missing", func(en []tarEntry, _ *manifest.Manifest, _ map[string]string) []tarEntry {
			return slices.Delete(en, entryAt(en, "etc/mcbake/d/"), entryAt(en, "etc/mcbake/d/")+1)
		}, false, []string{"50-a spec.config.storage.directories[0] /etc/mcbake/d"}, "does not have it"},
		{"base label", func(en []tarEntry, _ *manifest.Manifest, l map[string]string) []tarEntry {
			l[image.LabelBaseDigest] = "sha256:" + strings.Repeat("1", 64)
			return en
		}, false, []string{"  "}, "io.mcbake.base.digest"},
		{"MachineConfigs label", func(en []tarEntry, _ *manifest.Manifest, l map[string]string) []tarEntry {
			l[image.LabelMachineConfigs] = "50-a,60-b"
			return en
		}, false, []string{"  "}, "io.mcbake.machineconfigs"},
		{"rendered differently", func(en []tarEntry, m *manifest.Manifest, _ map[string]string) []tarEntry {
			en[entryAt(en, "etc/mcbake/a.conf")].hdr.Mode = 0o600
			for i := range m.Entries {
				if m.Entries[i].Path == "/etc/mcbake/a.conf" {
					m.Entries[i].Mode = 0o600
				}
			}
			return en
		}, false, []string{file0}, "differently from a fresh render of the MachineConfigs against the base (mode)"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, err := manifest.Unmarshal(p.ManifestJSON)
			if err != nil {
				t.Fatal(err)
			}
			labels := maps.Clone(p.Labels())
			entries := tt.change(layerOf(p.Rendered.Entries), m, labels)
			raw, err := manifest.Marshal(m)
			if err != nil {
				t.Fatal(err)
			}
			if !tt.keepLabel {
				labels[image.LabelManifestDigest] = digest.FromBytes(raw).String()
			}
			img := e.appendImage(e.Base, "drift-"+string(rune('a'+i)), append(entries, manifestFile(raw)), labels)
			r := e.run(Options{MachineConfigs: []string{mc}, Base: e.Base, Image: img})
			got, msgs := imageFindings(r)
			var want []string
			for _, w := range tt.want {
				want = append(want, RuleManifestDrift+" "+w)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Fatalf("image findings (-want +got):\n%s\nmessages: %q", diff, msgs)
			}
			for _, msg := range msgs {
				if !strings.Contains(msg, tt.wantMsg) {
					t.Errorf("message %q does not say %q", msg, tt.wantMsg)
				}
			}
		})
	}
	t.Run("an invalid manifest", func(t *testing.T) {
		raw := []byte(`{"schemaVersion": 7, "machineConfigs": [], "entries": []}`)
		labels := maps.Clone(p.Labels())
		labels[image.LabelManifestDigest] = digest.FromBytes(raw).String()
		img := e.appendImage(e.Base, "drift-invalid", append(layerOf(p.Rendered.Entries), manifestFile(raw)), labels)
		r := e.run(Options{MachineConfigs: []string{mc}, Base: e.Base, Image: img})
		got, msgs := imageFindings(r)
		if diff := cmp.Diff([]string{RuleManifestDrift + "   "}, got); diff != "" || !strings.Contains(msgs[0], "is not valid") {
			t.Errorf("image findings (-want +got):\n%s\nmessages: %q", diff, msgs)
		}
	})
	t.Run("no manifest in the top layer", func(t *testing.T) {
		img := e.appendImage(e.Base, "drift-none", layerOf(p.Rendered.Entries), p.Labels())
		r := e.run(Options{MachineConfigs: []string{mc}, Base: e.Base, Image: img})
		got, msgs := imageFindings(r)
		if diff := cmp.Diff([]string{RuleManifestDrift + "   "}, got); diff != "" || !strings.Contains(msgs[0], "has no /usr/share/mcbake/manifest.json") {
			t.Errorf("image findings (-want +got):\n%s\nmessages: %q", diff, msgs)
		}
		if r.notRunReason(RuleStaleImage) == "" {
			t.Errorf("stale-image ran without a manifest")
		}
	})
}

// entryAt returns the index of the tar entry named name.
func entryAt(entries []tarEntry, name string) int {
	for i, te := range entries {
		if te.hdr.Name == name {
			return i
		}
	}
	panic("no tar entry " + name)
}
