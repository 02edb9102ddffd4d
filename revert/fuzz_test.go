package revert

import (
	"path"
	"testing"
)

// FuzzParsePlan decodes arbitrary bytes as a revert plan: it must never
// panic, and a plan it accepts must name the two images and only clean
// paths below /etc to rewrite.
func FuzzParsePlan(f *testing.F) {
	const d = "sha256:0000000000000000000000000000000000000000000000000000000000000000"
	f.Add([]byte(`{"schemaVersion":1,"image":{"digest":"` + d + `"},"base":{"digest":"` + d + `"},"rewrite":[]}`))
	f.Add([]byte(`{"schemaVersion":1,"image":{"digest":"` + d + `","config":"` + d + `","diffIDs":["` + d + `"]},"base":{"digest":"` + d + `"},"rewrite":[{"path":"/etc/a","outcome":"removed","type":"file","mode":"0644","uid":0,"gid":0,"digest":"` + d + `","source":{"machineConfig":"a","field":"f"}}],"lost":[{"path":"/usr/x","outcome":"lost","type":"file","mode":"0644","uid":0,"gid":0,"source":{"machineConfig":"a","field":"f"}}]}`))
	f.Add([]byte(`{"schemaVersion":1,"image":{"digest":"x"},"base":{"digest":"y"},"rewrite":[{"path":"/etc/../etc/shadow","type":"symlink","target":"/x"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		p, err := ParsePlan(data)
		if err != nil {
			return
		}
		if p.Image.Digest == "" || p.Base.Digest == "" {
			t.Fatalf("ParsePlan accepted a plan without digests: %+v", p)
		}
		for _, pe := range p.Rewrite {
			if path.Clean(pe.Path) != pe.Path || ZoneOf(pe.Path) != ZoneEtc || pe.Path == "/etc" {
				t.Fatalf("ParsePlan accepted %q to rewrite", pe.Path)
			}
		}
	})
}
