package machineconfig

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"slices"
	"strings"
	"sync"

	"github.com/coreos/ignition/v2/config/util"
	"github.com/coreos/ignition/v2/config/v3_5/types"
)

// validCache remembers, by digest, the Ignition configs that Ignition's
// parser accepted with nothing to report (docs/design.md, The warm path).
// A config found there is decoded as Ignition's parser decodes it, without
// validating it again: validation was the largest part of a warm build's
// loading time.
// Only spec 3.5 configs are remembered, the ones the parser decodes
// without translating them. The key covers every module of the binary
// and the Go release (ignitionModule), so another parser never trusts
// this one's verdict. Its zero value remembers nothing.
type validCache struct{ dir string }

// validCacheSchema names the key's layout; change it when the key changes.
const validCacheSchema = "mcbake-ignition-valid-v1"

// ignitionModule names the parser whose verdicts the cache holds: the
// binary's every module (Ignition's validation runs code of go-systemd,
// dataurl, vcontext and more, which a go.mod can move without moving
// Ignition), with versions, checksums and replacements, and the Go
// release. It is "" when the binary does not record Ignition's module
// (then nothing is cached).
var ignitionModule = sync.OnceValue(func() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok || !slices.ContainsFunc(bi.Deps, func(d *debug.Module) bool {
		return d.Path == "github.com/coreos/ignition/v2" && d.Sum != ""
	}) {
		return ""
	}
	var b strings.Builder
	b.WriteString(runtime.Version())
	for _, d := range bi.Deps {
		fmt.Fprintf(&b, "\n%s %s %s", d.Path, d.Version, d.Sum)
		if r := d.Replace; r != nil {
			fmt.Fprintf(&b, " => %s %s %s", r.Path, r.Version, r.Sum)
		}
	}
	return b.String()
})

func newValidCache(dir string) validCache {
	if dir == "" || ignitionModule() == "" {
		return validCache{}
	}
	return validCache{dir: filepath.Join(dir, "ignition", "sha256")}
}

func (c validCache) file(raw []byte) string {
	h := sha256.New()
	h.Write([]byte(validCacheSchema + "\x00" + ignitionModule() + "\x00"))
	h.Write(raw)
	return filepath.Join(c.dir, hex.EncodeToString(h.Sum(nil)))
}

// lookup returns raw decoded as Ignition's spec 3.5 parser decodes it, if
// the parser accepted raw before.
func (c validCache) lookup(raw []byte) (types.Config, bool) {
	if c.dir == "" {
		return types.Config{}, false
	}
	if _, err := os.Lstat(c.file(raw)); err != nil {
		return types.Config{}, false
	}
	var cfg types.Config
	if err := json.Unmarshal(raw, &cfg); err != nil || cfg.Ignition.Version != types.MaxVersion.String() {
		return types.Config{}, false
	}
	return cfg, true
}

// store remembers raw, which the parser accepted with an empty report, if
// it is a spec 3.5 config. A cache that cannot be written only costs time.
func (c validCache) store(raw []byte) {
	if c.dir == "" {
		return
	}
	if v, _, err := util.GetConfigVersion(raw); err != nil || v != types.MaxVersion {
		return
	}
	f := c.file(raw)
	if err := os.MkdirAll(c.dir, 0o755); err != nil {
		return
	}
	if w, err := os.OpenFile(f, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644); err == nil {
		_ = w.Close()
	}
}
