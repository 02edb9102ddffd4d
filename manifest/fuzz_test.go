package manifest

import (
	"bytes"
	"os"
	"testing"
)

// FuzzUnmarshal decodes arbitrary bytes as a manifest: it must never
// panic, and a manifest it accepts must encode to bytes that decode to the
// same encoding (Marshal is canonical).
func FuzzUnmarshal(f *testing.F) {
	f.Add([]byte(`{"schemaVersion":1,"machineConfigs":[],"entries":[]}`))
	f.Add([]byte(`{"schemaVersion":1,"machineConfigs":[{"name":"a","digest":"sha256:` + zeros + `"}],"entries":[{"path":"/etc/a","type":"file","mode":"0644","uid":0,"gid":0,"size":1,"digest":"sha256:` + zeros + `","source":{"machineConfig":"a","field":"spec"},"base":{"state":"differs","differs":["mode"]}}],"units":[{"name":"a.service","enablement":"enabled","source":{"machineConfig":"a","field":"x"}}]}`))
	if b, err := os.ReadFile("../testdata/golden/rendered-worker-aws.manifest.json"); err == nil {
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		m, err := Unmarshal(data)
		if err != nil {
			return
		}
		once, err := Marshal(m)
		if err != nil {
			t.Fatalf("Marshal of a decoded manifest: %v", err)
		}
		m2, err := Unmarshal(once)
		if err != nil {
			t.Fatalf("Unmarshal(Marshal(m)) = %v", err)
		}
		twice, err := Marshal(m2)
		if err != nil || !bytes.Equal(once, twice) {
			t.Fatalf("Marshal is not canonical: %s\nthen %s (%v)", once, twice, err)
		}
	})
}

const zeros = "0000000000000000000000000000000000000000000000000000000000000000"
