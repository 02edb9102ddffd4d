package machineconfig

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"unicode"

	igerrors "github.com/coreos/ignition/v2/config/shared/errors"
	v35 "github.com/coreos/ignition/v2/config/v3_5"
	"github.com/coreos/ignition/v2/config/v3_5/types"
	"github.com/coreos/vcontext/report"
	"github.com/opencontainers/go-digest"
)

// Kind and APIVersion of a MachineConfig object.
const (
	Kind       = "MachineConfig"
	APIVersion = "machineconfiguration.openshift.io/v1"
)

// MachineConfig is one parsed MachineConfig. Get it from Parse or Load:
// they refuse what the machine-config-daemon does not apply (Refusals)
// and set Digest, which one built by hand skips. A program that holds the
// MCO's own object (mcfgv1.MachineConfig) passes its fields to FromObject
// (spec.config raw or as an Ignition config), or its JSON to Parse.
type MachineConfig struct {
	// File is where it was read from ("<stdin>" for standard input).
	File string
	Name string
	// Labels and Annotations are the object's metadata.labels and
	// metadata.annotations (RoleLabel says which pool's role it is for).
	Labels      map[string]string
	Annotations map[string]string
	// Digest is the sha256 of the object's canonical JSON.
	Digest digest.Digest
	Spec   Spec
	// Ignition is the parsed spec.config, translated to spec 3.5 (from
	// spec 2 as the MCO converts it).
	Ignition types.Config
	// Warnings are the fields it sets that nothing reads, each at its
	// field (Reason ReasonUnused): keys Ignition reports as unused (it
	// ignores them, as the machine-config-daemon does: a misspelt mode
	// leaves the default), fields a MachineConfig does not have (the API
	// server prunes them) and Butane's warnings. They do not stop a
	// build; verify reports them (MCB023).
	Warnings []*FieldError
	// fields maps JSON paths of Ignition to those of the config as
	// written, where they differ (a converted spec 2 config); see Field.
	fields map[string]string
}

// Field returns the JSON path, in the MachineConfig as written, of a field
// of mc.Ignition (spec.config.storage.files[0].mode). They differ only
// for a spec 2 config, whose duplicate files and users the conversion
// folds.
func (mc *MachineConfig) Field(f string) string { return mapField(mc.fields, f) }

// Spec is a MachineConfig's spec, with the Ignition config left raw.
type Spec struct {
	OSImageURL                     string          `json:"osImageURL,omitempty"`
	BaseOSExtensionsContainerImage string          `json:"baseOSExtensionsContainerImage,omitempty"`
	Config                         json.RawMessage `json:"config,omitempty"`
	KernelArguments                []string        `json:"kernelArguments,omitempty"`
	Extensions                     []string        `json:"extensions,omitempty"`
	FIPS                           bool            `json:"fips,omitempty"`
	KernelType                     string          `json:"kernelType,omitempty"`
}

type object struct {
	APIVersion string   `json:"apiVersion"`
	Kind       string   `json:"kind"`
	Metadata   metadata `json:"metadata"`
	Spec       Spec     `json:"spec"`
}

type metadata struct {
	Name        string            `json:"name"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// FieldError is a problem with one field of one MachineConfig.
type FieldError struct {
	File          string
	MachineConfig string
	// Field is the JSON path, e.g. spec.config.storage.files[2].append.
	Field string
	// Reason classifies the problem, for callers that branch on it.
	Reason Reason
	Msg    string
	// Kind is the object's kind, for ReasonOtherKind.
	Kind string
}

// Reason classifies a FieldError, so that callers (the verify rules)
// branch on a code, never on the wording of a message.
type Reason string

// Reasons.
const (
	// ReasonInvalid: the object or its Ignition config does not parse or
	// does not validate.
	ReasonInvalid Reason = "invalid"
	// ReasonUnsupported: valid Ignition that the machine-config-daemon
	// does not apply, or that an offline build cannot (remote content).
	ReasonUnsupported Reason = "unsupported"
	// ReasonContent: a file's contents do not decode (data URL, gzip,
	// verification hash, size limits).
	ReasonContent Reason = "content"
	// ReasonRender: what the machine-config-daemon would write cannot be
	// written against the root (clashes, links, enablement, parsing a
	// unit file).
	ReasonRender Reason = "render"
	// ReasonUnused: a field nothing reads (MachineConfig.Warnings).
	ReasonUnused Reason = "unused"
	// ReasonOtherKind: the object is of another kind (a KubeletConfig, a
	// MachineConfigPool, a ConfigMap); in a directory's files it is
	// skipped (LoadOptions.Skipped).
	ReasonOtherKind Reason = "other-kind"
)

// OtherKindHint says what to pass instead of an object of kind, which
// mcbake does not read.
func OtherKindHint(kind string) string {
	switch kind {
	case "KubeletConfig", "ContainerRuntimeConfig", "ControllerConfig":
		return "the MCO renders it into the pool's rendered MachineConfig: pass that, oc get mc rendered-POOL-…"
	case "MachineConfigPool":
		return "name the pool with --pool"
	case "MachineOSConfig", "MachineOSBuild":
		return "on-cluster layering's objects: pass the MachineConfigs the pool renders"
	}
	return "mcbake reads MachineConfigs only"
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%s: %s: %s: %s", e.File, e.MachineConfig, e.Field, e.Msg)
}

// parseObject parses one MachineConfig object. It returns the
// MachineConfig (when its Ignition config parsed) together with every
// refusal found in it.
func parseObject(file string, raw json.RawMessage, cache validCache) (*MachineConfig, error) {
	var obj object
	if err := json.Unmarshal(raw, &obj); err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	top, spec := exactKeys(raw, &obj)
	name := obj.Metadata.Name
	ferr := func(field, msg string) error {
		return &FieldError{File: file, MachineConfig: orUnnamed(name), Field: field, Reason: ReasonInvalid, Msg: msg}
	}
	switch {
	case obj.Kind == Kind, storedByDaemon(obj, top):
	case obj.Kind == "" && top["ignition"] != nil:
		return nil, ferr("kind", "this is an Ignition config, not a MachineConfig: put it in a MachineConfig's spec.config")
	case obj.Kind != "":
		return nil, &FieldError{File: file, MachineConfig: orUnnamed(name), Field: "kind", Reason: ReasonOtherKind,
			Msg: fmt.Sprintf("kind %q is not %s (or a List of them)", obj.Kind, Kind), Kind: obj.Kind}
	default:
		return nil, ferr("kind", fmt.Sprintf("kind %q is not %s (or a List of them)", obj.Kind, Kind))
	}
	if obj.APIVersion != "" && obj.APIVersion != APIVersion {
		return nil, ferr("apiVersion", fmt.Sprintf("apiVersion %q is not %s, the only one the API server serves for %s", obj.APIVersion, APIVersion, Kind))
	}
	if name == "" {
		return nil, ferr("metadata.name", "MachineConfig has no name")
	}
	if why := badName(name); why != "" {
		return nil, ferr("metadata.name", fmt.Sprintf("name %s is not one the API server accepts: %s", strconv.Quote(name), why))
	}
	mc := &MachineConfig{File: file, Name: name, Labels: obj.Metadata.Labels, Annotations: obj.Metadata.Annotations,
		Digest: digest.FromBytes(raw), Spec: obj.Spec}
	cfg, fields, warnings, err := parseIgnition(obj.Spec.Config, cache)
	if err != nil {
		return nil, withContext(errors.Join(err, specErrors(obj.Spec), refusalsUnvalidated(obj.Spec.Config, err)), file, name, nil)
	}
	mc.Ignition, mc.fields = cfg, fields
	for _, w := range append(unknownFields(top, spec), warnings...) {
		w.File, w.MachineConfig = file, name
		mc.Warnings = append(mc.Warnings, w)
	}
	return mc, withContext(errors.Join(specErrors(obj.Spec), Refusals(cfg)), file, name, fields)
}

// storedByDaemon reports whether obj is a MachineConfig as the
// machine-config-daemon stores it at /etc/machine-config-daemon/currentconfig:
// json.Marshal of the object a lister returned, which has neither
// apiVersion nor kind (client-go leaves them empty, and both are
// omitempty), but has a spec (docs/node.md, The revert guard).
func storedByDaemon(obj object, top map[string]json.RawMessage) bool {
	_, spec := top["spec"]
	return obj.Kind == "" && obj.APIVersion == "" && spec
}

// refusalsUnvalidated returns the refusals of a spec 3 config that
// Ignition did not validate (err), at the fields err does not already
// name: every problem is reported at once, not Ignition's first and then
// mcbake's. A config that does not even decode has none.
func refusalsUnvalidated(raw json.RawMessage, err error) error {
	var cfg types.Config
	if json.Unmarshal(raw, &cfg) != nil || !strings.HasPrefix(cfg.Ignition.Version, "3.") {
		return nil
	}
	named := map[string]bool{}
	for _, e := range Errors(err) {
		if fe := (*FieldError)(nil); errors.As(e, &fe) {
			named[fe.Field] = true
		}
	}
	var out []error
	for _, e := range Errors(Refusals(cfg)) {
		if fe := (*FieldError)(nil); !errors.As(e, &fe) || !named[fe.Field] {
			out = append(out, e)
		}
	}
	return errors.Join(out...)
}

// exactKeys undoes what encoding/json read from a key that matches a
// field only in another case ("Config" for config): the API server
// matches keys exactly and drops such a key, so the cluster never
// applies it (unknownFields warns of it).
// It returns the object's keys and its spec's.
func exactKeys(raw json.RawMessage, obj *object) (top, spec map[string]json.RawMessage) {
	var meta map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return nil, nil
	}
	has := func(m map[string]json.RawMessage, k string) bool { _, ok := m[k]; return ok }
	if !has(top, "apiVersion") {
		obj.APIVersion = ""
	}
	if !has(top, "kind") {
		obj.Kind = ""
	}
	if !has(top, "metadata") || json.Unmarshal(top["metadata"], &meta) != nil {
		obj.Metadata = metadata{}
	} else {
		if !has(meta, "name") {
			obj.Metadata.Name = ""
		}
		if !has(meta, "labels") {
			obj.Metadata.Labels = nil
		}
		if !has(meta, "annotations") {
			obj.Metadata.Annotations = nil
		}
	}
	if !has(top, "spec") || json.Unmarshal(top["spec"], &spec) != nil {
		obj.Spec = Spec{}
		return top, nil
	}
	for k, zero := range specFields {
		if !has(spec, k) {
			zero(&obj.Spec)
		}
	}
	return top, spec
}

// MaxWarnings is how many warnings a MachineConfig keeps: the rest are
// counted in one more, so that a config of a million misspelt keys costs
// a line, not a million.
const MaxWarnings = 100

// capWarnings keeps the first MaxWarnings of ws and counts the rest in
// one more warning. A field (the key as written) or message that is not
// printable on one line is quoted.
func capWarnings(ws []*FieldError) []*FieldError {
	unprintable := func(s string) bool {
		return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) >= 0
	}
	for _, w := range ws {
		if unprintable(w.Field) {
			w.Field = strconv.Quote(w.Field)
		}
		if unprintable(w.Msg) {
			q := strconv.Quote(w.Msg)
			w.Msg = q[1 : len(q)-1]
		}
	}
	if len(ws) <= MaxWarnings {
		return ws
	}
	last := ws[MaxWarnings-1]
	more := &FieldError{File: last.File, MachineConfig: last.MachineConfig, Field: "spec", Reason: ReasonUnused,
		Msg: fmt.Sprintf("and %d more fields nothing reads", len(ws)-MaxWarnings)}
	return append(ws[:MaxWarnings:MaxWarnings], more)
}

// Fields a MachineConfig object has; the API server prunes any other
// (spec.config is Ignition's, checked by Ignition). Each of the spec's
// comes with what clears it in a Spec (exactKeys).
var (
	objectFields = []string{"apiVersion", "kind", "metadata", "spec", "status"}
	specFields   = map[string]func(*Spec){
		"osImageURL":                     func(s *Spec) { s.OSImageURL = "" },
		"baseOSExtensionsContainerImage": func(s *Spec) { s.BaseOSExtensionsContainerImage = "" },
		"config":                         func(s *Spec) { s.Config = nil },
		"kernelArguments":                func(s *Spec) { s.KernelArguments = nil },
		"extensions":                     func(s *Spec) { s.Extensions = nil },
		"fips":                           func(s *Spec) { s.FIPS = false },
		"kernelType":                     func(s *Spec) { s.KernelType = "" },
	}
)

// unknownFields warns of the fields of an object (its keys top), and of
// its spec, that a MachineConfig does not have.
func unknownFields(top, spec map[string]json.RawMessage) []*FieldError {
	var out []*FieldError
	unknown := func(prefix string, m map[string]json.RawMessage, known func(string) bool) {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !known(k) {
				out = append(out, &FieldError{Field: prefix + k, Reason: ReasonUnused,
					Msg: fmt.Sprintf("unknown field %s: a MachineConfig has no such field, and the API server drops it", strconv.Quote(k))})
			}
		}
	}
	unknown("", top, func(k string) bool { return slices.Contains(objectFields, k) })
	unknown("spec.", spec, func(k string) bool { _, ok := specFields[k]; return ok })
	return out
}

// specErrors refuses what the MCO's ValidateMachineConfig refuses beside
// the Ignition config: an unknown kernelType.
func specErrors(s Spec) error {
	switch s.KernelType {
	case "", KernelDefault, KernelRealtime, Kernel64kPages:
		return nil
	}
	return &FieldError{Field: "spec.kernelType", Reason: ReasonInvalid,
		Msg: fmt.Sprintf("kernelType %q is invalid (want %s, %s or %s)", s.KernelType, KernelDefault, KernelRealtime, Kernel64kPages)}
}

func orUnnamed(name string) string {
	switch {
	case name == "":
		return "<unnamed>"
	case badName(name) != "":
		return strconv.Quote(name)
	}
	return name
}

// dnsLabel is a label of an RFC 1123 subdomain.
var dnsLabel = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// badName says why name is not a valid MachineConfig name, "" when it is:
// the API server takes only a DNS subdomain (RFC 1123: lowercase letters,
// digits, '-' and '.', at most 253 characters) for a custom resource, so
// no cluster has such a MachineConfig; and a name is printed in every
// error about the MachineConfig, on one line.
func badName(name string) string {
	if len(name) > 253 {
		return fmt.Sprintf("%d characters, more than 253", len(name))
	}
	for _, l := range strings.Split(name, ".") {
		if !dnsLabel.MatchString(l) {
			return "it must be a lowercase RFC 1123 subdomain (a-z, 0-9, '-' and '.', starting and ending with a letter or digit)"
		}
	}
	return ""
}

// parseIgnition parses spec.config with ignition's own parser for specs 3.0
// to 3.5, and converts a spec 2 config as the MCO does (parseIgnition2).
// An absent config is an empty 3.5 config. fields maps JSON paths of the
// result to those of the config as written, when they differ.
func parseIgnition(raw json.RawMessage, cache validCache) (types.Config, map[string]string, []*FieldError, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return types.Config{Ignition: types.Ignition{Version: types.MaxVersion.String()}}, nil, nil, nil
	}
	if cfg, ok := cache.lookup(raw); ok {
		return cfg, nil, nil, nil
	}
	cfg, rpt, err := v35.ParseCompatibleVersion(raw)
	if err == nil && len(rpt.Entries) == 0 {
		cache.store(raw)
	}
	if errors.Is(err, igerrors.ErrUnknownVersion) {
		if cfg, fields, ok, err2 := parseIgnition2(raw); ok {
			return cfg, fields, nil, err2
		}
	}
	if err != nil {
		return types.Config{}, nil, nil, reportErrors(err, rpt, raw)
	}
	return cfg, nil, reportWarnings(rpt, raw), nil
}

// reportWarnings turns the unused keys of ignition's report on raw into
// field errors of ReasonUnused. Its other warnings (an enabled unit
// without an [Install] section, special mode bits, …) are verify's own
// rules.
func reportWarnings(rpt report.Report, raw []byte) []*FieldError {
	var out []*FieldError
	var units unitNameIndex
	read := false
	for _, e := range rpt.Entries {
		if e.Kind.IsFatal() || !isUnusedKey(e.Message) {
			continue
		}
		if !read {
			units, read = unitNames(raw), true
		}
		out = append(out, &FieldError{Field: ignitionField(e.Context.Path, units), Reason: ReasonUnused,
			Msg: e.Message + ": Ignition ignores it, as the machine-config-daemon does"})
	}
	return out
}

// reportErrors turns ignition's validation report on raw into field
// errors. A value of the wrong type (a string mode) is reported by
// Ignition at the config with only its offset: its field is found there.
func reportErrors(err error, rpt report.Report, raw []byte) error {
	units := unitNames(raw)
	var errs []error
	for _, e := range rpt.Entries {
		if !e.Kind.IsFatal() {
			continue
		}
		p := e.Context.Path
		if len(p) == 0 && e.Marker.StartP != nil {
			p = jsonPathAt(raw, e.Marker.StartP.Index)
		}
		errs = append(errs, &FieldError{Field: ignitionField(p, units), Reason: ReasonInvalid, Msg: e.Message})
	}
	if len(errs) == 0 {
		field := "spec.config"
		if errors.Is(err, igerrors.ErrUnknownVersion) || errors.Is(err, igerrors.ErrInvalidVersion) {
			field = "spec.config.ignition.version"
		}
		errs = append(errs, &FieldError{Field: field, Reason: ReasonInvalid, Msg: err.Error()})
	}
	return errors.Join(errs...)
}

// jsonPathAt returns the path (keys and indices) of the value of the JSON
// document raw that ends at byte offset off, where encoding/json reports
// a value of the wrong type; nil when there is none.
func jsonPathAt(raw []byte, off int64) []interface{} {
	type frame struct {
		array   bool
		index   int
		key     string
		wantKey bool
	}
	var stack []*frame
	path := func() []interface{} {
		var p []interface{}
		for _, f := range stack {
			if f.array {
				p = append(p, f.index)
			} else {
				p = append(p, f.key)
			}
		}
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	for {
		tok, err := dec.Token()
		if err != nil {
			return nil
		}
		var top *frame
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if d, ok := tok.(json.Delim); ok && (d == '}' || d == ']') {
			stack = stack[:len(stack)-1]
			if dec.InputOffset() >= off {
				return path()
			}
			if len(stack) > 0 && !stack[len(stack)-1].array {
				stack[len(stack)-1].wantKey = true
			}
			continue
		}
		if top != nil && !top.array && top.wantKey {
			top.key, top.wantKey = tok.(string), false
			continue
		}
		if top != nil && top.array {
			top.index++
		}
		// An object or array where a scalar belongs is reported just
		// after its opening delimiter.
		if dec.InputOffset() >= off {
			return path()
		}
		switch tok {
		case json.Delim('{'):
			stack = append(stack, &frame{wantKey: true})
			continue
		case json.Delim('['):
			stack = append(stack, &frame{array: true, index: -1})
			continue
		}
		if top != nil && !top.array {
			top.wantKey = true
		}
	}
}

// unitNameIndex holds the unit and drop-in names of a raw config, by
// index, so that field paths can name units as the rest of mcbake does.
type unitNameIndex []struct {
	Name    string `json:"name"`
	Dropins []struct {
		Name string `json:"name"`
	} `json:"dropins"`
}

// unitNames reads what it can of raw's units; a config too broken for
// that gets index paths.
func unitNames(raw []byte) unitNameIndex {
	var cfg struct {
		Systemd struct {
			Units unitNameIndex `json:"units"`
		} `json:"systemd"`
	}
	_ = json.Unmarshal(raw, &cfg)
	return cfg.Systemd.Units
}

// ignitionField renders a vcontext path ([storage files 0 path]) as
// spec.config.storage.files[0].path; units and drop-ins are named
// (spec.config.systemd.units[kubelet.service].dropins[10-a.conf]).
func ignitionField(p []interface{}, units unitNameIndex) string {
	var b strings.Builder
	b.WriteString("spec.config")
	unit := -1
	for i, e := range p {
		n, isIndex := e.(int)
		if !isIndex || i == 0 {
			fmt.Fprintf(&b, ".%v", e)
			continue
		}
		switch name := p[i-1]; {
		case name == "units" && n < len(units) && units[n].Name != "":
			unit = n
			fmt.Fprintf(&b, "[%s]", units[n].Name)
		case name == "dropins" && unit >= 0 && n < len(units[unit].Dropins) && units[unit].Dropins[n].Name != "":
			fmt.Fprintf(&b, "[%s]", units[unit].Dropins[n].Name)
		default:
			fmt.Fprintf(&b, "[%d]", n)
		}
	}
	return b.String()
}

// withContext fills in the file and MachineConfig of every FieldError in
// err (a single error or a tree of errors.Join), maps its field to the
// config as written (see parseIgnition), and returns them joined flat.
func withContext(err error, file, name string, fields map[string]string) error {
	errs := Errors(err)
	for _, e := range errs {
		var fe *FieldError
		if errors.As(e, &fe) {
			fe.File, fe.MachineConfig, fe.Field = file, name, mapField(fields, fe.Field)
		}
	}
	return errors.Join(errs...)
}

// Errors lists the problems err joins: the leaves of its errors.Join
// tree, each FieldError on its own, as Load, Parse, CheckMerge and
// rendering report them. A nil err has none.
func Errors(err error) []error {
	if err == nil {
		return nil
	}
	j, ok := err.(interface{ Unwrap() []error })
	if !ok {
		return []error{err}
	}
	var out []error
	for _, e := range j.Unwrap() {
		out = append(out, Errors(e)...)
	}
	return out
}

// JSON returns the MachineConfig as an object: its name, labels,
// annotations and spec (the Ignition config as it was given). Parse reads
// it back to the same MachineConfig, but for File and Digest.
func (mc *MachineConfig) JSON() ([]byte, error) {
	var obj object
	obj.APIVersion, obj.Kind, obj.Metadata.Name, obj.Spec = APIVersion, Kind, mc.Name, mc.Spec
	obj.Metadata.Labels, obj.Metadata.Annotations = mc.Labels, mc.Annotations
	return json.Marshal(obj)
}
