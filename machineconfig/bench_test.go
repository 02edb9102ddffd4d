package machineconfig

import "testing"

// BenchmarkLoadWarm loads the reference rendered MachineConfig with a
// warm validation cache, as a warm build loads it (docs/design.md, The
// warm path).
func BenchmarkLoadWarm(b *testing.B) {
	saved := ignitionModule // a test binary records no modules
	ignitionModule = func() string { return "v2.0.0-bench h1:bench" }
	b.Cleanup(func() { ignitionModule = saved })
	paths := []string{"../testdata/machineconfigs/rendered-worker-aws.json"}
	o := LoadOptions{CacheDir: b.TempDir()}
	if _, err := LoadWith(paths, nil, o); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := LoadWith(paths, nil, o); err != nil {
			b.Fatal(err)
		}
	}
}
