package machineconfig

import (
	"encoding/json"
	"fmt"

	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// Object is a MachineConfig held in memory: the fields mcbake reads of the
// MCO's own object (mcfgv1.MachineConfig), with spec.config either raw, as
// that object holds it, or an Ignition config already decoded.
type Object struct {
	Name                string
	Labels, Annotations map[string]string
	// Spec is the object's spec; Spec.Config is spec.config's JSON, used
	// when Ignition is nil.
	Spec Spec
	// Ignition, when set, is spec.config (its version "" means 3.5.0, the
	// version of its types).
	Ignition *types.Config
}

// FromObject parses an in-memory MachineConfig as Parse parses its JSON
// (its digest is that JSON's): the same refusals and warnings, errors
// naming it as "<object NAME>". Like Parse it returns the
// MachineConfig even when it has refusals, with every problem found.
func FromObject(o Object) (*MachineConfig, error) {
	file := fmt.Sprintf("<object %s>", o.Name)
	spec := o.Spec
	if o.Ignition != nil {
		cfg := *o.Ignition
		if cfg.Ignition.Version == "" {
			cfg.Ignition.Version = types.MaxVersion.String()
		}
		b, err := json.Marshal(cfg)
		if err != nil {
			return nil, fmt.Errorf("%s: spec.config: %w", file, err)
		}
		spec.Config = b
	}
	raw, err := json.Marshal(object{APIVersion: APIVersion, Kind: Kind,
		Metadata: metadata{Name: o.Name, Labels: o.Labels, Annotations: o.Annotations}, Spec: spec})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return parseObject(file, raw, validCache{})
}
