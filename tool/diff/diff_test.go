package diff

import (
	"context"
	"errors"
	"io/fs"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/mcbake/mcbake/internal/testing/testbase"
	"github.com/mcbake/mcbake/revert"
	"github.com/mcbake/mcbake/tool/image"
	"github.com/mcbake/mcbake/tool/internal/testing/builtbyothers"
)

func TestDiffImageBuiltByOthers(t *testing.T) {
	e := newEnv(t)
	mc := e.MC("50-a", builtbyothers.Config)
	others := e.WriteBase("others", builtbyothers.Layer())
	o := Options{Base: e.Base, Image: others, MachineConfigs: []string{mc}, Images: e.Opts}
	r, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("Diff(--image built by others -f): %v", err)
	}
	if r.Owned != revert.Derived || len(r.MachineConfigs) != 1 || r.MachineConfigs[0].Name != "50-a" || r.Image.Digest == "" {
		t.Errorf("Diff: owned %q from %v, image %v; want derived from 50-a, with the image's digest", r.Owned, r.MachineConfigs, r.Image)
	}
	got := map[string]revert.Outcome{}
	for _, en := range r.Entries {
		got[en.Want.Path] = en.Outcome
		if en.Image == nil {
			t.Errorf("Diff: %s has no image state", en.Path)
		}
	}
	if diff := cmp.Diff(builtbyothers.Outcomes(), got); diff != "" {
		t.Errorf("Diff outcomes (-want +got):\n%s", diff)
	}

	o.MachineConfigs = nil
	if _, err := Run(context.Background(), o); !errors.Is(err, image.ErrNotLayered) {
		t.Errorf("Diff(--image built by others, no MachineConfigs) = %v, want ErrNotLayered", err)
	}
}

// TestDiffErrorsInOrder: the base opens while the image's manifest is
// read, and an error of the image (or of its manifest file) is the one
// reported when both fail, as when they ran one after the other; then
// the base's.
func TestDiffErrorsInOrder(t *testing.T) {
	e := newEnv(t)
	missing := "oci:" + filepath.Join(e.Dir, "no-such-base") + ":latest"
	layered := e.build(e.Base, "layered", e.MC("50-a", builtbyothers.Config))
	others := e.WriteBase("others", builtbyothers.Layer())
	for _, tt := range []struct {
		name string
		o    Options
		want func(error) bool
	}{
		{"an image without a manifest", Options{Base: missing, Image: others},
			func(err error) bool { return errors.Is(err, image.ErrNotLayered) }},
		{"a manifest file missing", Options{Base: missing, ManifestFile: filepath.Join(e.Dir, "no-such.json")},
			func(err error) bool {
				return errors.Is(err, fs.ErrNotExist) && strings.Contains(err.Error(), "no-such.json")
			}},
		{"a base missing", Options{Base: missing, Image: layered},
			func(err error) bool { return err != nil && strings.Contains(err.Error(), "no-such-base") }},
	} {
		tt.o.Images = e.Opts
		if _, err := Run(context.Background(), tt.o); !tt.want(err) {
			t.Errorf("Diff with %s: %v", tt.name, err)
		}
	}
	r, err := Run(context.Background(), Options{Base: e.Base, Image: layered, Images: e.Opts})
	if err != nil || r.Image.Reference != layered || len(r.Entries) == 0 {
		t.Fatalf("Diff of the layered image = %+v, %v", r, err)
	}
}

// TestDiffBaseDropinsOfEnabledUnit: diff --image L -f MC renders the
// MachineConfigs against L, whose drop-ins (under /usr and /etc) for a
// unit they enable systemctl enable reads.
func TestDiffBaseDropinsOfEnabledUnit(t *testing.T) {
	e := newEnv(t)
	mc := e.MC("50-crio", `{"systemd": {"units": [{"name": "crio.service", "enabled": true}]}}`)
	img := e.WriteBase("dropins", testbase.Layer{Files: []testbase.File{
		{Path: "usr/lib/systemd/system/crio.service.d/05-base.conf", Mode: 0o644, Content: []byte("[Install]\nWantedBy=sockets.target\n")},
		{Path: "etc/systemd/system/crio.service.d/06-etc.conf", Mode: 0o644, Content: []byte("[Service]\nEnvironment=X=1\n")},
	}})
	r, err := Run(context.Background(), Options{Base: e.Base, Image: img, MachineConfigs: []string{mc}, Images: e.Opts})
	if err != nil {
		t.Fatalf("Diff(--image with crio.service drop-ins -f crio.service enabled): %v", err)
	}
	const link = "/etc/systemd/system/sockets.target.wants/crio.service"
	if !slices.ContainsFunc(r.Entries, func(en revert.Entry) bool { return en.Want.Path == link }) {
		t.Errorf("Diff: no entry for %s, the link the drop-in's [Install] makes", link)
	}
}
