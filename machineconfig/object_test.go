package machineconfig

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/google/go-cmp/cmp"
)

// objectConfig is the Ignition config of TestFromObject, as JSON.
const objectConfig = `{"ignition": {"version": "3.5.0"},
  "storage": {"files": [{"path": "/etc/a.conf", "mode": 420, "contents": {"source": "data:,a%0A"}}]},
  "systemd": {"units": [{"name": "foo.service", "enabled": false}]}}`

// TestFromObject: an in-memory MachineConfig, its spec.config decoded or
// raw, parses as its JSON does; its refusals are Parse's.
func TestFromObject(t *testing.T) {
	var cfg types.Config
	if err := json.Unmarshal([]byte(objectConfig), &cfg); err != nil {
		t.Fatal(err)
	}
	labels := map[string]string{RoleLabel: "worker"}
	doc := `{"apiVersion": "` + APIVersion + `", "kind": "MachineConfig", "metadata": {"name": "50-a", "labels": {"` + RoleLabel + `": "worker"}},
  "spec": {"config": ` + objectConfig + `}}`
	parsed, err := Parse("50-a.json", []byte(doc))
	if err != nil || len(parsed) != 1 {
		t.Fatalf("Parse: %v, %v", parsed, err)
	}
	cfg.Ignition.Version = ""
	for name, o := range map[string]Object{
		"decoded": {Name: "50-a", Labels: labels, Ignition: &cfg},
		"raw":     {Name: "50-a", Labels: labels, Spec: Spec{Config: json.RawMessage(objectConfig)}},
	} {
		mc, err := FromObject(o)
		if err != nil {
			t.Fatalf("FromObject(%s): %v", name, err)
		}
		if mc.Name != "50-a" || mc.Labels[RoleLabel] != "worker" || mc.Digest == "" || mc.File != "<object 50-a>" {
			t.Errorf("FromObject(%s) = %s %v %s %q", name, mc.Name, mc.Labels, mc.Digest, mc.File)
		}
		if diff := cmp.Diff(parsed[0].Ignition, mc.Ignition); diff != "" {
			t.Errorf("FromObject(%s): Ignition differs from Parse's (-Parse +FromObject):\n%s", name, diff)
		}
	}

	remote := "https://example.com/a"
	bad := cfg
	bad.Storage.Files = []types.File{{Node: types.Node{Path: "/etc/b"}, FileEmbedded1: types.FileEmbedded1{Contents: types.Resource{Source: &remote}}}}
	mc, err := FromObject(Object{Name: "50-b", Ignition: &bad})
	var fe *FieldError
	if mc == nil || !errors.As(err, &fe) || fe.Reason != ReasonUnsupported || fe.Field != "spec.config.storage.files[0].contents.source" || !strings.Contains(err.Error(), "<object 50-b>") {
		t.Errorf("FromObject(remote contents) = %v, %v; want a refusal of spec.config.storage.files[0].contents.source naming <object 50-b>", mc, err)
	}
	if _, err := FromObject(Object{Ignition: &cfg}); err == nil || !strings.Contains(err.Error(), "metadata.name") {
		t.Errorf("FromObject(no name) = %v, want a metadata.name error", err)
	}
}
