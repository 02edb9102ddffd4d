package machineconfig

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// roleMC is a MachineConfig with the given role label ("" for none) that
// writes /etc/x with content data and has the given extra spec lines.
func roleMC(t *testing.T, name, role, data, spec string) *MachineConfig {
	t.Helper()
	labels := ""
	if role != "" {
		labels = fmt.Sprintf("\n  labels: {%s: %s}", RoleLabel, role)
	}
	return parseOne(t, name+".yaml", fmt.Sprintf(`kind: MachineConfig
metadata:
  name: %s%s
spec:%s
  config:
    ignition: {version: 3.5.0}
    storage: {files: [{path: /etc/x, contents: {source: "data:,%s"}}]}
`, name, labels, spec, data))
}

func names(mcs []*MachineConfig) []string {
	var out []string
	for _, mc := range mcs {
		out = append(out, mc.Name)
	}
	return out
}

// TestMergeCustomPool: the MCO merges a custom pool's worker-role
// MachineConfigs first and the pool's own after them, so the pool's own
// win even when their names sort first.
func TestMergeCustomPool(t *testing.T) {
	tests := []struct {
		name      string
		mcs       []*MachineConfig
		wantOrder []string
		wantX     string
	}{{
		name:      "custom pool: worker ones first, then the pool's own",
		mcs:       []*MachineConfig{roleMC(t, "99-worker-x", "worker", "worker", ""), roleMC(t, "10-infra-x", "infra", "infra", ""), roleMC(t, "50-worker-y", "worker", "y", "")},
		wantOrder: []string{"50-worker-y", "99-worker-x", "10-infra-x"},
		wantX:     "data:,infra",
	}, {
		name:      "worker pool: by name",
		mcs:       []*MachineConfig{roleMC(t, "99-worker-x", "worker", "99", ""), roleMC(t, "10-worker-x", "worker", "10", "")},
		wantOrder: []string{"10-worker-x", "99-worker-x"},
		wantX:     "data:,99",
	}, {
		name:      "no labels: by name",
		mcs:       []*MachineConfig{roleMC(t, "99-x", "", "99", ""), roleMC(t, "10-x", "", "10", "")},
		wantOrder: []string{"10-x", "99-x"},
		wantX:     "data:,99",
	}, {
		name:      "unlabelled with worker ones: the worker pool, by name",
		mcs:       []*MachineConfig{roleMC(t, "99-worker-x", "worker", "99", ""), roleMC(t, "10-mine", "", "10", "")},
		wantOrder: []string{"10-mine", "99-worker-x"},
		wantX:     "data:,99",
	}, {
		name:      "unlabelled with a custom pool's: the pool's own, after the worker ones",
		mcs:       []*MachineConfig{roleMC(t, "99-worker-x", "worker", "99", ""), roleMC(t, "10-mine", "", "10", ""), roleMC(t, "20-infra", "infra", "20", "")},
		wantOrder: []string{"99-worker-x", "10-mine", "20-infra"},
		wantX:     "data:,20",
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Merge(tt.mcs)
			if diff := cmp.Diff(tt.wantOrder, names(m.MachineConfigs)); diff != "" {
				t.Errorf("Merge().MachineConfigs order mismatch (-want +got):\n%s", diff)
			}
			if got := *m.Files[0].Contents.Source; got != tt.wantX {
				t.Errorf("Merge() /etc/x = %s, want %s", got, tt.wantX)
			}
			if _, err := ForPool(tt.mcs, ""); err != nil {
				t.Errorf("ForPool() = %v, want nil", err)
			}
		})
	}
}

// TestForPool: --pool makes MachineConfigs without the role label the
// pool's own, so that a custom pool's unlabelled files win over worker
// ones; and refuses MachineConfigs the pool does not merge.
func TestForPool(t *testing.T) {
	worker := roleMC(t, "99-worker-x", "worker", "worker", "")
	mine := roleMC(t, "10-mine", "", "mine", "")
	got, err := ForPool([]*MachineConfig{worker, mine}, "infra")
	if err != nil {
		t.Fatalf("ForPool(infra) = %v", err)
	}
	if r := got[1].Role(); r != "infra" {
		t.Errorf("ForPool(infra)[10-mine].Role() = %q, want infra", r)
	}
	if mine.Role() != "" {
		t.Errorf("ForPool changed its input: 10-mine has role %q", mine.Role())
	}
	m := Merge(got)
	if diff := cmp.Diff([]string{"99-worker-x", "10-mine"}, names(m.MachineConfigs)); diff != "" {
		t.Errorf("Merge(ForPool(infra)) order mismatch (-want +got):\n%s", diff)
	}
	if x := *m.Files[0].Contents.Source; x != "data:,mine" {
		t.Errorf("Merge(ForPool(infra)) /etc/x = %s, want data:,mine", x)
	}
	if got, err := ForPool([]*MachineConfig{worker, mine}, ""); err != nil || got[1].Role() != "worker" {
		t.Errorf("ForPool(\"\") = role %q, %v; want the inferred worker pool", got[1].Role(), err)
	}

	refused := []struct {
		name string
		mcs  []*MachineConfig
		pool string
		want string
	}{{
		name: "the master pool does not merge worker ones",
		mcs:  []*MachineConfig{worker, roleMC(t, "00-master", "master", "m", "")},
		pool: "master",
		want: `99-worker-x.yaml: 99-worker-x: metadata.labels[machineconfiguration.openshift.io/role]: role "worker" is not merged by pool "master" (it merges only its own MachineConfigs)`,
	}, {
		name: "a custom pool does not merge another one's",
		mcs:  []*MachineConfig{worker, roleMC(t, "00-gpu", "gpu", "g", "")},
		pool: "infra",
		want: `00-gpu.yaml: 00-gpu: metadata.labels[machineconfiguration.openshift.io/role]: role "gpu" is not merged by pool "infra" (a custom pool merges the worker MachineConfigs, then its own)`,
	}, {
		name: "no pool merges master and worker ones",
		mcs:  []*MachineConfig{worker, roleMC(t, "00-master", "master", "m", "")},
		want: "MachineConfigs for roles worker, master (label machineconfiguration.openshift.io/role): no single pool merges them; give the pool (--pool)",
	}, {
		name: "no pool merges two custom pools' ones",
		mcs:  []*MachineConfig{roleMC(t, "00-gpu", "gpu", "g", ""), roleMC(t, "00-infra", "infra", "i", "")},
		want: "MachineConfigs for roles gpu, infra (label machineconfiguration.openshift.io/role): no single pool merges them; give the pool (--pool)",
	}}
	for _, tt := range refused {
		t.Run(tt.name, func(t *testing.T) {
			_, err := ForPool(tt.mcs, tt.pool)
			if err == nil || err.Error() != tt.want {
				t.Errorf("ForPool(%q) = %v, want %s", tt.pool, err, tt.want)
			}
		})
	}
}

// TestMergeCompressionReset: the MCO sets a later file's nil compression
// to "" before merging, so an earlier gzip file overridden by a plain one
// is plain (Ignition's merge alone would keep "gzip" with plain content).
func TestMergeCompressionReset(t *testing.T) {
	gz := parseOne(t, "gz.yaml", `kind: MachineConfig
metadata: {name: 00-gzip}
spec:
  config:
    ignition: {version: 3.5.0}
    storage: {files: [{path: /etc/x, contents: {compression: gzip, source: "data:;base64,H4sIAAAAAAAA/8tIzcnJBwCGphA2BQAAAA=="}}, {path: /etc/y, contents: {compression: gzip, source: "data:;base64,H4sIAAAAAAAA/8tIzcnJBwCGphA2BQAAAA=="}}]}
`)
	plain := parseOne(t, "plain.yaml", `kind: MachineConfig
metadata: {name: 99-plain}
spec:
  config:
    ignition: {version: 3.5.0}
    storage: {files: [{path: /etc/x, contents: {source: "data:,plain"}}, {path: /etc/y, mode: 0600}]}
`)
	m := Merge([]*MachineConfig{plain, gz})
	x, y := m.Files[0], m.Files[1]
	if x.Contents.Compression != nil || *x.Contents.Source != "data:,plain" {
		t.Errorf("merged /etc/x contents = compression %v, source %q; want none, data:,plain", deref(x.Contents.Compression), *x.Contents.Source)
	}
	// A later definition without compression resets it even when it does
	// not set the source: the MCO then writes the gzip bytes as they are.
	if y.Contents.Compression != nil || *y.Mode != 0o600 {
		t.Errorf("merged /etc/y = compression %v, mode %v; want none, 0600 (as the MCO merges it)", deref(y.Contents.Compression), y.Mode)
	}
	// The first MachineConfig's own files keep their compression.
	if c := Merge([]*MachineConfig{gz}).Files[0].Contents.Compression; c == nil || *c != "gzip" {
		t.Errorf("Merge(00-gzip) /etc/x compression = %v, want gzip", deref(c))
	}
}

func deref(s *string) string {
	if s == nil {
		return "<nil>"
	}
	return fmt.Sprintf("%q", *s)
}

// TestMergeKernelType: realtime or 64k-pages in any MachineConfig wins
// over default and unset, whatever the order; between the two, the last
// in merge order.
func TestMergeKernelType(t *testing.T) {
	tests := []struct {
		types []string // by MachineConfig, in name order
		want  string
	}{
		{[]string{"", ""}, ""},
		{[]string{"default", ""}, "default"},
		{[]string{"realtime", "default"}, "realtime"},
		{[]string{"", "64k-pages", "default"}, "64k-pages"},
		{[]string{"64k-pages", "realtime", ""}, "realtime"},
		{[]string{"realtime", "64k-pages"}, "64k-pages"},
	}
	for _, tt := range tests {
		var mcs []*MachineConfig
		for i, k := range tt.types {
			spec := ""
			if k != "" {
				spec = "\n  kernelType: " + k
			}
			mcs = append(mcs, roleMC(t, fmt.Sprintf("%02d-k", i), "", "x", spec))
		}
		if got := Merge(mcs).KernelType; got != tt.want {
			t.Errorf("Merge(kernelTypes %q).KernelType = %q, want %q", tt.types, got, tt.want)
		}
	}
}

// TestMergeOSImageURLIgnoresGenerated: the MCO takes osImageURL and
// baseOSExtensionsContainerImage only from MachineConfigs no controller
// generated.
func TestMergeOSImageURLIgnoresGenerated(t *testing.T) {
	user := roleMC(t, "10-user", "", "x", "\n  osImageURL: quay.io/user/os\n  baseOSExtensionsContainerImage: quay.io/user/ext")
	gen := parseOne(t, "gen.yaml", fmt.Sprintf(`kind: MachineConfig
metadata:
  name: 99-generated
  annotations: {%s: v4.18}
spec: {osImageURL: quay.io/generated/os, baseOSExtensionsContainerImage: quay.io/generated/ext}
`, GeneratedByAnnotation))
	m := Merge([]*MachineConfig{gen, user})
	if m.OSImageURL != "quay.io/user/os" || m.BaseOSExtensionsContainerImage != "quay.io/user/ext" {
		t.Errorf("Merge() osImageURL, extensions image = %q, %q; want the user MachineConfig's", m.OSImageURL, m.BaseOSExtensionsContainerImage)
	}
}

// TestMergeRefusals: what the MCO refuses to merge or validate.
func TestMergeRefusals(t *testing.T) {
	rt := roleMC(t, "50-rt", "", "x", "\n  kernelType: realtime")
	devel := roleMC(t, "60-devel", "", "x", "\n  extensions: [usbguard, kernel-devel]")
	err := CheckMerge([]*MachineConfig{devel, rt})
	want := "60-devel.yaml: 60-devel: spec.extensions[1]: the kernel-devel extension is not supported with kernelType realtime (the merged kernelType)"
	if err == nil || err.Error() != want {
		t.Errorf("CheckMerge(kernel-devel, realtime) = %v, want %s", err, want)
	}
	if err := CheckMerge([]*MachineConfig{devel}); err != nil {
		t.Errorf("CheckMerge(kernel-devel) = %v, want nil with the default kernel", err)
	}
	_, err = Parse("k.yaml", []byte("kind: MachineConfig\nmetadata: {name: 00-k}\nspec: {kernelType: rt}\n"))
	if want := `k.yaml: 00-k: spec.kernelType: kernelType "rt" is invalid (want default, realtime or 64k-pages)`; err == nil || err.Error() != want {
		t.Errorf("Parse(kernelType rt) = %v, want %s", err, want)
	}
	t.Chdir(t.TempDir())
	writeFiles(t, ".", map[string]string{"w.yaml": "kind: MachineConfig\nmetadata: {name: 00-w, labels: {" + RoleLabel + ": worker}}\n",
		"m.yaml": "kind: MachineConfig\nmetadata: {name: 00-m, labels: {" + RoleLabel + ": master}}\n"})
	if _, err := Load([]string{"w.yaml", "m.yaml"}, nil); err == nil || !strings.Contains(err.Error(), "no single pool merges them") {
		t.Errorf("Load(worker, master) = %v, want the pool error", err)
	}
}

// TestMergeRefusesFileWithoutSource: a merged file with neither
// contents.source nor overwrite is refused, as the MCO's merge (which sets
// overwrite: true on it) and Ignition's validation refuse it; overwrite:
// false, or a source from any MachineConfig that defines the path, is
// fine.
func TestMergeRefusesFileWithoutSource(t *testing.T) {
	mc := func(name, file string) *MachineConfig {
		return parseOne(t, name+".yaml", fmt.Sprintf("kind: MachineConfig\nmetadata: {name: %s}\nspec:\n  config:\n    ignition: {version: 3.5.0}\n    storage: {files: [{path: /etc/other, contents: {source: \"data:,x\"}}, %s]}\n", name, file))
	}
	bare := mc("50-bare", "{path: /etc/empty, mode: 0644}")
	noOverwrite := mc("40-false", "{path: /etc/empty, overwrite: false}")
	source := mc("60-source", `{path: /etc/empty, contents: {source: "data:,"}}`)
	earlier := mc("10-source", `{path: /etc/empty, contents: {source: "data:,y"}}`)
	want := "50-bare.yaml: 50-bare: spec.config.storage.files[1].overwrite: file /etc/empty: overwrite must be false if source is unspecified (the MCO's merge sets overwrite: true on a file without it, and Ignition then refuses the rendered config): give contents.source (data:, for an empty file) or overwrite: false"
	if err := CheckMerge([]*MachineConfig{bare}); err == nil || err.Error() != want {
		t.Errorf("CheckMerge(no source, no overwrite) = %v, want %s", err, want)
	}
	var fe *FieldError
	if err := CheckMerge([]*MachineConfig{bare}); !errors.As(err, &fe) || fe.Reason != ReasonInvalid {
		t.Errorf("CheckMerge(no source, no overwrite) = %#v, want a FieldError of ReasonInvalid", err)
	}
	for _, tt := range []struct {
		name string
		mcs  []*MachineConfig
	}{
		{"overwrite: false", []*MachineConfig{noOverwrite}},
		{"overwrite: false merged under a bare one", []*MachineConfig{noOverwrite, bare}},
		{"a later source", []*MachineConfig{bare, source}},
		{"an earlier source", []*MachineConfig{earlier, bare}},
	} {
		if err := CheckMerge(tt.mcs); err != nil {
			t.Errorf("CheckMerge(%s) = %v, want nil", tt.name, err)
		}
	}
}
